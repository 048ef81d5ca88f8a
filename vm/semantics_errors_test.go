package vm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The four ways an error handler completes (FTN12 2.1 error_callback).
func TestSemErrorHandlerOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		handler func(as vm.AsyncSteps, log *semLog)
		want    []string
		code    string // flow error; "" for success
	}{
		{
			name:    "success with values",
			handler: func(as vm.AsyncSteps, _ *semLog) { as.Success(vm.Str("recovered"), vm.Int(9)) },
			want:    []string{"failing", "inner handler E", "sibling got recovered 9", "next"},
		},
		{
			name:    "success without values",
			handler: func(as vm.AsyncSteps, _ *semLog) { as.Success() },
			want:    []string{"failing", "inner handler E", "sibling got 0", "next"},
		},
		{
			name:    "error replaces code",
			handler: func(as vm.AsyncSteps, _ *semLog) { as.Error("F", "replaced") },
			want:    []string{"failing", "inner handler E", "outer handler F replaced"},
			code:    "F",
		},
		{
			name:    "silent return keeps unwinding",
			handler: func(vm.AsyncSteps, *semLog) {},
			want:    []string{"failing", "inner handler E", "outer handler E original"},
			code:    "E",
		},
		{
			name: "add steps is implicit success",
			handler: func(as vm.AsyncSteps, log *semLog) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("alt 1")
					as.Success(vm.Int(1))
				})
				as.Add(func(as vm.AsyncSteps, a vm.Args) {
					log.add("alt 2 got %d", a.Int(0))
					as.Success(vm.Str("alt"), vm.Int(2))
				})
			},
			want: []string{"failing", "inner handler E", "alt 1", "alt 2 got 1", "sibling got alt 2", "next"},
		},
		{
			name: "added step fails: handler not called again",
			handler: func(as vm.AsyncSteps, log *semLog) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("alt")
					as.Error("G", "from alt")
				})
			},
			want: []string{"failing", "inner handler E", "alt", "outer handler G from alt"},
			code: "G",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						log.add("failing")
						as.Error("E", "original")
					}, func(as vm.AsyncSteps, code string) {
						log.add("inner handler %s", code)
						c.handler(as, log)
					})
					as.Add(func(as vm.AsyncSteps, a vm.Args) {
						if a.Len() == 2 {
							log.add("sibling got %s %d", a.String(0), a.Int(1))
						} else {
							log.add("sibling got %d", a.Len())
						}
					})
				}, func(as vm.AsyncSteps, code string) {
					log.add("outer handler %s %s", code, as.State().ErrorInfo())
				})
				root.Add(log.step("next"))
			})
			semExpect(t, r.log, c.want...)
			if c.code == "" {
				semOK(t, r.f)
			} else {
				semFail(t, r.f, c.code)
			}
		})
	}
}

// Steps added by an error handler stay on the failed step's level: they
// run before the failed step's next sibling.
func TestSemErrorHandlerStepsStayOnLevel(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("A")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("A.1")
				as.Error("E")
			})
			as.Add(log.step("A.2 never"))
		}, func(as vm.AsyncSteps, code string) {
			log.add("A handler %s", code)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("X")
				as.Add(log.step("X.1"))
			})
			as.Add(log.step("Y"))
		})
		root.Add(log.step("B"))
	}, "A", "A.1", "A handler E", "X", "X.1", "Y", "B")
}

// ErrorInfo is the info of the last Error; an Error without info clears it.
// LastException is an *vm.Error for Error calls.
func TestSemErrorInfoAndLastException(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if as.State().ErrorInfo() != "" || as.State().LastException() != nil {
				log.add("state not clean before any error")
			}
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Error("First", "first info")
			}, func(as vm.AsyncSteps, code string) {
				st := as.State()
				log.add("%s info=%q", code, st.ErrorInfo())
				var e *vm.Error
				if !errors.As(st.LastException(), &e) || e.Code != "First" || e.Info != "first info" {
					log.add("bad LastException %#v", st.LastException())
				}
				as.Error("Second")
			})
		}, func(as vm.AsyncSteps, code string) {
			st := as.State()
			log.add("%s info=%q", code, st.ErrorInfo())
			var e *vm.Error
			if !errors.As(st.LastException(), &e) || e.Code != "Second" || e.Info != "" {
				log.add("bad LastException %#v", st.LastException())
			}
			as.Success()
		})
	}, `First info="first info"`, `Second info=""`)
}

