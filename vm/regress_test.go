package vm_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// Regression tests for bugs found by the test suites and the fuzzer. Each
// names the entry of the bug list it guards.

// BUG-S1: misuse from a loop callback fails the flow it names instead of
// being swallowed as a callback panic.
func TestRegressMisuseFromImmediate(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		as.Tool().Immediate(func() { as.Add(func(vm.AsyncSteps, vm.Args) {}) })
	})
	f := root.Promise()
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatalf("flow still waiting; Stats().Panics=%d", l.Stats().Panics)
	}
	if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) {
		t.Fatalf("err = %v, want InternalError", err)
	}
	if root.State().ErrorInfo() == "" {
		t.Fatal("no ErrorInfo for the misuse")
	}
}

// BUG-S2: Success twice in the root's last step is InternalError, as it is
// in any other step.
func TestRegressMisuseInLastStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   vm.ExecFunc
	}{
		{"Success twice", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Success() }},
		{"Error after Success", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Error("X") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
			root := l.NewSteps()
			root.Add(tc.fn)
			f := root.Promise()
			l.RunUntilIdle()
			if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) {
				t.Fatalf("err = %v, want InternalError", err)
			}
		})
	}
}

// BUG-F1: a flow's turn queued in a run-queue entry that once held an
// Immediate is not mistaken for that Immediate.
func TestRegressRunQueueEntryReuse(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	l.Immediate(func() {})
	root := l.NewSteps()
	n := 0
	root.Repeat(100, func(as vm.AsyncSteps, i int) {
		as.Parallel().Add(func(vm.AsyncSteps, vm.Args) { n++ })
	})
	f := root.Promise()
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatalf("flow stalled after %d of 100 branches", n)
	}
}

// BUG-F2: a queued turn of a branch that was freed (its parallel failed)
// is dropped even when the memory is reused by a new step.
func TestRegressStaleBranchTask(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	ran := false
	p := root.Parallel(func(as vm.AsyncSteps, code string) {
		as.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
	})
	p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") })
	p.SuccessStep()
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); err != nil || !ran {
		t.Fatalf("ran=%v err=%v; want the handler's step to run and the flow to succeed", ran, err)
	}
}

// BUG-S3: misuse inside a cancel handler does not turn a cancel into an
// error: no error handler runs, the Future reports ErrCanceled.
func TestRegressMisuseInCancelHandler(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	handlerRan := false
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { root.Add(func(vm.AsyncSteps, vm.Args) {}) })
	}, func(as vm.AsyncSteps, code string) { handlerRan = true })
	f := root.Promise()
	l.RunUntilIdle()
	root.Cancel()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); handlerRan || !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("handlerRan=%v err=%v; want false, ErrCanceled", handlerRan, err)
	}
}

// BUG-S4: a call through the zero AsyncSteps inside a step fails the flow
// (and Error does not return).
func TestRegressZeroHandle(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		var z vm.AsyncSteps
		z.Error("X")
		as.State().Set("returned", true)
	})
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) || root.State().Exists("returned") {
		t.Fatalf("err=%v, returned=%v; want InternalError, false", err, root.State().Exists("returned"))
	}
}

func regressBranchFails(as vm.AsyncSteps, _ vm.Args) { as.Error("B") }
func regressOuter(as vm.AsyncSteps, _ vm.Args)       { as.Parallel().Add(regressBranchFails) }

// BUG-S5: the async stack of an error raised in a branch keeps the failing
// branch step, innermost last, after the error leaves the branch.
func TestRegressAsyncStackFromBranch(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	var last string
	root.Add(regressOuter, func(as vm.AsyncSteps, code string) {
		s := as.State().AsyncStack()
		last = runtime.FuncForPC(s[len(s)-1]).Name()
	})
	root.Execute()
	l.RunUntilIdle()
	if !strings.HasSuffix(last, ".regressBranchFails") {
		t.Fatalf("innermost AsyncStack entry = %s, want regressBranchFails", last)
	}
}

// BUG-B1: the arenas of roots dropped together with their (never closed)
// loop go back to the source once both are collected.
func TestRegressDroppedLoopReturnsArenas(t *testing.T) {
	held := func() int64 { s := arena.ReadSourceStats(); return s.Mapped - s.Idle }
	before := held()
	func() {
		l := vm.NewLoop()
		for range 1000 {
			as := l.NewSteps() // dropped without Release
			as.Add(func(vm.AsyncSteps, vm.Args) {})
		}
	}()
	for i := 0; i < 50 && held() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if h := held(); h > before {
		t.Fatalf("%d bytes of arena chunks still held", h-before)
	}
}

