package vm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// API misuse inside a step raises InternalError in that flow with an
// ErrorInfo that names the problem; the step's own handler (or the
// enclosing one, when the step has already completed) sees it and no
// further step runs.
func TestSemMisuseInsideStep(t *testing.T) {
	cases := []struct {
		name  string
		body  func(root vm.AsyncSteps) vm.ExecFunc
		words []string
	}{
		{"Success after Add", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(vm.AsyncSteps, vm.Args) {})
				as.Success()
			}
		}, []string{"Success"}},
		{"Success twice", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Int(1))
				as.Success(vm.Int(2))
			}
		}, []string{"Success"}},
		{"Error after Success", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Int(1))
				as.Error("Late")
			}
		}, []string{"Error"}},
		{"Add after Success", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Int(1))
				as.Add(func(vm.AsyncSteps, vm.Args) {})
			}
		}, []string{"Add"}},
		{"Execute on own running root", func(root vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { root.Execute() }
		}, []string{"Execute", "running"}},
		{"Promise on own running root", func(root vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { root.Promise() }
		}, []string{"Promise", "running"}},
		{"Add on own running root", func(root vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { root.Add(func(vm.AsyncSteps, vm.Args) {}) }
		}, []string{"Add", "running root"}},
		{"Add with nil func", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { as.Add(nil) }
		}, []string{"nil"}},
		{"Clone of a step handle", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { as.Clone() }
		}, []string{"Clone"}},
		{"Cancel on a step handle", func(vm.AsyncSteps) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) { as.Cancel() }
		}, []string{"Cancel"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(c.body(root), func(as vm.AsyncSteps, code string) {
					log.add("step handler %s", code)
				})
				as.Add(log.step("sibling never"))
			}, func(as vm.AsyncSteps, code string) {
				log.add("outer handler %s", code)
				semInfoMentions(t, as.State().ErrorInfo(), c.words...)
			})
			root.Add(log.step("next never"))
			f := root.Promise()
			l.RunUntilIdle()
			semFail(t, f, vm.InternalError)
			// The step's own handler sees the error unless the step had
			// already completed; the outer one always does.
			if n := len(log.lines); n == 0 || log.lines[n-1] != "outer handler InternalError" {
				t.Fatalf("trace %q: want the outer handler to end it", log.lines)
			}
			for _, line := range log.lines {
				if line == "sibling never" || line == "next never" {
					t.Fatalf("a step ran after the misuse: %q", log.lines)
				}
			}
		})
	}
}

// loopRuns are the ways to drive a loop, which none of its own callbacks
// may take.
var loopRuns = map[string]func(l *vm.Loop){
	"RunUntilIdle": func(l *vm.Loop) { l.RunUntilIdle() },
	"Iterate":      func(l *vm.Loop) { l.Iterate() },
	"Run":          func(l *vm.Loop) { l.Run(context.Background()) },
}

// A loop does not run inside its own callbacks: Run, RunUntilIdle or
// Iterate called from a step fails that step's flow with InternalError,
// called from an Immediate it goes to the panic handler, and the outer pass
// goes on with the flows it had queued (a flow queued behind the step
// completes; a nested pass would once have rescheduled it for ever).
func TestSemMisuseNestedPass(t *testing.T) {
	for name, run := range loopRuns {
		t.Run(name, func(t *testing.T) {
			var handled []any
			l := vm.NewLoop(vm.WithPanicHandler(func(v any) { handled = append(handled, v) }))
			defer l.Close()
			var log semLog
			other := l.NewSteps()
			other.Add(log.step("other"))
			var g *vm.Future
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				g = other.Promise()
				run(l)
				log.add("after the nested pass")
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				semInfoMentions(t, as.State().ErrorInfo(), "inside its own callbacks")
			})
			f := root.Promise()
			l.Immediate(func() { run(l) })
			l.RunUntilIdle()
			semFail(t, f, vm.InternalError)
			semOK(t, g)
			semExpect(t, &log, "handler InternalError", "other")
			if len(handled) != 1 {
				t.Fatalf("panic handler got %v, want one error", handled)
			}
			if e, ok := handled[0].(*vm.Error); !ok || e.Code != vm.InternalError {
				t.Fatalf("panic handler got %#v, want an InternalError", handled[0])
			}
		})
	}
}