// An Error with an empty code is still an error (InternalError) and never a
// success.
func TestSemErrorEmptyCode(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("") })
		root.Add(log.step("next"))
	})
	if _, err := semResult(t, r.f); err == nil {
		t.Fatal("Error(\"\") completed the flow with success")
	}
	semExpect(t, r.log)
}

// Error does not return into the step function.
func TestSemErrorDoesNotReturn(t *testing.T) {
	semRunFail(t, "F", func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("E")
			log.add("after Error")
		}, func(as vm.AsyncSteps, code string) {
			as.Error("F")
			log.add("after Error in handler")
		})
	})
}

func semStackOuter(as vm.AsyncSteps, _ vm.Args) {
	as.Add(semStackMiddle)
}

func semStackMiddle(as vm.AsyncSteps, _ vm.Args) {
	as.Add(semStackInner)
}

func semStackInner(as vm.AsyncSteps, _ vm.Args) {
	as.Error("Deep", "from the innermost step")
}

// AsyncStack names the step functions of the failing stack, innermost
// last.
func TestSemAsyncStack(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var stack []uintptr
	root.Add(semStackOuter, func(as vm.AsyncSteps, code string) {
		stack = as.State().AsyncStack()
	})
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, f, "Deep")
	if len(stack) == 0 {
		t.Fatal("AsyncStack is empty")
	}
	var names []string
	for _, pc := range stack {
		names = append(names, semFuncName(pc))
	}
	if !strings.HasSuffix(names[len(names)-1], ".semStackInner") {
		t.Fatalf("innermost AsyncStack entry = %v, want semStackInner last", names)
	}
	idx := func(s string) int {
		for i, n := range names {
			if strings.HasSuffix(n, s) {
				return i
			}
		}
		return -1
	}
	o, m, i := idx(".semStackOuter"), idx(".semStackMiddle"), idx(".semStackInner")
	if o < 0 || m < 0 || !(o < m && m < i) {
		t.Fatalf("AsyncStack = %v, want semStackOuter, semStackMiddle, semStackInner in that order", names)
	}
	// The state's copy is the caller's to keep.
	stack[0] = 0
	if root.State().AsyncStack()[0] == 0 {
		t.Fatal("AsyncStack returned the state's own slice")
	}
}

// An unhandled error ends the flow: no further step of any level runs.
func TestSemUnhandledErrorStopsFlow(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E", "info") })
			as.Add(log.step("sibling"))
		})
		root.Add(log.step("level0 next"))
	})
	e := semFail(t, r.f, "E")
	if e.Info != "info" {
		t.Fatalf("Future error info = %q, want info", e.Info)
	}
	semExpect(t, r.log)
}

func semStackParallelOuter(as vm.AsyncSteps, _ vm.Args) {
	p := as.Parallel()
	p.Add(semStackBranchWaits)
	p.Add(semStackBranch)
}

func semStackBranchWaits(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() }

func semStackBranch(as vm.AsyncSteps, _ vm.Args) { as.Add(semStackInner) }

// An error raised in a parallel branch keeps the branch's steps in
// AsyncStack when it reaches the handlers outside the parallel: the stack
// is the one at the time the error was raised.
func TestSemAsyncStackFromBranch(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var names []string
	root.Add(semStackParallelOuter, func(as vm.AsyncSteps, code string) {
		for _, pc := range as.State().AsyncStack() {
			names = append(names, semFuncName(pc))
		}
	})
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, f, "Deep")
	want := []string{".semStackParallelOuter", ".semStackBranch", ".semStackInner"}
	if len(names) != len(want) {
		t.Fatalf("AsyncStack = %q, want %q", names, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(names[i], w) {
			t.Fatalf("AsyncStack = %q, want %q", names, want)
		}
	}
}