// FTN12 2.1 (found by the reference model): a step that added sub-steps
// must not call Error; it is InternalError. An error handler may add steps
// and then change the code.
func TestRegressErrorAfterAdd(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(emptyStep)
		as.Error("Mine")
	})
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) ||
		!strings.Contains(root.State().ErrorInfo(), "Error(Mine) after sub-steps") {
		t.Fatalf("err = %v (info %q), want InternalError naming the misuse", err, root.State().ErrorInfo())
	}
}

// BUG-F3: a dropped loop, closed, with a released root in its pool, is
// collected: nothing the runtime keeps for its roots points back at it.
func TestRegressLoopWithPooledRootIsCollected(t *testing.T) {
	var w weak.Pointer[vm.Loop]
	func() {
		l := vm.NewLoop()
		l.NewSteps().Release() // the released root waits in the loop's pool
		l.Close()
		w = weak.Make(l)
	}()
	for i := 0; i < 50 && w.Value() != nil; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if w.Value() != nil {
		t.Fatal("a closed, dropped loop with a pooled root was not collected")
	}
}

// WithRootPool bounds the roots a loop keeps after Release; the rest are
// dropped, their arenas returned once the garbage collector has found them,
// and new roots still work.
func TestRootPoolSize(t *testing.T) {
	l := vm.NewLoop(vm.WithRootPool(3))
	roots := make([]vm.AsyncSteps, 10)
	for i := range roots {
		roots[i] = l.NewSteps()
		roots[i].Add(emptyStep)
		roots[i].Execute()
	}
	l.RunUntilIdle()
	for _, r := range roots {
		r.Release()
	}
	if s := l.Stats(); s.PooledRoots != 3 || s.LiveRoots != 0 || s.ArenaInUse != 0 {
		t.Fatalf("after releasing 10 roots with a pool of 3: %+v", s)
	}
	// The dropped roots hold their arenas (one chunk each here, as the
	// pooled ones) until they are collected.
	perRoot := l.Stats().ArenaReserved / 10
	pooled := 3 * perRoot
	for _, r := range roots {
		if r.Valid() {
			t.Fatal("a released root is still valid")
		}
	}
	roots = nil
	for i := 0; i < 100 && l.Stats().ArenaReserved > pooled; i++ {
		runtime.GC()
		runtime.Gosched()
		l.RunUntilIdle() // applies the reclaims the cleanups posted
	}
	if s := l.Stats(); perRoot == 0 || s.ArenaReserved != pooled {
		t.Fatalf("the 7 dropped roots' arenas were not returned: %+v, want ArenaReserved %d", s, pooled)
	}
	as := l.NewSteps()
	ran := false
	as.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
	as.Execute()
	l.RunUntilIdle()
	if !ran || l.Stats().PooledRoots != 2 {
		t.Fatalf("ran=%v pooled=%d after reusing a pooled root", ran, l.Stats().PooledRoots)
	}
}

// reclaimDropped collects the roots the program dropped and lets l apply
// their reclaims, then fails t unless nothing of them is left: no live or
// running root, no arena memory in use, no callback record.
func reclaimDropped(t *testing.T, l *vm.Loop) {
	t.Helper()
	for i := 0; i < 100 && l.Stats().LiveRoots > 0; i++ {
		runtime.GC()
		runtime.Gosched()
		l.RunUntilIdle() // applies the reclaims the cleanups posted
	}
	if s := l.Stats(); s.RunningRoots != 0 || s.LiveRoots != 0 || s.ArenaInUse != 0 {
		t.Fatalf("after collection: %+v, want no live or running roots", s)
	}
	if k := vm.CallbacksInUse(l); k != 0 {
		t.Fatalf("after collection: %d callback records in use, want 0", k)
	}
}

// dropWaitingRoots starts n flows that wait for an event nothing can
// deliver, half of them with a cancel handler, and drops their roots.
func dropWaitingRoots(l *vm.Loop, n int) {
	for i := range n {
		as := l.NewSteps()
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if i%2 == 0 {
				as.SetCancel(func(vm.AsyncSteps) {})
			}
			as.WaitExternal()
		})
		as.Execute()
	}
	l.RunUntilIdle()
}

