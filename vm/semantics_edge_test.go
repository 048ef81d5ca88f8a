package vm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Corner cases across the areas above: re-entrant control calls from
// handlers, deep and wide flows, and the error handler's own API.

// A root with no steps completes with success and no values.
func TestSemEmptyRoot(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	f := root.Promise()
	l.RunUntilIdle()
	if a := semOK(t, f); a.Len() != 0 {
		t.Fatalf("values %v", a.Values())
	}
	if st := l.Stats(); st.RunningRoots != 0 {
		t.Fatalf("%+v", st)
	}
}

// SuccessStep in an error handler recovers with its values.
func TestSemErrorHandlerSuccessStep(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("E")
		}, func(as vm.AsyncSteps, code string) {
			as.SuccessStep(vm.Str("default"), vm.Int(1))
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %s %d", a.String(0), a.Int(1)) })
	}, "next got default 1")
}

// Success after adding steps in an error handler is misuse: the handler
// completes through the steps it added.
func TestSemErrorHandlerSuccessAfterAdd(t *testing.T) {
	semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Error("E")
			}, func(as vm.AsyncSteps, code string) {
				as.Add(log.step("added never"))
				as.Success()
			})
		}, func(as vm.AsyncSteps, code string) {
			log.add("outer %s", code)
			semInfoMentions(t, as.State().ErrorInfo(), "Success")
		})
	}, "outer InternalError")
}

// An error handler that adds steps and then raises drops the added steps.
func TestSemErrorHandlerAddThenError(t *testing.T) {
	semRunFail(t, "F", func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Error("E")
			}, func(as vm.AsyncSteps, code string) {
				as.Add(log.step("added never"))
				as.Error("F")
			})
		}, func(as vm.AsyncSteps, code string) { log.add("outer %s", code) })
	}, "outer F")
}

// A parallel's error handler may add steps: they run, then the flow goes
// on after the parallel.
func TestSemParallelHandlerAddsSteps(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel(func(as vm.AsyncSteps, code string) {
			log.add("handler %s", code)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("recovery")
				as.Success(vm.Int(3))
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") })
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after got %d", a.Int(0)) })
	}, "handler E", "recovery", "after got 3")
}

// A timeout in a branch aborts the parallel with Timeout.
func TestSemTimeoutInBranch(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(10 * time.Millisecond) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel sibling") })
		})
	})
	r.advance(10 * time.Millisecond)
	semFail(t, r.f, vm.Timeout)
	semExpect(t, r.log, "cancel sibling", "handler Timeout")
}

// A timeout of a step enclosing a parallel cancels every branch.
func TestSemTimeoutAroundParallel(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(10 * time.Millisecond)
			p := as.Parallel(func(as vm.AsyncSteps, code string) { log.add("parallel handler %s", code) })
			for _, name := range []string{"a", "b"} {
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel %s", name) })
				})
			}
		}, func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) })
	})
	r.advance(10 * time.Millisecond)
	semFail(t, r.f, vm.Timeout)
	semExpect(t, r.log, "cancel a", "cancel b", "parallel handler Timeout", "outer handler Timeout")
}

// A timeout of a loop iteration leaves the loop with Timeout.
func TestSemTimeoutInLoopBody(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iter %d", i)
				if i == 1 {
					as.SetTimeout(5 * time.Millisecond)
				}
			})
		}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
	})
	r.advance(5 * time.Millisecond)
	semFail(t, r.f, vm.Timeout)
	semExpect(t, r.log, "iter 0", "iter 1", "handler Timeout")
}

// Break runs the cancel handler of the very step that calls it.
func TestSemBreakRunsOwnCancel(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Loop(func(as vm.AsyncSteps) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("own cancel") })
				as.Break()
			}, func(as vm.AsyncSteps, code string) { log.add("handler must not run") })
		})
		root.Add(log.step("after"))
	}, "own cancel", "after")
}

// Cancel and Release called again from inside a cancel handler of the same
// root: every handler runs once and the flow ends canceled.
func TestSemReentrantCancel(t *testing.T) {
	for _, how := range []string{"Cancel", "Release"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) {
						log.add("cancel inner")
						if how == "Cancel" {
							root.Cancel()
						} else {
							root.Release()
						}
					})
				})
			})
			f := root.Promise()
			l.RunUntilIdle()
			root.Cancel()
			l.RunUntilIdle()
			semExpect(t, &log, "cancel inner", "cancel outer")
			if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("Future error %v", err)
			}
			if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 {
				t.Fatalf("%+v", st)
			}
			root.Release() // harmless if already released
		})
	}
}