// The panic handler runs inside the pass of the callback that panicked: a
// pass it starts is rejected like one a callback starts. It once ran the
// outer pass's queued work, and the outer pass then popped an empty run
// queue (a nil dereference out of RunUntilIdle, Stats().Queued -1).
func TestSemMisuseNestedPassInPanicHandler(t *testing.T) {
	for name, run := range loopRuns {
		t.Run(name, func(t *testing.T) {
			var l *vm.Loop
			var nested []any
			l = vm.NewLoop(vm.WithPanicHandler(func(any) {
				defer func() { nested = append(nested, recover()) }()
				run(l)
			}))
			defer l.Close()
			var log semLog
			root := l.NewSteps()
			root.Add(log.step("s1")).Add(log.step("s2"))
			f := root.Promise()
			l.Immediate(func() { panic("boom") })
			l.Immediate(func() { log.add("immediate") })
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic escaped RunUntilIdle: %v", p)
					}
				}()
				l.RunUntilIdle()
			}()
			semOK(t, f)
			semExpect(t, &log, "s1", "immediate", "s2")
			if len(nested) != 1 {
				t.Fatalf("nested passes: %v", nested)
			}
			if e, ok := nested[0].(*vm.Error); !ok || e.Code != vm.InternalError {
				t.Fatalf("the nested pass recovered %#v, want an InternalError", nested[0])
			}
			if st := l.Stats(); st.Queued != 0 || st.Panics != 1 {
				t.Fatalf("after the pass: %+v", st)
			}
		})
	}
}

// Run nested in a step is rejected even when it would return before its
// first pass, because its context is done or the loop closed: it once
// returned quietly then, and the step went on.
func TestSemMisuseNestedRunReturnsEarly(t *testing.T) {
	for _, how := range []string{"done context", "closed loop"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var log semLog
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if how == "closed loop" {
					l.Close()
					ctx = context.Background()
				}
				log.add("Run returned %v", l.Run(ctx))
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				semInfoMentions(t, as.State().ErrorInfo(), "inside its own callbacks")
			})
			f := root.Promise()
			l.RunUntilIdle()
			semFail(t, f, vm.InternalError)
			semExpect(t, &log, "handler InternalError")
		})
	}
}

// A cancel handler that restarts its own root while Release cancels it
// (ending the run with Cancel first, so that the root is idle) does not
// start it: the released root neither counts as running nor runs later,
// and the pool hands it out clean.
func TestSemMisuseRestartDuringRelease(t *testing.T) {
	for _, start := range []string{"Execute", "Promise"} {
		t.Run(start, func(t *testing.T) {
			l, _ := semLoop()
			ran := false
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) {
					root.Cancel()
					root.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
					if start == "Execute" {
						root.Execute()
					} else {
						root.Promise()
					}
				})
			})
			root.Execute()
			l.RunUntilIdle()
			root.Release()
			l.RunUntilIdle()
			if s := l.Stats(); ran || s.RunningRoots != 0 || s.LiveRoots != 0 || s.ArenaInUse != 0 {
				t.Fatalf("after Release: restarted step ran %v, stats %+v", ran, s)
			}
			semNextRootWorks(t, l)
		})
	}
}

// A root run before and executed again with no step added is running
// like any other: a second Execute before it ends is misuse that fails the
// run, not a second run.
func TestSemMisuseExecuteTwiceAfterRun(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(vm.AsyncSteps, vm.Args) {})
	root.Execute()
	l.RunUntilIdle()
	f := root.Promise() // no step added since the run ended
	root.Execute()
	if s := l.Stats(); s.RunningRoots > 1 {
		t.Fatalf("after Execute twice: %+v, want one root running at most", s)
	}
	l.RunUntilIdle()
	semFail(t, f, vm.InternalError)
	if s := l.Stats(); s.RunningRoots != 0 || s.Queued != 0 {
		t.Fatalf("after the run: %+v, want nothing running or queued", s)
	}
	root.Release()
}

// Misuse after a step completed, when it was the flow's last step, must not
// leave the flow reporting success.
func TestSemMisuseInLastStep(t *testing.T) {
	for _, c := range []struct {
		name string
		body vm.ExecFunc
	}{
		{"Success twice", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Success() }},
		{"Error after Success", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Error("Late") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			root.Add(c.body)
			f := root.Promise()
			l.RunUntilIdle()
			semFail(t, f, vm.InternalError)
		})
	}
}