// Error through another step's handle from a cancel handler or Stack
// destroy callback of the same flow is refused (misuse, recorded as
// LastException only): the error being raised reaches the handlers with
// its own ErrorInfo, not the refused call's.
func TestSemRefusedErrorKeepsErrorInfo(t *testing.T) {
	for _, how := range []string{"timeout", "parallel abort", "destroy"} {
		t.Run(how, func(t *testing.T) {
			// outer has a running sub-step when the callback calls its Error.
			refused := func(outer vm.AsyncSteps) { outer.Error("Refused", "the refused call's info") }
			l, root, seen, f := semHandled(func(_, outer vm.AsyncSteps) {
				switch how {
				case "timeout":
					outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { refused(outer) })
						as.SetTimeout(time.Millisecond)
					})
				case "parallel abort":
					p := outer.Parallel()
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { refused(outer) })
						as.WaitExternal()
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Raised", "the raised error's info") })
					})
				case "destroy":
					outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.StackRaw(8, func(unsafe.Pointer) { refused(outer) })
						as.Error("Raised", "the raised error's info")
					})
				}
			})
			wantCode, wantInfo := "Raised", "the raised error's info"
			if how == "timeout" {
				wantCode, wantInfo = vm.Timeout, ""
			}
			seen.expectRecorded(t, wantCode, wantInfo, "sub-steps are running")
			if e := semFail(t, f, wantCode); e.Info != wantInfo {
				t.Fatalf("Future's error info = %q, want %q", e.Info, wantInfo)
			}
			root.Release()
			if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 || st.Timers != 0 {
				t.Fatalf("after the flow: %+v", st)
			}
		})
	}
}

// A panic with a *vm.Error that has no code (or a nil one) is InternalError,
// as Error("") is, with that error's info: it neither ends the flow as a
// success nor crashes the loop, and LastException is a usable *vm.Error.
func TestSemPanicCodelessVMError(t *testing.T) {
	for _, where := range []string{"step", "error handler", "cancel handler"} {
		for _, val := range []*vm.Error{{Info: "no code"}, nil} {
			t.Run(fmt.Sprintf("%s/%v", where, val != nil), func(t *testing.T) {
				_, _, seen, f := semHandled(func(_, as vm.AsyncSteps) {
					switch where {
					case "step":
						as.Add(func(vm.AsyncSteps, vm.Args) { panic(val) })
					case "error handler":
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First") },
							func(vm.AsyncSteps, string) { panic(val) })
					case "cancel handler":
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.SetCancel(func(vm.AsyncSteps) { panic(val) })
							as.SetTimeout(time.Millisecond)
						})
					}
				})
				wantCode := vm.InternalError
				if where == "cancel handler" { // recorded only: the timeout is raised
					wantCode = vm.Timeout
				}
				semFail(t, f, wantCode)
				var e *vm.Error
				if seen.code != wantCode || !errors.As(seen.last, &e) || e == nil || e.Code != vm.InternalError || seen.last.Error() == "" {
					t.Fatalf("handler saw %q, LastException %#v; want %q, an InternalError *vm.Error", seen.code, seen.last, wantCode)
				}
				if val != nil && e.Info != val.Info || where != "cancel handler" && seen.info != e.Info {
					t.Fatalf("ErrorInfo %q, LastException's info %q; want %q", seen.info, e.Info, "no code")
				}
			})
		}
	}
}

// semOtherWaits starts a flow on l whose one step waits for an external
// event, with onError as its error handler and onCancel (if not nil) as
// its cancel handler, and runs l until idle. It returns the waiting step's
// handle, the flow's root and its Future: the flow another flow's step
// makes fail or cancels from a deferred function.
func semOtherWaits(l *vm.Loop, onError vm.ErrorFunc, onCancel vm.CancelFunc) (waiting, other vm.AsyncSteps, f *vm.Future) {
	other = l.NewSteps()
	other.Add(func(as vm.AsyncSteps, _ vm.Args) {
		waiting = as
		if onCancel != nil {
			as.SetCancel(onCancel)
		}
		as.WaitExternal()
	}, onError)
	f = other.Promise()
	l.RunUntilIdle()
	return waiting, other, f
}