// Cancel from inside an error handler of a timeout ends the flow canceled,
// with the outer handlers not called.
func TestSemCancelFromTimeoutHandler(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetTimeout(time.Millisecond)
			}, func(as vm.AsyncSteps, code string) {
				log.add("inner %s", code)
				root.Cancel()
			})
		}, func(as vm.AsyncSteps, code string) { log.add("outer must not run") })
	})
	r.advance(time.Millisecond)
	semExpect(t, r.log, "inner Timeout")
	if _, err := semResult(t, r.f); !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("Future error %v", err)
	}
}

// A deep chain of sub-steps completes and unwinds without exhausting the
// goroutine stack, and a long sequence of steps runs in order.
func TestSemDeepAndLong(t *testing.T) {
	const depth = 20000
	for _, fail := range []bool{false, true} {
		l, _ := semLoop()
		root := l.NewSteps()
		var nest func(n int) vm.ExecFunc
		reached := 0
		nest = func(n int) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				reached = n
				if n == depth {
					if fail {
						as.Error("Bottom")
					}
					as.Success(vm.Int(int64(n)))
					return
				}
				as.Add(nest(n + 1))
			}
		}
		root.Add(nest(1))
		f := root.Promise()
		l.RunUntilIdle()
		if reached != depth {
			t.Fatalf("reached depth %d", reached)
		}
		if fail {
			semFail(t, f, "Bottom")
			if n := len(root.State().AsyncStack()); n != depth {
				t.Fatalf("AsyncStack has %d entries, want %d", n, depth)
			}
		} else if a := semOK(t, f); a.Int(0) != depth {
			t.Fatalf("result %v", a.Values())
		}
	}

	l, _ := semLoop()
	root := l.NewSteps()
	next := 0
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		for i := range depth {
			as.Add(func(as vm.AsyncSteps, a vm.Args) {
				if i != next || (i > 0 && a.Int(0) != int64(i-1)) {
					as.Error("Order")
				}
				next++
				as.Success(vm.Int(int64(i)))
			})
		}
	})
	f := root.Promise()
	l.RunUntilIdle()
	if a := semOK(t, f); a.Int(0) != depth-1 || next != depth {
		t.Fatalf("result %v after %d steps", a.Values(), next)
	}
}

// A wide parallel: a thousand branches, the last failing, cancel all the
// others.
func TestSemWideParallel(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	const width = 1000
	canceled := 0
	var code string
	p := root.Parallel(func(as vm.AsyncSteps, c string) { code = c })
	for i := range width {
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if i == width-1 {
				as.Error("Last")
			}
			as.SetCancel(func(vm.AsyncSteps) { canceled++ })
		})
	}
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, f, "Last")
	if canceled != width-1 || code != "Last" {
		t.Fatalf("canceled %d branches, handler got %q", canceled, code)
	}
	if st := l.Stats(); st.ArenaInUse != 0 {
		t.Fatalf("%+v", st)
	}
}

// A model with labelled loops, SuccessStep and a parallel keeps them
// through CopyFrom and Clone.
func TestSemCopyFromLoopsAndValues(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	model.Loop(func(as vm.AsyncSteps) {
		as.Repeat(5, func(as vm.AsyncSteps, i int) {
			log.add("i=%d", i)
			if i == 1 {
				as.Break("MODEL")
			}
		})
	}, "MODEL")
	model.SuccessStep(vm.Str("model value"), vm.Int(12))
	root := l.NewSteps()
	root.CopyFrom(model)
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		log.add("copy got %s %d", a.String(0), a.Int(1))
	})
	f := root.Promise()
	clone := model.Clone()
	cf := clone.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if a := semOK(t, cf); a.String(0) != "model value" || a.Int(1) != 12 {
		t.Fatalf("clone result %v", a.Values())
	}
	semExpect(t, &log, "i=0", "i=0", "i=1", "i=1", "copy got model value 12")
}

// State written by a cancel handler is visible after the cancel.
func TestSemStateFromCancelHandler(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(c vm.AsyncSteps) { c.State().Set("canceled", true) })
	})
	root.Execute()
	l.RunUntilIdle()
	root.Cancel()
	if v, _ := root.State().Get("canceled"); v != true {
		t.Fatal("cancel handler's state write lost")
	}
}

// A Resumer taken twice in one step is one token: the second completion
// through either copy is refused.
func TestSemResumerTwiceSameStep(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var r1, r2 vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		r1 = as.Resumer()
		r2 = as.Resumer()
		as.WaitExternal()
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { as.Success(a.Get(0)) })
	f := root.Promise()
	l.RunUntilIdle()
	if !r2.Success(vm.Int(2)) {
		t.Fatal("first completion refused")
	}
	if r1.Success(vm.Int(1)) {
		t.Fatal("second completion through the other copy accepted")
	}
	l.RunUntilIdle()
	if a := semOK(t, f); a.Int(0) != 2 {
		t.Fatalf("result %v", a.Values())
	}
}