// Add through a step's handle outside its execution (a later Immediate) is
// InternalError of the flow.
func TestSemMisuseAddOutsideExecution(t *testing.T) {
	cases := []struct {
		name string
		call func(as vm.AsyncSteps)
	}{
		{"Add", func(as vm.AsyncSteps) { as.Add(func(vm.AsyncSteps, vm.Args) {}) }},
		{"Parallel", func(as vm.AsyncSteps) { as.Parallel() }},
		{"SuccessStep", func(as vm.AsyncSteps) { as.SuccessStep() }},
		{"Loop", func(as vm.AsyncSteps) { as.Loop(func(as vm.AsyncSteps) { as.Break() }) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				as.Tool().Immediate(func() {
					c.call(as)
					log.add("returned")
				})
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				semInfoMentions(t, as.State().ErrorInfo(), "outside")
			})
			root.Add(log.step("next never"))
			f := root.Promise()
			l.RunUntilIdle()
			semFail(t, f, vm.InternalError)
			if st := l.Stats(); st.Panics != 0 {
				t.Fatalf("the misuse escaped as a loop panic (%d)", st.Panics)
			}
		})
	}
}

// Execute and Add on a running root from outside its steps fail it with
// InternalError.
func TestSemMisuseRunningRootFromOutside(t *testing.T) {
	cases := []struct {
		name  string
		call  func(root vm.AsyncSteps)
		words []string
	}{
		{"Execute", func(root vm.AsyncSteps) { root.Execute() }, []string{"Execute", "running"}},
		{"Add", func(root vm.AsyncSteps) { root.Add(func(vm.AsyncSteps, vm.Args) {}) }, []string{"Add", "running"}},
		{"Parallel", func(root vm.AsyncSteps) { root.Parallel() }, []string{"Parallel", "running"}},
	}
	for _, c := range cases {
		for _, from := range []string{"test goroutine", "immediate"} {
			t.Run(c.name+" from "+from, func(t *testing.T) {
				l, _ := semLoop()
				root := l.NewSteps()
				var log semLog
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel") })
				}, func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					semInfoMentions(t, as.State().ErrorInfo(), c.words...)
				})
				root.Add(log.step("next never"))
				f := root.Promise()
				l.RunUntilIdle()
				if from == "immediate" {
					l.Immediate(func() { c.call(root) })
				} else {
					c.call(root)
				}
				l.RunUntilIdle()
				semFail(t, f, vm.InternalError)
				semExpect(t, &log, "cancel", "handler InternalError")
				if st := l.Stats(); st.Panics != 0 {
					t.Fatalf("the misuse escaped as a loop panic (%d)", st.Panics)
				}
			})
		}
	}
}

// A panic in a step becomes InternalError; LastException holds the value.
func TestSemPanicInStep(t *testing.T) {
	type custom struct{ n int }
	errVal := errors.New("an error value")
	cases := []struct {
		name  string
		value any
		text  string
	}{
		{"string", "kaboom", "kaboom"},
		{"error", errVal, "an error value"},
		{"struct", custom{3}, "{3}"},
		{"runtime", nil, "index out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var last error
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					if c.value == nil {
						var s []int
						_ = s[len(log.lines)+5] // a runtime panic
					}
					panic(c.value)
				}, func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					last = as.State().LastException()
					semInfoMentions(t, as.State().ErrorInfo(), c.text)
				})
			})
			semFail(t, r.f, vm.InternalError)
			semExpect(t, r.log, "handler InternalError")
			var pe *vm.PanicError
			if !errors.As(last, &pe) {
				t.Fatalf("LastException = %#v, want *vm.PanicError", last)
			}
			if c.value != nil && pe.Value != c.value {
				t.Fatalf("PanicError.Value = %#v, want %#v", pe.Value, c.value)
			}
			if c.name == "error" && !errors.Is(last, errVal) {
				t.Fatal("PanicError does not unwrap to the error panicked with")
			}
		})
	}
}

// panic(*vm.Error) raises that error's code and info.
func TestSemPanicVMError(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(vm.AsyncSteps, vm.Args) {
				panic(&vm.Error{Code: "X", Info: "raised by panic"})
			})
		}, func(as vm.AsyncSteps, code string) {
			log.add("handler %s %s", code, as.State().ErrorInfo())
			var e *vm.Error
			if !errors.As(as.State().LastException(), &e) || e.Code != "X" {
				log.add("LastException %v", as.State().LastException())
			}
			as.Success()
		})
	}, "handler X raised by panic")
}