// An Error in flight keeps its code when a deferred function of the
// failing step makes another flow unwind first, whose error or cancel
// handler calls Error in turn.
func TestSemErrorCodeSurvivesNestedUnwinding(t *testing.T) {
	for _, how := range []string{"error handler", "cancel handler"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			waiting, other, fo := semOtherWaits(l,
				func(as vm.AsyncSteps, code string) { as.Error("OtherHandler", "the other flow's") },
				func(as vm.AsyncSteps) { as.Error("OtherCancel") })
			root := l.NewSteps()
			var code, info string
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if how == "error handler" {
					defer waiting.Error("Other")
				} else {
					defer other.Cancel()
				}
				as.Error("Mine", "this flow's")
			}, func(as vm.AsyncSteps, c string) { code, info = c, as.State().ErrorInfo() })
			f := root.Promise()
			l.RunUntilIdle()
			if code != "Mine" || info != "this flow's" {
				t.Fatalf("handler saw %q, ErrorInfo %q; want Mine, this flow's", code, info)
			}
			if e := semFail(t, f, "Mine"); e.Info != "this flow's" {
				t.Fatalf("Future's info = %q", e.Info)
			}
			if how == "error handler" {
				semFail(t, fo, "OtherHandler")
			} else if _, err := semResult(t, fo); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("the other flow ended with %v, want ErrCanceled", err)
			}
		})
	}
}

// swallow runs f and recovers whatever it panics with: the mistake of a
// step that recovers the VM's unwinding and carries on.
func swallow(f func()) {
	defer func() { _ = recover() }()
	f()
}

// A step function (or error handler, or loop body) that recovers the panic
// with which Error, Break or Continue unwind and then returns has broken
// their contract: its flow ends with InternalError, not as the step's code
// would have it (implicit success, a wait, sub-steps, a new code), and so
// has one that raises again after it: the new code or Break is not what
// the flow ends with.
func TestSemSwallowedUnwindingIsInternalError(t *testing.T) {
	after := func(log *semLog) vm.ExecFunc { return log.step("after") }
	for _, tc := range []struct {
		name  string
		build func(root vm.AsyncSteps, log *semLog)
	}{
		{"Error in a step", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { swallow(func() { as.Error("E") }) })
			root.Add(after(log))
		}},
		{"Error in a waiting step", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				swallow(func() { as.Error("E") })
			})
			root.Add(after(log))
		}},
		{"Error then Add", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				swallow(func() { as.Error("E") })
				as.Add(log.step("sub-step"))
			})
			root.Add(after(log))
		}},
		{"Error then Success", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				swallow(func() { as.Error("E") })
				as.Success()
			})
			root.Add(after(log))
		}},
		{"Error in an error handler", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
				func(as vm.AsyncSteps, code string) { swallow(func() { as.Error("F") }) })
			root.Add(after(log))
		}},
		{"Error then Error", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				swallow(func() { as.Error("E") })
				as.Error("F")
			})
			root.Add(after(log))
		}},
		{"Error then Error in an error handler", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
				func(as vm.AsyncSteps, code string) {
					swallow(func() { as.Error("F") })
					as.Error("G")
				})
			root.Add(after(log))
		}},
		{"Break then Error in a Repeat", func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iteration %d", i)
				swallow(func() { as.Break() })
				as.Error("E")
			})
			root.Add(after(log))
		}},
		{"Error then Break in a Repeat", func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iteration %d", i)
				swallow(func() { as.Error("E") })
				as.Break()
			})
			root.Add(after(log))
		}},
		{"Break in a Repeat", func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iteration %d", i)
				swallow(func() { as.Break() })
			})
			root.Add(after(log))
		}},
		{"Continue in a Loop that added a step", func(root vm.AsyncSteps, log *semLog) {
			root.Loop(func(as vm.AsyncSteps) {
				log.add("iteration")
				as.Add(log.step("sub-step"))
				swallow(func() { as.Continue() })
			})
			root.Add(after(log))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := semStart(tc.build)
			e := semFail(t, r.f, vm.InternalError)
			semInfoMentions(t, e.Info, "did not reach the VM", "IsUnwinding")
			for _, line := range r.log.lines {
				if line != "iteration" && line != "iteration 0" {
					t.Fatalf("the flow went on after the unwinding was swallowed: logged %q", r.log.lines)
				}
			}
			if len(r.log.lines) > 1 {
				t.Fatalf("the loop went on after the unwinding was swallowed: logged %q", r.log.lines)
			}
			r.root.Release()
			semClean(t, r.l)
		})
	}
}