// A step completed through its handle before its Resumer is used refuses
// the Resumer.
func TestSemResumerAfterHandleSuccess(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var res vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res = as.Resumer()
		as.SetTimeout(time.Hour)
		as.Tool().Immediate(func() { as.Success(vm.Int(1)) })
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		as.WaitExternal()
		as.State().Set("second got", a.Int(0))
	})
	f := root.Promise()
	l.RunUntilIdle()
	if res.Success(vm.Int(9)) {
		t.Fatal("Resumer of a completed step accepted")
	}
	l.RunUntilIdle()
	semPending(t, f)
	if v, _ := root.State().Get("second got"); v != int64(1) {
		t.Fatalf("second step got %v", v)
	}
	root.Cancel()
}

// A timeout and a completion through the step's handle due in the same
// pass: the one set first wins (timers fire in the order set), the other
// changes nothing.
func TestSemTimeoutRacesCompletion(t *testing.T) {
	for _, timeoutFirst := range []bool{true, false} {
		r := semStart(func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				complete := func() { as.Success(vm.Str("value")) }
				if timeoutFirst {
					as.SetTimeout(10 * time.Millisecond)
					as.Tool().Deferred(10*time.Millisecond, complete)
				} else {
					as.Tool().Deferred(10*time.Millisecond, complete)
					as.SetTimeout(10 * time.Millisecond)
				}
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				as.Success(vm.Str("timeout"))
			})
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %s", a.String(0)) })
		})
		r.advance(10 * time.Millisecond)
		semOK(t, r.f)
		if timeoutFirst {
			semExpect(t, r.log, "handler Timeout", "next got timeout")
		} else {
			semExpect(t, r.log, "next got value")
		}
	}
}

// Timers never fire early, also for durations and start times that are not
// on the millisecond tick.
func TestSemTimersNeverEarlySubTick(t *testing.T) {
	cases := []struct {
		offset, d time.Duration // clock moved by offset before the timer is set
	}{
		{0, 1500 * time.Microsecond},
		{300 * time.Microsecond, time.Millisecond},
		{700 * time.Microsecond, 2300 * time.Microsecond},
		{999 * time.Microsecond, time.Microsecond},
		{1500 * time.Microsecond, 0},
	}
	for _, c := range cases {
		for _, kind := range []string{"Deferred", "SetTimeout"} {
			t.Run(kind+"/"+c.offset.String()+"+"+c.d.String(), func(t *testing.T) {
				l, clk := semLoop()
				fired := time.Duration(-1)
				elapsed := time.Duration(0)
				clk.Advance(c.offset)
				l.RunUntilIdle()
				if kind == "Deferred" {
					l.Deferred(c.d, func() { fired = elapsed })
				} else {
					root := l.NewSteps()
					root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(c.d) },
						func(as vm.AsyncSteps, code string) { fired = elapsed })
					root.Execute()
				}
				l.RunUntilIdle()
				const step = 100 * time.Microsecond
				for fired < 0 && elapsed < c.d+10*time.Millisecond {
					clk.Advance(step)
					elapsed += step
					l.RunUntilIdle()
				}
				if fired < c.d {
					t.Fatalf("fired %v after it was set, asked for %v", fired, c.d)
				}
				if fired > c.d+2*time.Millisecond {
					t.Fatalf("fired %v after it was set, asked for %v: more than two ticks late", fired, c.d)
				}
			})
		}
	}
}

// A step with a timeout and sub-steps: the timeout covers the sub-steps,
// and stops once they complete in time.
func TestSemTimeoutCoversSubSteps(t *testing.T) {
	semTimeoutStopped(t, 9*time.Millisecond, func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal()
			as.Tool().Deferred(9*time.Millisecond, func() { as.Success(vm.Int(9)) })
		})
	}, "next got 9")
}

// An error that passes a step runs its cancel handler before its error
// handler, for the failing step itself and for the steps it unwinds
// through.
func TestSemErrorRunsCancelHandlers(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel failing") })
				as.Error("E")
			}, func(as vm.AsyncSteps, code string) { log.add("failing handler %s", code) })
		}, func(as vm.AsyncSteps, code string) {
			log.add("outer handler %s", code)
			as.Success()
		})
		root.Add(log.step("next"))
	}, "cancel failing", "failing handler E", "cancel outer", "outer handler E", "next")
}