// A panic in an error handler becomes InternalError and unwinding goes on
// to the outer handler.
func TestSemPanicInErrorHandler(t *testing.T) {
	semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Error("First")
			}, func(as vm.AsyncSteps, code string) {
				log.add("inner handler %s", code)
				panic("handler blew up")
			})
		}, func(as vm.AsyncSteps, code string) {
			log.add("outer handler %s", code)
			semInfoMentions(t, as.State().ErrorInfo(), "handler blew up")
			var pe *vm.PanicError
			if !errors.As(as.State().LastException(), &pe) || pe.Value != "handler blew up" {
				log.add("LastException %v", as.State().LastException())
			}
		})
	}, "inner handler First", "outer handler InternalError")
}

// A panic in a cancel handler does not stop the cancel: the other handlers
// run and the flow ends as it would have.
func TestSemPanicInCancelHandler(t *testing.T) {
	for _, how := range []string{"root cancel", "timeout", "parallel abort"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			nested := func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) {
						log.add("cancel inner panics")
						panic("cancel blew up")
					})
				})
			}
			var want []string
			switch how {
			case "root cancel":
				root.Add(nested)
				want = []string{"cancel inner panics", "cancel outer"}
			case "timeout":
				root.Add(func(as vm.AsyncSteps, a vm.Args) {
					as.SetTimeout(time.Second)
					nested(as, a)
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				want = []string{"cancel inner panics", "cancel outer", "handler Timeout"}
			case "parallel abort":
				p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				p.Add(nested)
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
				})
				want = []string{"cancel inner panics", "cancel outer", "handler Abort"}
			}
			root.Add(log.step("next never"))
			f := root.Promise()
			l.RunUntilIdle()
			switch how {
			case "root cancel":
				root.Cancel()
			case "timeout":
				clk.Advance(time.Second)
			}
			l.RunUntilIdle()
			semExpect(t, &log, want...)
			_, err := semResult(t, f)
			switch how {
			case "root cancel":
				if !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error %v", err)
				}
			case "timeout":
				semFail(t, f, vm.Timeout)
			case "parallel abort":
				semFail(t, f, "Abort")
			}
			if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 {
				t.Fatalf("after the flow: %+v", st)
			}
		})
	}
}

// No panic escapes the loop: panics in destroy callbacks, loop bodies,
// Immediate, Deferred and Post callbacks are contained.
func TestSemNoPanicEscapes(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy 1") })
		as.StackRaw(8, func(unsafe.Pointer) { panic("destroy") })
	})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Repeat(2, func(as vm.AsyncSteps, i int) {
			if i == 1 {
				panic(fmt.Sprintf("loop body %d", i))
			}
		})
	}, func(as vm.AsyncSteps, code string) {
		log.add("loop handler %s %s", code, as.State().ErrorInfo())
		as.Success()
	})
	root.Add(log.step("after"))
	f := root.Promise()
	l.Immediate(func() { panic("immediate") })
	l.Deferred(time.Millisecond, func() { panic("deferred") })
	l.Post(func() { panic("post") })
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic escaped RunUntilIdle: %v", p)
			}
		}()
		l.RunUntilIdle()
		clk.Advance(time.Millisecond)
		l.RunUntilIdle()
	}()
	semOK(t, f)
	semExpect(t, &log, "destroy 1", "loop handler InternalError loop body 1", "after")
	if p := l.Stats().Panics; p != 3 {
		t.Fatalf("Stats().Panics = %d, want 3 (immediate, deferred, post)", p)
	}
}