// A step's error handler can run while the step's own Error is still
// unwinding it: a deferred function of the step makes another flow fail,
// whose handler raises an error through the step's handle. The handler
// has not swallowed anything: it settles that error as any handler does
// (returning lets it go on, Success settles it), and the unwinding the
// step started is its function's, not the handler's.
func TestSemHandlerNestedInItsStepsUnwinding(t *testing.T) {
	for _, how := range []string{"returns", "succeeds"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			var otherHandler vm.ErrorFunc
			waiting, other, fo := semOtherWaits(l, func(as vm.AsyncSteps, code string) { otherHandler(as, code) }, nil)
			root := l.NewSteps()
			var seen []string
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				otherHandler = func(vm.AsyncSteps, string) { as.Error("Nested", "raised by the other flow") }
				defer waiting.Error("Other")
				as.Error("Mine", "this flow's")
			}, func(as vm.AsyncSteps, code string) {
				seen = append(seen, code)
				if how == "succeeds" {
					as.Success()
				}
			})
			f := root.Promise()
			l.RunUntilIdle()
			semFail(t, fo, "Other")
			if len(seen) != 1 || seen[0] != "Nested" {
				t.Fatalf("the handler saw %q, want Nested", seen)
			}
			if how == "returns" {
				semFail(t, f, "Nested")
			} else if _, err := semResult(t, f); err != nil && err.(*vm.Error).Code == vm.InternalError {
				t.Fatalf("the flow failed with %v after its handler settled the error", err)
			}
			root.Release()
			other.Release()
			semClean(t, l)
		})
	}
}

// Success through the handle of a step whose own Error is in flight, from
// another flow's handler that the step's deferred function set off, is
// that handler's external completion: neither flow is blamed for
// swallowing the step's unwinding.
func TestSemSuccessFromElsewhereDuringUnwinding(t *testing.T) {
	l, _ := semLoop()
	var failing vm.AsyncSteps
	waiting, other, fo := semOtherWaits(l, func(vm.AsyncSteps, string) { failing.Success() }, nil)
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		failing = as
		defer waiting.Error("Other")
		as.Error("Mine")
	})
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, fo, "Other")
	if _, err := semResult(t, f); err != nil && err.(*vm.Error).Code == vm.InternalError {
		t.Fatalf("the flow failed with %v", err)
	}
	root.Release()
	other.Release()
}

// A step or error handler whose branch ends during its own call (it fails
// a sibling through a kept handle, which aborts the parallel step) and
// then panics: the panic has no thread left to fail, and is recorded as
// LastException, as a cancel handler's is, whether the flow ended with
// the sibling's error or goes on after the parallel step. It used to be
// dropped without a trace.
func TestSemPanicAfterOwnBranchEnded(t *testing.T) {
	for _, in := range []string{"step", "error handler"} {
		for _, succeed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recovered=%v", in, succeed), func(t *testing.T) {
				l, _ := semLoop()
				var log semLog
				var h1 vm.AsyncSteps
				root := l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					p := as.Parallel(func(as vm.AsyncSteps, code string) {
						log.add("parallel handler %s", code)
						if succeed {
							as.Success()
						}
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { h1 = as; as.WaitExternal() })
					fail := func(as vm.AsyncSteps) {
						h1.Error("E")
						log.add("own handle valid: %v", as.Valid())
						panic("late")
					}
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel") })
						if in == "step" {
							fail(as)
							return
						}
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("X") },
							func(as vm.AsyncSteps, _ string) { fail(as) })
					})
				})
				root.Add(func(vm.AsyncSteps, vm.Args) { log.add("next") })
				f := root.Promise()
				l.RunUntilIdle()
				_, err := f.Wait(t.Context())
				if succeed {
					if err != nil {
						t.Fatalf("flow ended with %v, want success", err)
					}
					semExpect(t, &log, "cancel", "parallel handler E", "own handle valid: false", "next")
				} else {
					if !errors.Is(err, &vm.Error{Code: "E"}) {
						t.Fatalf("flow ended with %v, want E", err)
					}
					semExpect(t, &log, "cancel", "parallel handler E", "own handle valid: false")
				}
				var pe *vm.PanicError
				if last := root.State().LastException(); !errors.As(last, &pe) || pe.Value != "late" {
					t.Fatalf("LastException %v, want the late panic", last)
				}
				root.Release()
				semClean(t, l)
			})
		}
	}
}
