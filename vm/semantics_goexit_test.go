package vm_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// runtime.Goexit out of user code (t.FailNow in a step, say) ends the
// goroutine that drives the loop, which no protected call can prevent. The
// loop must stay usable from another goroutine, the other flows must go on,
// and the flow whose code did not return must fail with InternalError, as
// if that code had panicked, instead of never completing. The loop used to
// refuse every later pass as one run from inside its own callbacks.

// semGoexitDrive runs fn on a goroutine of its own, which a Goexit may
// end, and waits for it.
func semGoexitDrive(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

// semGoexitBystander starts a flow on l that waits, for the test to
// complete once the Goexit is behind: the loop must run it on.
func semGoexitBystander(l *vm.Loop) (complete func(), f *vm.Future, root vm.AsyncSteps) {
	root = l.NewSteps()
	var h vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { h = as; as.WaitExternal() })
	root.Add(func(as vm.AsyncSteps, args vm.Args) { as.Success(vm.Int(args.Int(0) + 1)) })
	f = root.Promise()
	return func() { h.Success(vm.Int(41)) }, f, root
}

// semGoexitAfter checks what follows a Goexit in every test: the loop runs
// the bystander to its end, and nothing is left once the roots are
// released.
func semGoexitAfter(t *testing.T, l *vm.Loop, complete func(), fb *vm.Future, roots ...vm.AsyncSteps) {
	t.Helper()
	complete()
	l.RunUntilIdle()
	if got := semOK(t, fb); got.Int(0) != 42 {
		t.Fatalf("the other flow ended with %v", got.Int(0))
	}
	for _, r := range roots {
		r.Release()
	}
	semClean(t, l)
	semNextRootWorks(t, l)
}

// A Goexit in a step function or loop body is an InternalError of its
// step; one in an error handler, an InternalError the handler raised. The
// outer handler gets it, with ErrorInfo and LastException saying what
// happened, and may recover.
func TestGoexitInStepOrErrorHandler(t *testing.T) {
	for _, tc := range []struct {
		name, where string
		inner       vm.ExecFunc
		eh          vm.ErrorFunc
	}{
		{"step function", "step function", func(vm.AsyncSteps, vm.Args) { runtime.Goexit() }, nil},
		{"error handler", "error handler", func(as vm.AsyncSteps, _ vm.Args) { as.Error("Mine") }, func(vm.AsyncSteps, string) { runtime.Goexit() }},
		{"Loop body", "loop body", func(as vm.AsyncSteps, _ vm.Args) {
			as.Loop(func(vm.AsyncSteps) { runtime.Goexit() })
		}, nil},
		{"Repeat body in line", "loop body", func(as vm.AsyncSteps, _ vm.Args) {
			// Iterations 0-4 end at once: the sixth runs in the same call.
			as.Repeat(10, func(_ vm.AsyncSteps, i int) {
				if i == 5 {
					runtime.Goexit()
				}
			})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := semLoop()
			complete, fb, bystander := semGoexitBystander(l)
			root := l.NewSteps()
			var seen semSeen
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if tc.eh != nil {
					as.Add(tc.inner, tc.eh)
				} else {
					as.Add(tc.inner)
				}
			}, func(as vm.AsyncSteps, code string) {
				seen = semSeen{code, as.State().ErrorInfo(), as.State().LastException()}
				as.Success(vm.Str("recovered"))
			})
			f := root.Promise()
			semGoexitDrive(l.RunUntilIdle)
			l.RunUntilIdle() // on this goroutine: the next pass recovers
			if !l.IsSameThread() {
				t.Fatal("IsSameThread is false on the goroutine that drives the loop since the Goexit")
			}
			if got := semOK(t, f); got.String(0) != "recovered" {
				t.Fatalf("the flow ended with %v", got.Values())
			}
			semInfoMentions(t, seen.info, "Goexit", tc.where)
			seen.expectRecorded(t, vm.InternalError, seen.info, "Goexit", tc.where)
			semGoexitAfter(t, l, complete, fb, root, bystander)
		})
	}
}

// A Goexit in a cancel handler leaves the flow's teardown unfinished: the
// next pass cancels the rest of its frames (their cancel handlers run) and
// ends it with InternalError. The root, reused from the pool, is not
// marked as being torn down any more (Error through a waiting step's
// handle was refused as from a cancel handler).
func TestGoexitInCancelHandler(t *testing.T) {
	for _, how := range []string{"Cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			complete, fb, bystander := semGoexitBystander(l)
			root := l.NewSteps()
			outerCanceled := 0
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { outerCanceled++ })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { runtime.Goexit() })
					if how == "timeout" {
						as.SetTimeout(time.Millisecond)
					}
				})
			})
			f := root.Promise()
			l.RunUntilIdle()
			semGoexitDrive(func() {
				if how == "Cancel" {
					root.Cancel()
				} else {
					clk.Advance(10 * time.Millisecond)
					l.RunUntilIdle()
				}
			})
			l.RunUntilIdle()
			e := semFail(t, f, vm.InternalError)
			semInfoMentions(t, e.Info, "Goexit", "cancel handler")
			if outerCanceled != 1 {
				t.Fatalf("the outer cancel handler ran %d times, want once", outerCanceled)
			}
			root.Release()
			next := l.NewSteps() // root's memory, from the pool
			var h vm.AsyncSteps
			next.Add(func(as vm.AsyncSteps, _ vm.Args) { h = as; as.WaitExternal() })
			fn := next.Promise()
			l.RunUntilIdle()
			h.Error("Theirs", "from outside")
			l.RunUntilIdle()
			semFail(t, fn, "Theirs")
			semGoexitAfter(t, l, complete, fb, next, bystander)
		})
	}
}