// A running flow the program drops while it waits for an event nothing can
// deliver any more (no handle, no Resumer) is garbage: once collected, it
// no longer counts as live or running, and the loop holds nothing of it
// (half the flows wait with a cancel handler, whose record is the loop's).
func TestDroppedWaitingRootLeavesTheStats(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	const n = 100
	dropWaitingRoots(l, n)
	if s := l.Stats(); s.RunningRoots != n || s.LiveRoots != n {
		t.Fatalf("before collection: %+v, want %d running", s, n)
	}
	reclaimDropped(t, l)
}

// A closed loop still driven by hand accounts for the flows the program
// drops as an open one does: once collected, they leave the Stats and the
// loop holds no record of them.
func TestDroppedRootOfClosedLoopLeavesTheStats(t *testing.T) {
	l := vm.NewLoop()
	const n = 100
	dropWaitingRoots(l, n)
	l.Close()
	reclaimDropped(t, l)
}

// A ManualClock shared by loops does not keep them alive: a dropped loop is
// collected (and with it the arenas of its dropped roots) while the clock
// lives on and still wakes the loops that remain.
func TestManualClockDoesNotKeepLoops(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(0, 0))
	collected := make(chan struct{})
	func() {
		l := vm.NewLoop(vm.WithClock(clk))
		runtime.AddCleanup(l, func(ch chan struct{}) { close(ch) }, collected)
		l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
		l.RunUntilIdle()
	}()
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-collected:
		default:
			if i == 100 {
				t.Fatal("a dropped loop attached to a live ManualClock was never collected")
			}
			runtime.Gosched()
			continue
		}
		break
	}
	// The clock still drives the loops it has.
	l := vm.NewLoop(vm.WithClock(clk))
	fired := false
	l.Deferred(time.Millisecond, func() { fired = true })
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	if !fired {
		t.Fatal("the timer of a loop on the shared clock did not fire")
	}
	runtime.KeepAlive(clk)
}

// A dropped flow that waits in a step its parallel step's error handler
// added, with more added steps queued behind it, leaves the Stats like any
// other: the reclaim does not take the queued steps for branches (it used
// to walk them as threads, and loop forever or read past their nodes).
func TestDroppedRootInParallelHandlerSteps(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	const n = 20
	for range n {
		as := l.NewSteps()
		p := as.Parallel(func(as vm.AsyncSteps, code string) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) {})
				as.WaitExternal()
			})
			as.Add(func(vm.AsyncSteps, vm.Args) {})
			as.Add(func(vm.AsyncSteps, vm.Args) {})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") })
		as.Execute()
	}
	l.RunUntilIdle()
	reclaimDropped(t, l) // it used to hang here
}

// Misuse after Success in an error handler run outside its thread's turn
// (by a timeout, a Resumer's error, an Error through a kept handle) is
// InternalError, as it is in a handler or step run in the thread's turn:
// the Success that ends the thread's base takes effect in its next turn,
// so the misuse still finds the flow running.
func TestRegressMisuseAfterSuccessInTimerRunHandler(t *testing.T) {
	misuses := []struct {
		name string
		fn   vm.ErrorFunc
	}{
		{"Success twice", func(as vm.AsyncSteps, _ string) { as.Success(); as.Success() }},
		{"Error after Success", func(as vm.AsyncSteps, _ string) { as.Success(); as.Error("X") }},
		{"panic after Success", func(as vm.AsyncSteps, _ string) { as.Success(); panic("late") }},
	}
	waits := map[string]vm.ExecFunc{
		"timeout": func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) },
		"resumer": func(as vm.AsyncSteps, _ vm.Args) {
			r := as.Resumer()
			as.WaitExternal()
			as.Tool().Immediate(func() { r.Error("Failed", "") })
		},
	}
	for _, m := range misuses {
		for wname, wait := range waits {
			for _, where := range []string{"root", "branch"} {
				t.Run(m.name+"/"+wname+"/"+where, func(t *testing.T) {
					r := semStart(func(root vm.AsyncSteps, log *semLog) {
						if where == "root" {
							root.Add(wait, m.fn)
							return
						}
						root.Parallel().Add(wait, m.fn)
						root.Add(log.step("after"))
					})
					r.advance(time.Second)
					semFail(t, r.f, vm.InternalError)
					semExpect(t, r.log)
					if s := r.l.Stats(); s.RunningRoots != 0 || s.Timers != 0 {
						t.Fatalf("Stats after the flow: %+v", s)
					}
				})
			}
		}
	}
}