// A parallel accessor kept past its parallel step is stale: adding
// through it is InternalError of the caller.
func TestSemStaleParallelAccessor(t *testing.T) {
	semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
		var p vm.AsyncSteps
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			p = as.Parallel()
			p.Add(log.step("branch"))
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if p.Valid() {
				log.add("accessor still valid")
			}
			p.Add(log.step("late branch never"))
		})
	}, "branch")
}

// Resumer.Success for a step whose sub-steps are running is InternalError;
// Resumer.Error reaches the sub-steps' handlers first.
func TestSemResumerWithSubSteps(t *testing.T) {
	for _, how := range []string{"success", "error"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			var res vm.Resumer
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				res = as.Resumer()
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel sub") })
				}, func(as vm.AsyncSteps, code string) { log.add("sub handler %s", code) })
			}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
			f := root.Promise()
			l.RunUntilIdle()
			if how == "success" {
				res.Success()
			} else {
				res.Error("Ext", "")
			}
			l.RunUntilIdle()
			if how == "success" {
				semFail(t, f, vm.InternalError)
				semExpect(t, &log, "cancel sub", "sub handler InternalError", "handler InternalError")
			} else {
				semFail(t, f, "Ext")
				semExpect(t, &log, "cancel sub", "sub handler Ext", "handler Ext")
			}
		})
	}
}

// A step handle from an earlier run of the same root is stale in the next
// run: from outside it changes nothing, from a step of that run it is
// InternalError.
func TestSemStaleHandleAcrossRuns(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	var old vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		old = as
		as.WaitExternal()
		as.Tool().Immediate(func() { as.Success() })
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)

	var res vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("run 2")
		res = as.Resumer()
		as.WaitExternal()
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		log.add("run 2 next got %s", a.String(0))
		old.Success(vm.Str("stale"))
	}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
	f = root.Promise()
	l.RunUntilIdle()
	if old.Valid() {
		t.Fatal("a step handle of the previous run is valid")
	}
	old.Success(vm.Str("stale"))
	old.Error("Stale")
	l.RunUntilIdle()
	semPending(t, f)
	res.Success(vm.Str("fresh"))
	l.RunUntilIdle()
	semFail(t, f, vm.InternalError)
	semExpect(t, &log, "run 2", "run 2 next got fresh", "handler InternalError")
}

// CopyFrom of the root itself duplicates its steps.
func TestSemCopyFromSelf(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(log.step("a"))
		root.Add(log.step("b"))
		root.CopyFrom(root)
	}, "a", "b", "a", "b")
}

// Cancel or Release of the root from inside a cancel handler run by a
// timeout or a parallel abort ends the flow canceled: every cancel handler
// runs once, no error handler runs afterwards, no step runs.
func TestSemCancelFromCancelHandlerDuringUnwind(t *testing.T) {
	for _, call := range []string{"Cancel", "Release"} {
		for _, how := range []string{"timeout", "parallel abort", "error"} {
			t.Run(call+"/"+how, func(t *testing.T) {
				l, clk := semLoop()
				root := l.NewSteps()
				var log semLog
				nested := func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) {
							log.add("cancel inner")
							if call == "Cancel" {
								root.Cancel()
							} else {
								root.Release()
							}
						})
						if how == "error" {
							as.Error("Own")
						}
					}, func(as vm.AsyncSteps, code string) { log.add("inner handler %s", code) })
				}
				addUnwound(root, how, nested, &log)
				f := root.Promise()
				l.RunUntilIdle()
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
				semExpect(t, &log, "cancel inner", "cancel outer")
				if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error %v", err)
				}
				if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 {
					t.Fatalf("after the flow: %+v", st)
				}
			})
		}
	}
}

// Execute runs nothing by itself; flows take turns step by step in FIFO
// order.
func TestSemFlowsTakeTurns(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	a, b := l.NewSteps(), l.NewSteps()
	for i := 1; i <= 3; i++ {
		a.Add(log.step("a" + vm.Int(int64(i)).String()))
		b.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("b%d", i)
			as.Add(log.step("b" + vm.Int(int64(i)).String() + ".sub"))
		})
	}
	fa, fb := a.Promise(), b.Promise()
	semExpect(t, &log)
	l.RunUntilIdle()
	semOK(t, fa)
	semOK(t, fb)
	semExpect(t, &log, "a1", "b1", "a2", "b1.sub", "a3", "b2", "b2.sub", "b3", "b3.sub")
}

// Execute from inside a step of another flow starts that flow in a later
// turn.
func TestSemExecuteFromAnotherFlow(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	other := l.NewSteps()
	other.Add(log.step("other 1"))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		other.Execute()
		log.add("root 1")
		as.Add(log.step("root 1.sub"))
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "root 1", "other 1", "root 1.sub")
}