// Misuse inside a cancel handler (here: Execute and Add on the root being
// canceled) neither stops the cancel nor runs any handler twice.
func TestSemMisuseInCancelHandler(t *testing.T) {
	for _, call := range []string{"Execute", "Add", "Promise"} {
		for _, how := range []string{"cancel", "timeout", "parallel abort"} {
			t.Run(call+"/"+how, func(t *testing.T) {
				l, clk := semLoop()
				root := l.NewSteps()
				var log semLog
				misuse := func() {
					switch call {
					case "Execute":
						root.Execute()
					case "Add":
						root.Add(log.step("added in cancel never"))
					case "Promise":
						root.Promise()
					}
				}
				nested := func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) {
							log.add("cancel inner")
							misuse()
						})
					}, func(as vm.AsyncSteps, code string) { log.add("inner handler %s", code) })
				}
				addUnwound(root, how, nested, &log)
				f := semUnwind(l, clk, root, how)
				clk.Advance(time.Hour)
				l.RunUntilIdle()
				counts := map[string]int{}
				for _, line := range log.lines {
					counts[line]++
				}
				for line, n := range counts {
					if n > 1 {
						t.Errorf("%q ran %d times: %q", line, n, log.lines)
					}
				}
				if counts["cancel inner"] != 1 || counts["cancel outer"] != 1 {
					t.Fatalf("cancel handlers: %q", log.lines)
				}
				if counts["next never"] != 0 || counts["added in cancel never"] != 0 {
					t.Fatalf("a step ran: %q", log.lines)
				}
				if _, err := semResult(t, f); err == nil {
					t.Fatal("flow succeeded")
				}
				if how == "cancel" && counts["outer handler InternalError"]+counts["inner handler InternalError"] > 0 {
					t.Fatalf("error handlers ran during a cancel: %q", log.lines)
				}
				if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 {
					t.Fatalf("after the flow: %+v", st)
				}
			})
		}
	}
}

// Misuse inside a cancel handler is recorded as LastException only, as a
// panic there is: the error being raised keeps its ErrorInfo for the
// handlers it reaches.
func TestSemMisuseInCancelHandlerKeepsErrorInfo(t *testing.T) {
	for _, how := range []string{"error", "timeout"} {
		t.Run(how, func(t *testing.T) {
			_, _, seen, f := semHandled(func(root, as vm.AsyncSteps) {
				as.SetCancel(func(vm.AsyncSteps) { root.Execute() }) // misuse: the root runs
				if how == "error" {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Failed", "the step's info") })
				} else {
					as.SetTimeout(time.Millisecond)
				}
			})
			semResult(t, f)
			if how == "error" {
				seen.expectRecorded(t, "Failed", "the step's info", "still running")
			} else {
				seen.expectRecorded(t, vm.Timeout, "", "still running")
			}
		})
	}
}

// Calls through the zero AsyncSteps inside a step are InternalError of the
// calling flow; Error through it does not return.
func TestSemMisuseZeroHandle(t *testing.T) {
	ops := []semOp{
		{"Success", func(h vm.AsyncSteps) { h.Success() }},
		{"Error", func(h vm.AsyncSteps) { h.Error("X") }},
		{"Add", func(h vm.AsyncSteps) { h.Add(func(vm.AsyncSteps, vm.Args) {}) }},
		{"SetTimeout", func(h vm.AsyncSteps) { h.SetTimeout(time.Millisecond) }},
		{"WaitExternal", func(h vm.AsyncSteps) { h.WaitExternal() }},
		{"Break", func(h vm.AsyncSteps) { h.Break() }},
		{"Execute", func(h vm.AsyncSteps) { h.Execute() }},
		{"Stack", func(h vm.AsyncSteps) { vm.Stack[int64](h) }},
		{"StackRaw", func(h vm.AsyncSteps) { h.StackRaw(8, nil) }},
		{"NewInstance", func(h vm.AsyncSteps) { h.NewInstance() }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					op.call(vm.AsyncSteps{})
					log.add("returned")
				})
			})
		})
	}
}

// Spawn with a nil function fails the flow that called it, and leaves no
// root behind: the root it would draw from the pool was never executed,
// hence never released (LiveRoots stayed 1 until the GC reclaimed it).
func TestSemMisuseSpawnNil(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Tool().Spawn(nil) })
	f := root.Promise()
	l.RunUntilIdle()
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, "Spawn", "nil")
	root.Release()
	l.Spawn(nil) // from outside a flow: nothing to fail, nothing spawned
	l.RunUntilIdle()
	if st := l.Stats(); st.LiveRoots != 0 || st.RunningRoots != 0 || st.ArenaInUse != 0 {
		t.Fatalf("after Spawn(nil): %+v", st)
	}
}

