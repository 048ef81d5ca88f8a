package vm_test

import (
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Helpers and tests of flows of two loops in one process. Their names
// start with xl.

// xlStale runs a flow of l that raises code from its step and breaks a
// loop labelled "outer", so that l holds the code and label of an unwinding
// that ended.
func xlStale(t *testing.T, l *vm.Loop) {
	t.Helper()
	s := l.NewSteps()
	s.Loop(func(as vm.AsyncSteps) { as.Break("outer") }, "outer")
	s.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Stale") })
	f := s.Promise()
	l.RunUntilIdle()
	semFail(t, f, "Stale")
	s.Release()
}

// xlStrayEnd checks the end of root a, whose call recovered the unwinding
// of root b of another loop: a failed with InternalError saying so, b with
// InternalError as a flow whose function swallowed its Error. It releases
// both, and both loops must be clean.
func xlStrayEnd(t *testing.T, a, b vm.AsyncSteps, fa, fb *vm.Future) {
	t.Helper()
	semInfoMentions(t, semFail(t, fa, vm.InternalError).Info, "another loop")
	semInfoMentions(t, semFail(t, fb, vm.InternalError).Info, "returned after Error, Break or Continue")
	la, lb := a.Tool(), b.Tool()
	a.Release()
	b.Release()
	semClean(t, la)
	semClean(t, lb)
}

// A step of loop B completes a waiting step of loop A through its handle
// (one goroutine drives both loops), which runs A's error handler inside
// B's step; the handler raises through the handle of B's step (Error, or
// Break of B's loop). B's unwinding passes through A's handler: A's flow
// fails with InternalError, not with the stale code A last raised, nor does
// it break A's loop with B's Break; B's flow fails with InternalError as one
// whose function swallowed its Error.
func TestSemXLoopHandlerRaisesThroughOtherLoop(t *testing.T) {
	for _, how := range []string{"Error", "Break"} {
		t.Run(how, func(t *testing.T) {
			la, _ := semLoop()
			lb, _ := semLoop()
			xlStale(t, la)
			var log semLog
			var waiting, bStep vm.AsyncSteps
			a := la.NewSteps()
			a.Loop(func(as vm.AsyncSteps) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					waiting = as
					as.WaitExternal()
				}, func(as vm.AsyncSteps, code string) {
					log.add("A handler %s", code)
					if how == "Error" {
						bStep.Error("FromA")
					}
					bStep.Break()
				})
			}, "outer")
			a.Add(log.step("A after its loop"))
			fa := a.Promise()
			la.RunUntilIdle()
			b := lb.NewSteps()
			b.Loop(func(as vm.AsyncSteps) {
				bStep = as
				waiting.Error("X")
				log.add("B step goes on")
			})
			b.Add(log.step("B after its loop"))
			fb := b.Promise()
			lb.RunUntilIdle()
			la.RunUntilIdle()
			semExpect(t, &log, "A handler X", "B step goes on")
			xlStrayEnd(t, a, b, fa, fb)
		})
	}
}

// A step of loop B runs loop A (a loop of its own, driven from inside
// another's step); a step of A raises through the handle of B's step. A's
// call recovers B's unwinding: A's flow fails with InternalError, not the
// stale code, and B's with InternalError.
func TestSemXLoopStepRaisesThroughOuterLoop(t *testing.T) {
	la, _ := semLoop()
	lb, _ := semLoop()
	xlStale(t, la)
	var bStep vm.AsyncSteps
	a := la.NewSteps()
	a.Add(func(as vm.AsyncSteps, _ vm.Args) { bStep.Error("FromA") })
	b := lb.NewSteps()
	var fa *vm.Future
	b.Add(func(as vm.AsyncSteps, _ vm.Args) {
		bStep = as
		fa = a.Promise()
		la.RunUntilIdle()
	})
	fb := b.Promise()
	lb.RunUntilIdle()
	xlStrayEnd(t, a, b, fa, fb)
}

// Within one loop, a cancel handler fails a waiting step of another flow,
// whose error handler raises through the handle of the step being canceled:
// that unwinding is the handler's own (its flow goes on with its code), not
// one of another loop.
func TestSemXLoopCancelingHandleFromNestedHandler(t *testing.T) {
	l, _ := semLoop()
	var xStep, yStep vm.AsyncSteps
	y := l.NewSteps()
	y.Add(func(as vm.AsyncSteps, _ vm.Args) {
		yStep = as
		as.WaitExternal()
	}, func(as vm.AsyncSteps, code string) { xStep.Error("Z") })
	x := l.NewSteps()
	x.Add(func(as vm.AsyncSteps, _ vm.Args) {
		xStep = as
		as.SetCancel(func(vm.AsyncSteps) { yStep.Error("Y") })
	})
	fy, fx := y.Promise(), x.Promise()
	l.RunUntilIdle()
	x.Cancel()
	l.RunUntilIdle()
	semFail(t, fy, "Z")
	if _, err := semResult(t, fx); err != vm.ErrCanceled {
		t.Fatalf("canceled flow: %v", err)
	}
	x.Release()
	y.Release()
	semClean(t, l)
}

// A step of loop B releases a running root of loop A; A's cancel handler,
// which the release runs inside B's step, completes B's step through its
// handle with a value, and a flow of A started meanwhile from B's step
// takes A's pooled root: B goes on with the value, A's first flow is
// canceled and the second runs in A's next pass.
func TestSemXLoopReleaseRunsCancelHandlerThatCompletes(t *testing.T) {
	la, _ := semLoop()
	lb, _ := semLoop()
	var log semLog
	var bStep vm.AsyncSteps
	a := la.NewSteps()
	a.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) {
			log.add("A cancel")
			bStep.Success(vm.Int(7))
		})
	})
	fa := a.Promise()
	la.RunUntilIdle()
	var a2 vm.AsyncSteps
	var f2 *vm.Future
	b := lb.NewSteps()
	b.Add(func(as vm.AsyncSteps, _ vm.Args) {
		bStep = as
		as.WaitExternal()
		a.Release()
		a2 = la.NewSteps()
		a2.Add(log.step("A2 step"))
		f2 = a2.Promise()
	})
	b.Add(func(as vm.AsyncSteps, args vm.Args) { log.add("B got %d", args.Int(0)) })
	fb := b.Promise()
	lb.RunUntilIdle()
	la.RunUntilIdle()
	semExpect(t, &log, "A cancel", "B got 7", "A2 step")
	if _, err := semResult(t, fa); err != vm.ErrCanceled {
		t.Fatalf("A: %v, want ErrCanceled", err)
	}
	semOK(t, fb)
	semOK(t, f2)
	a2.Release()
	b.Release()
	semClean(t, la)
	semClean(t, lb)
}