// A Goexit in a Stack destroy callback: the rest of the run is torn down
// (the other allocations' callbacks run) and the flow ends with
// InternalError.
func TestGoexitInDestroyCallback(t *testing.T) {
	l, _ := semLoop()
	complete, fb, bystander := semGoexitBystander(l)
	root := l.NewSteps()
	destroyed := 0
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.StackRaw(8, func(unsafe.Pointer) { destroyed++ })
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.StackRaw(8, func(unsafe.Pointer) { runtime.Goexit() })
		})
	})
	f := root.Promise()
	semGoexitDrive(l.RunUntilIdle)
	l.RunUntilIdle()
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, "Goexit", "destroy callback")
	if destroyed != 1 {
		t.Fatalf("the outer allocation's callback ran %d times, want once", destroyed)
	}
	semGoexitAfter(t, l, complete, fb, root, bystander)
}

// A step of one flow that delivers an error to another flow's waiting
// step, whose error handler calls Goexit, leaves both calls unfinished:
// both flows fail.
func TestGoexitNestedInAnotherFlowsStep(t *testing.T) {
	l, _ := semLoop()
	complete, fb, bystander := semGoexitBystander(l)
	target := l.NewSteps()
	var h vm.AsyncSteps
	target.Add(func(as vm.AsyncSteps, _ vm.Args) {
		h = as
		as.WaitExternal()
	}, func(vm.AsyncSteps, string) { runtime.Goexit() })
	ft := target.Promise()
	l.RunUntilIdle()
	caller := l.NewSteps()
	caller.Add(func(vm.AsyncSteps, vm.Args) { h.Error("Yours") })
	fc := caller.Promise()
	semGoexitDrive(l.RunUntilIdle)
	l.RunUntilIdle()
	semInfoMentions(t, semFail(t, ft, vm.InternalError).Info, "Goexit", "error handler")
	semInfoMentions(t, semFail(t, fc, vm.InternalError).Info, "Goexit", "step function")
	semGoexitAfter(t, l, complete, fb, target, caller, bystander)
}

// Run on another goroutine after a Goexit ended the one that ran the loop
// runs it on: the first pass recovers.
func TestGoexitThenRun(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(vm.AsyncSteps, vm.Args) { runtime.Goexit() })
	f := root.Promise()
	semGoexitDrive(l.RunUntilIdle)
	stop := semRunAsync(t, l)
	<-f.Done()
	stop()
	semFail(t, f, vm.InternalError)
	root.Release()
	semClean(t, l)
}

// A Goexit in a callback that belongs to no flow (an Immediate, say) is
// reported to the panic handler by the next pass, as a panic there is.
func TestGoexitInCallback(t *testing.T) {
	var reported []any
	l := vm.NewLoop(vm.WithPanicHandler(func(p any) { reported = append(reported, p) }))
	complete, fb, bystander := semGoexitBystander(l)
	ran := false
	l.Immediate(func() { runtime.Goexit() })
	l.Immediate(func() { ran = true })
	semGoexitDrive(l.RunUntilIdle)
	l.RunUntilIdle()
	if len(reported) != 1 || !ran {
		t.Fatalf("panic handler got %v, the next callback ran: %v", reported, ran)
	}
	e, ok := reported[0].(*vm.Error)
	if !ok || e.Code != vm.InternalError {
		t.Fatalf("panic handler got %#v", reported[0])
	}
	semInfoMentions(t, e.Info, "Goexit", "callback")
	semGoexitAfter(t, l, complete, fb, bystander)
}

// Between the Goexit and the next pass, calls from outside the loop's
// callbacks are not taken for calls of the abandoned code: Error through
// the abandoned step's handle, or a misuse, does not panic out of the
// caller as it would inside that step. (They used to.)
func TestGoexitThenCallsFromOutside(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var h vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		h = as
		runtime.Goexit()
	})
	f := root.Promise()
	semGoexitDrive(l.RunUntilIdle)
	other := l.NewSteps()
	for _, call := range []func(){
		func() { h.Error("Late") },
		func() { h.Success() },
		func() { other.Add(nil) },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("a call from outside panicked: %v", p)
				}
			}()
			call()
		}()
	}
	l.RunUntilIdle()
	semFail(t, f, "Late") // delivered from outside, as to a running step
	root.Release()
	other.Release()
	semClean(t, l)
	semNextRootWorks(t, l)
}

// A step or loop body that a Goexit abandoned may still be completed from
// outside before the next pass: the flow goes on in a turn of its own.
// (The completion used to be taken for the abandoned dispatch's, which
// went on in line with it, and the flow never completed.)
func TestGoexitThenCompletedFromOutside(t *testing.T) {
	for _, where := range []string{"step", "loop body"} {
		t.Run(where, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var h vm.AsyncSteps
			abandon := func(as vm.AsyncSteps) {
				if h == (vm.AsyncSteps{}) {
					h = as
					runtime.Goexit()
				}
				as.Break()
			}
			if where == "step" {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { abandon(as) })
			} else {
				root.Loop(abandon)
			}
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str("after")) })
			f := root.Promise()
			semGoexitDrive(l.RunUntilIdle)
			h.Success()
			l.RunUntilIdle()
			if got := semOK(t, f); got.String(0) != "after" {
				t.Fatalf("the flow ended with %v", got.Values())
			}
			root.Release()
			semClean(t, l)
			semNextRootWorks(t, l)
		})
	}
}