// Immediate, Deferred and Post with a nil function schedule nothing: from a
// step, Immediate and Deferred fail its flow; from outside a flow they
// return a Handle that is never valid, and Post returns false. Nothing
// reaches the loop's panic handler.
func TestSemMisuseNilCallback(t *testing.T) {
	calls := map[string]func(l *vm.Loop) vm.Handle{
		"Immediate": func(l *vm.Loop) vm.Handle { return l.Immediate(nil) },
		"Deferred":  func(l *vm.Loop) vm.Handle { return l.Deferred(time.Millisecond, nil) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { call(as.Tool()) })
			})
			e := semFail(t, r.f, vm.InternalError)
			semInfoMentions(t, e.Info, name, "nil")
			if h := call(r.l); r.l.IsValid(h) {
				t.Fatal("a nil function was scheduled")
			}
			r.advance(time.Second)
			if s := r.l.Stats(); s.Panics != 0 || s.Queued != 0 || s.Timers != 0 {
				t.Fatalf("after %s(nil): %+v", name, s)
			}
		})
	}
	l, _ := semLoop()
	if l.Post(nil) {
		t.Fatal("Post(nil) = true, want false")
	}
	l.RunUntilIdle()
	if s := l.Stats(); s.Panics != 0 {
		t.Fatalf("after Post(nil): %+v", s)
	}
}

// A step that recovers panics of its own and re-panics what IsUnwinding
// reports, as ExampleIsUnwinding shows, lets the VM's misuse reports pass
// too: its flow fails with InternalError and the misuse's ErrorInfo.
func TestSemMisuseThroughRecoveringStep(t *testing.T) {
	guarded := func(f func()) {
		defer func() {
			if p := recover(); p != nil && vm.IsUnwinding(p) {
				panic(p)
			}
		}()
		f()
	}
	for _, tc := range []struct {
		name, info string
		body       func(l *vm.Loop, as vm.AsyncSteps, log *semLog)
	}{
		{"Success after Add", "sub-steps", func(_ *vm.Loop, as vm.AsyncSteps, log *semLog) {
			as.Add(log.step("sub-step"))
			as.Success()
		}},
		{"Success twice", "", func(_ *vm.Loop, as vm.AsyncSteps, _ *semLog) {
			as.Success()
			as.Success()
		}},
		{"a nested pass", "inside its own callbacks", func(l *vm.Loop, _ vm.AsyncSteps, _ *semLog) {
			l.RunUntilIdle()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l *vm.Loop
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				l = root.Tool()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { guarded(func() { tc.body(l, as, log) }) })
				root.Add(log.step("after"))
			})
			e := semFail(t, r.f, vm.InternalError)
			if tc.info != "" {
				semInfoMentions(t, e.Info, tc.info)
			}
			semExpect(t, r.log)
		})
	}
}

// A function that recovers every panic, misuse reports included, and goes
// on has not made the misuse go away: its flow fails with InternalError
// and the misuse's ErrorInfo, as if the panic had reached the VM, in a
// step, an error handler and a loop body alike.
func TestSemMisuseSwallowedByRecoverAll(t *testing.T) {
	misuses := []struct {
		name, info string
		do         func(l *vm.Loop, root, as vm.AsyncSteps, log *semLog)
	}{
		{"Success after Add", "sub-steps", func(_ *vm.Loop, _, as vm.AsyncSteps, log *semLog) {
			as.Add(log.step("sub-step"))
			as.Success()
		}},
		{"Success twice", "step that has ended", func(_ *vm.Loop, _, as vm.AsyncSteps, _ *semLog) {
			as.Success()
			as.Success()
		}},
		{"Add nil, then Error", "nil", func(_ *vm.Loop, _, as vm.AsyncSteps, _ *semLog) {
			swallow(func() { as.Add(nil) })
			as.Error("Other")
		}},
		{"Add on the running root", "running root", func(_ *vm.Loop, root, _ vm.AsyncSteps, log *semLog) {
			root.Add(log.step("added"))
		}},
		{"Immediate with nil", "nil function", func(l *vm.Loop, _, _ vm.AsyncSteps, _ *semLog) {
			l.Immediate(nil)
		}},
		{"a nested pass", "inside its own callbacks", func(l *vm.Loop, _, _ vm.AsyncSteps, _ *semLog) {
			l.RunUntilIdle()
		}},
	}
	places := []struct {
		name  string
		build func(root vm.AsyncSteps, log *semLog, misuse func(as vm.AsyncSteps))
	}{
		{"step", func(root vm.AsyncSteps, log *semLog, misuse func(vm.AsyncSteps)) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { swallow(func() { misuse(as) }) })
		}},
		{"error handler", func(root vm.AsyncSteps, log *semLog, misuse func(vm.AsyncSteps)) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
				func(as vm.AsyncSteps, _ string) { swallow(func() { misuse(as) }) })
		}},
		{"Repeat body", func(root vm.AsyncSteps, log *semLog, misuse func(vm.AsyncSteps)) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iteration %d", i)
				swallow(func() { misuse(as) })
			})
		}},
	}
	for _, pl := range places {
		for _, m := range misuses {
			t.Run(pl.name+"/"+m.name, func(t *testing.T) {
				r := semStart(func(root vm.AsyncSteps, log *semLog) {
					l := root.Tool()
					pl.build(root, log, func(as vm.AsyncSteps) { m.do(l, root, as, log) })
					root.Add(log.step("after"))
				})
				e := semFail(t, r.f, vm.InternalError)
				semInfoMentions(t, e.Info, m.info)
				for _, line := range r.log.lines {
					if line != "iteration 0" {
						t.Fatalf("the flow went on after the misuse: logged %q", r.log.lines)
					}
				}
				r.root.Release()
				semClean(t, r.l)
				if p := r.l.Stats().Panics; p != 0 {
					t.Fatalf("%d panics went to the loop's handler", p)
				}
			})
		}
	}
}

