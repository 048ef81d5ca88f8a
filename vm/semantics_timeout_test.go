package vm_test

import (
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// SetTimeout raises Timeout once its duration has passed, not a
// millisecond before.
func TestSemTimeoutFiresOnTime(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 250 * time.Millisecond, 1500 * time.Millisecond, time.Minute} {
		t.Run(d.String(), func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("wait")
				as.SetTimeout(d)
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
			})
			f := root.Promise()
			l.RunUntilIdle()
			clk.Advance(d - time.Millisecond)
			l.RunUntilIdle()
			semExpect(t, &log, "wait")
			semPending(t, f)
			clk.Advance(time.Millisecond)
			l.RunUntilIdle()
			semExpect(t, &log, "wait", "handler Timeout")
			semFail(t, f, vm.Timeout)
			var e *vm.Error
			if !errors.As(root.State().LastException(), &e) || e.Code != vm.Timeout {
				t.Fatalf("LastException = %v, want a Timeout *vm.Error", root.State().LastException())
			}
		})
	}
}

// A second SetTimeout replaces the first, whether it is longer or shorter.
func TestSemTimeoutReset(t *testing.T) {
	cases := []struct {
		name        string
		first, then time.Duration
	}{
		{"longer", 10 * time.Millisecond, 30 * time.Millisecond},
		{"shorter", 30 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetTimeout(c.first)
				as.SetTimeout(c.then)
			}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
			f := root.Promise()
			l.RunUntilIdle()
			for range c.then/time.Millisecond - 1 {
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
			}
			semExpect(t, &log)
			clk.Advance(time.Millisecond)
			l.RunUntilIdle()
			semExpect(t, &log, "handler Timeout")
			semFail(t, f, vm.Timeout)
			// Nothing else is armed: the replaced timer is gone.
			clk.Advance(time.Minute)
			l.RunUntilIdle()
			semExpect(t, &log, "handler Timeout")
			if st := l.Stats(); st.Timers != 0 {
				t.Fatalf("%d timers left after the flow ended", st.Timers)
			}
		})
	}
}

// A step that completes in time stops its timeout.
func TestSemTimeoutStoppedBySuccess(t *testing.T) {
	semTimeoutStopped(t, 5*time.Millisecond, func(as vm.AsyncSteps) {
		as.Tool().Deferred(5*time.Millisecond, func() { as.Success(vm.Int(5)) })
	}, "next got 5")
}

// A timeout of a step with sub-steps unwinds from the innermost sub-step:
// cancel handlers and error handlers run innermost first.
func TestSemTimeoutUnwindsFromInnermost(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
			as.SetTimeout(10 * time.Millisecond)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel middle") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel inner") })
				}, func(as vm.AsyncSteps, code string) { log.add("inner handler %s", code) })
			}, func(as vm.AsyncSteps, code string) { log.add("middle handler %s", code) })
		}, func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) })
	})
	r.advance(10 * time.Millisecond)
	semFail(t, r.f, vm.Timeout)
	semExpect(t, r.log,
		"cancel inner", "inner handler Timeout",
		"cancel middle", "middle handler Timeout",
		"cancel outer", "outer handler Timeout",
	)
}

// A timeout handled by its step's handler lets the flow continue.
func TestSemTimeoutHandled(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(time.Second)
		}, func(as vm.AsyncSteps, code string) {
			if code == vm.Timeout {
				as.Success(vm.Str("fallback"))
			}
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %s", a.String(0)) })
	})
	r.advance(time.Second)
	semOK(t, r.f)
	semExpect(t, r.log, "next got fallback")
}

// Root Cancel runs the cancel handlers innermost first, no error handler,
// and no further step; the Future reports ErrCanceled.
func TestSemCancelRoot(t *testing.T) {
	l, clk := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel inner") })
				as.SetTimeout(time.Second)
			}, func(as vm.AsyncSteps, code string) { log.add("inner handler must not run") })
			as.Add(log.step("sibling never"))
		})
	}, func(as vm.AsyncSteps, code string) { log.add("outer handler must not run") })
	root.Add(log.step("next never"))
	f := root.Promise()
	l.RunUntilIdle()
	root.Cancel()
	semExpect(t, &log, "cancel inner", "cancel outer")
	_, err := semResult(t, f)
	if !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("Future error = %v, want ErrCanceled", err)
	}
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	semExpect(t, &log, "cancel inner", "cancel outer")
	if st := l.Stats(); st.RunningRoots != 0 || st.Timers != 0 {
		t.Fatalf("after cancel: %+v", st)
	}
}