// A misuse report that reaches the VM is settled there: the next flow to
// run a frame at the same address (a root reused from the pool) is not
// failed with it.
func TestSemMisuseReportSettledOnce(t *testing.T) {
	for _, where := range []string{"step", "error handler", "Repeat body"} {
		t.Run(where, func(t *testing.T) {
			l, _ := semLoop()
			run := func(misuse bool) error {
				root := l.NewSteps()
				defer root.Release()
				body := func(as vm.AsyncSteps) {
					if misuse {
						as.Add(nil)
					}
				}
				switch where {
				case "step":
					root.Add(func(as vm.AsyncSteps, _ vm.Args) { body(as) })
				case "error handler":
					root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
						func(as vm.AsyncSteps, _ string) { body(as); as.Success() })
				default:
					root.Repeat(1, func(as vm.AsyncSteps, _ int) { body(as) })
				}
				f := root.Promise()
				l.RunUntilIdle()
				_, err := semResult(t, f)
				return err
			}
			if err := run(true); err == nil || err.(*vm.Error).Code != vm.InternalError {
				t.Fatalf("the misusing flow ended with %v, want InternalError", err)
			}
			if err := run(false); err != nil {
				t.Fatalf("the next flow failed with %v", err)
			}
		})
	}
}

// Misuse in setting up a root from outside any flow (the driving
// goroutine, a loop callback) has no running flow to fail: the root's next
// run fails at once with InternalError and the first report's info, before
// any of its steps runs. Release forgets the report; the next run after
// the failed one, or after a canceled one, starts clean.
func TestSemMisuseSettingUpIdleRoot(t *testing.T) {
	misuses := map[string]func(root vm.AsyncSteps){
		"Add nil":         func(root vm.AsyncSteps) { root.Add(nil) },
		"Loop nil":        func(root vm.AsyncSteps) { root.Loop(nil) },
		"SuccessStep 5":   func(root vm.AsyncSteps) { root.SuccessStep(vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4), vm.Int(5)) },
		"Success on root": func(root vm.AsyncSteps) { root.Success() },
	}
	for name, misuse := range misuses {
		t.Run(name, func(t *testing.T) {
			l, _ := semLoop()
			var ran []string
			step := func(s string) vm.ExecFunc {
				return func(vm.AsyncSteps, vm.Args) { ran = append(ran, s) }
			}
			root := l.NewSteps()
			root.Add(step("before"))
			misuse(root)
			root.Add(nil) // a second report: the first one's info stays
			root.Add(step("after"))
			f := root.Promise()
			l.RunUntilIdle()
			_, err := f.Wait(t.Context())
			if !errors.Is(err, vm.ErrInternal) {
				t.Fatalf("err = %v, want InternalError", err)
			}
			if len(ran) != 0 {
				t.Fatalf("steps ran: %v", ran)
			}
			var e *vm.Error
			if !errors.As(err, &e) || e.Info == "" || (name != "Add nil" && strings.Contains(e.Info, "nil step function")) {
				t.Fatalf("error %+v: want the first misuse's info", e)
			}
			// The next run of the same root is clean.
			root.Add(step("again"))
			g := root.Promise()
			l.RunUntilIdle()
			if _, err := g.Wait(t.Context()); err != nil || len(ran) != 1 {
				t.Fatalf("next run: %v, ran %v", err, ran)
			}
			// A report on a root that is released is forgotten with it.
			misuse(root)
			root.Release()
			again := l.NewSteps()
			again.Add(step("pooled"))
			h := again.Promise()
			l.RunUntilIdle()
			if _, err := h.Wait(t.Context()); err != nil {
				t.Fatalf("pooled root: %v", err)
			}
			// A report whose run is canceled before it starts leaves none.
			misuse(again)
			again.Execute()
			again.Cancel()
			l.RunUntilIdle()
			misuse(again)
			again.Add(step("after cancel"))
			k := again.Promise()
			l.RunUntilIdle()
			if _, err := k.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) {
				t.Fatalf("after a canceled run, a new report: err = %v, want InternalError", err)
			}
			again.Release()
			semClean(t, l)
		})
	}
}