// A canceled root never runs another step: canceled before its first step
// ran, from inside a step, and while a parallel runs.
func TestSemCancelStopsEverything(t *testing.T) {
	cases := []struct {
		name  string
		setup func(root vm.AsyncSteps, log *semLog)
		// cancelNow: Cancel right after Execute, before the loop runs.
		cancelNow bool
		want      []string
	}{
		{
			name:      "before the first step",
			setup:     func(root vm.AsyncSteps, log *semLog) { root.Add(log.step("first never")) },
			cancelNow: true,
		},
		{
			name: "from inside a step",
			setup: func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("first")
					as.Add(log.step("sub never"))
					root.Cancel()
					log.add("Cancel returned")
				})
				root.Add(log.step("second never"))
			},
			want: []string{"first", "Cancel returned"},
		},
		{
			name: "from inside a step that succeeded",
			setup: func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Success()
					root.Cancel()
				})
				root.Add(log.step("second never"))
			},
		},
		{
			name: "from a branch",
			setup: func(root vm.AsyncSteps, log *semLog) {
				p := root.Parallel()
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("a")
					root.Cancel()
				})
				p.Add(log.step("b never"))
				root.Add(log.step("after never"))
			},
			want: []string{"a"},
		},
		{
			name: "from an error handler",
			setup: func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Error("E")
				}, func(as vm.AsyncSteps, code string) {
					log.add("handler")
					root.Cancel()
					as.Success()
				})
				root.Add(log.step("next never"))
			},
			want: []string{"handler"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			c.setup(root, &log)
			f := root.Promise()
			if c.cancelNow {
				root.Cancel()
			}
			l.RunUntilIdle()
			clk.Advance(time.Hour)
			l.RunUntilIdle()
			semExpect(t, &log, c.want...)
			if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("Future error = %v, want ErrCanceled", err)
			}
			if st := l.Stats(); st.RunningRoots != 0 {
				t.Fatalf("RunningRoots = %d after cancel", st.RunningRoots)
			}
		})
	}
}

// Cancel of a root that is not running is harmless: the root can still be
// executed afterwards.
func TestSemCancelIdleRoot(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Cancel() // never executed
	root.Add(log.step("first"))
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	root.Cancel() // completed
	root.Cancel()
	root.Add(log.step("second"))
	f = root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "first", "second")
	if !root.Valid() {
		t.Fatal("root invalid after Cancel of an idle root")
	}
}

// Calls through the handle of a step being torn down do nothing: a cancel
// handler or destroy callback can neither revive its step with Success nor
// fail it with Error; it goes on past the call, and the flow ends canceled. (Error used to leave the callback
// there, skipping the rest of its cleanup.)
func TestSemTeardownCallsThroughOwnHandleReturn(t *testing.T) {
	for _, where := range []string{"cancel handler", "destroy callback"} {
		for _, call := range []string{"Success", "Error"} {
			t.Run(where+"/"+call, func(t *testing.T) {
				l, _ := semLoop()
				var log semLog
				root := l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					cleanup := func() {
						log.add("before")
						if call == "Success" {
							as.Success(vm.Int(1))
						} else {
							as.Error("Late", "from the teardown")
						}
						log.add("after")
					}
					if where == "cancel handler" {
						as.SetCancel(func(vm.AsyncSteps) { cleanup() })
					} else {
						as.StackRaw(8, func(unsafe.Pointer) { cleanup() })
						as.WaitExternal()
					}
				})
				root.Add(log.step("next never"))
				f := root.Promise()
				l.RunUntilIdle()
				root.Cancel()
				l.RunUntilIdle()
				semExpect(t, &log, "before", "after")
				if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error = %v, want ErrCanceled", err)
				}
				if info := root.State().ErrorInfo(); info != "" {
					t.Fatalf("ErrorInfo %q, want none", info)
				}
				root.Release()
				semClean(t, l)
			})
		}
	}
}

// A timer set for the longest duration there is (a "never" many programs
// write as math.MaxInt64) does not fire once the loop's clock has moved:
// its deadline saturates instead of wrapping around to the past, whether
// it is armed at the end of a pass (a step's) or at once (from outside).
func TestSemLongestTimerNeverFires(t *testing.T) {
	const never = time.Duration(math.MaxInt64)
	l, clk := semLoop()
	var log semLog
	clk.Advance(time.Millisecond)
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(never)
		as.Tool().Deferred(never, func() { log.add("deferred from a step") })
	}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
	f := root.Promise()
	l.Deferred(never, func() { log.add("deferred from outside") })
	l.RunUntilIdle()
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	semExpect(t, &log)
	semPending(t, f)
	if work, delay := l.Iterate(); !work || delay < 1000*time.Hour {
		t.Fatalf("Iterate = %v, %v; want a delay of centuries", work, delay)
	}
	root.Cancel()
}