// Misuse through the handle of a waiting step, made from outside the loop's
// calls, fails that step, in its own thread: its error handler sees
// InternalError, as it does for the same misuse through its Resumer, and
// the parallel step whose branch it is goes on with the other branches.
func TestSemMisuseFromOutsideFailsTheStep(t *testing.T) {
	five := []vm.Value{vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4), vm.Int(5)}
	for _, via := range []string{"handle", "Resumer"} {
		t.Run(via, func(t *testing.T) {
			l, _ := semLoop()
			var h vm.AsyncSteps
			var res vm.Resumer
			var trace []string
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				p := as.Parallel(func(as vm.AsyncSteps, code string) { trace = append(trace, "parallel handler "+code) })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.WaitExternal()
						h, res = as, as.Resumer()
					}, func(as vm.AsyncSteps, code string) {
						trace = append(trace, "step handler "+code)
						as.Success()
					})
				})
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { trace = append(trace, "other branch") })
			})
			f := root.Promise()
			l.RunUntilIdle()
			if via == "handle" {
				h.Success(five...)
			} else {
				res.Success(five...)
			}
			l.RunUntilIdle()
			if _, err := f.Wait(t.Context()); err != nil {
				t.Fatalf("the flow failed: %v (trace %v)", err, trace)
			}
			want := []string{"other branch", "step handler InternalError"}
			if fmt.Sprint(trace) != fmt.Sprint(want) {
				t.Fatalf("trace %v, want %v", trace, want)
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// Misuse from a deferred function of a function that is unwinding with
// its own Error, whose report a deeper recover swallows while the Error
// goes on unwinding: the flow fails with the report all the same, as
// TestSemMisuseSwallowedByRecoverAll has it, in a step, an error handler
// and a loop body. The Error's code used to win, and the misuse was lost.
func TestSemMisuseSwallowedWhileUnwinding(t *testing.T) {
	fail := func(as vm.AsyncSteps) {
		defer swallow(func() { as.Success() })
		as.Error("E")
	}
	for name, build := range map[string]func(root vm.AsyncSteps, log *semLog){
		"step": func(root vm.AsyncSteps, _ *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { fail(as) })
		},
		"error handler": func(root vm.AsyncSteps, _ *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First") },
				func(as vm.AsyncSteps, _ string) { fail(as) })
		},
		"Repeat body": func(root vm.AsyncSteps, _ *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, _ int) { fail(as) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				build(root, log)
				root.Add(log.step("after"))
			})
			e := semFail(t, r.f, vm.InternalError)
			semInfoMentions(t, e.Info, "after error")
			semExpect(t, r.log)
		})
	}
}

// Success and Error through a handle that names no running step say what
// it names instead.
func TestMisuseNamesWhatTheHandleIs(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		do         func(root, as vm.AsyncSteps)
	}{
		{"parallel accessor", "Success through a parallel accessor", func(_, as vm.AsyncSteps) {
			p := as.Parallel()
			p.Add(func(vm.AsyncSteps, vm.Args) {})
			p.Success()
		}},
		{"root's handle", "Error through a root's handle", func(root, _ vm.AsyncSteps) { root.Error("Mine") }},
		{"ended step", "Success through the handle of a step that has ended", func(_, as vm.AsyncSteps) {
			as.Success()
			as.Success()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { tc.do(root, as) })
			f := root.Promise()
			l.RunUntilIdle()
			semInfoMentions(t, semFail(t, f, vm.InternalError).Info, tc.info)
			root.Release()
		})
	}
}
