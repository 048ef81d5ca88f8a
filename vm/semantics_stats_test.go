package vm_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// After thousands of flows ending every way (success, error, timeout,
// cancel; spawned, released, or completed and kept), no arena memory is in
// use and no root runs.
func TestSemStatsAfterManyFlows(t *testing.T) {
	l, clk := semLoop()
	const flows = 4000
	// body makes a flow with some depth, stack memory, a parallel and a
	// loop, then ends it the way kind says.
	body := func(kind int) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) {
			_ = vm.Stack[[8]int64](as)
			as.StackRaw(24, func(unsafe.Pointer) {})
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Add(func(vm.AsyncSteps, vm.Args) {}) })
			p.Repeat(2, func(as vm.AsyncSteps, i int) { _ = vm.Stack[int64](as) })
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				switch kind % 4 {
				case 0: // success
					as.Success(vm.Str("ok"))
				case 1: // error
					as.Error("Fail", "on purpose")
				case 2: // timeout
					as.SetCancel(func(vm.AsyncSteps) {})
					as.SetTimeout(5 * time.Millisecond)
				case 3: // waits until canceled
					_ = as.Resumer()
					as.WaitExternal()
				}
			})
		}
	}
	// Per kind: how the flow ends (0 success, 1 error, 2 timeout, 3 waits
	// until canceled) and what the test does with its root.
	const (
		spawn = iota
		release
		keep
		cancel
		releaseRunning
	)
	plan := []struct{ end, root int }{
		{0, spawn}, {1, spawn}, {2, spawn},
		{0, release}, {1, release}, {2, release},
		{0, keep}, {1, keep}, {2, keep},
		{3, cancel}, {3, releaseRunning},
	}
	type flow struct {
		root vm.AsyncSteps
		f    *vm.Future
		what int
		end  int
	}
	var roots []flow
	var kept []vm.AsyncSteps
	for i := range flows {
		p := plan[i%len(plan)]
		if p.root == spawn {
			l.Spawn(body(p.end), func(as vm.AsyncSteps, code string) {})
			continue
		}
		root := l.NewSteps()
		root.State().Set("i", i)
		root.Add(body(p.end))
		roots = append(roots, flow{root, root.Promise(), p.root, p.end})
	}
	l.RunUntilIdle()
	mid := l.Stats()
	if mid.ArenaInUse == 0 || mid.RunningRoots == 0 {
		t.Fatalf("nothing in use while flows wait: %+v", mid)
	}
	clk.Advance(5 * time.Millisecond)
	l.RunUntilIdle()
	for _, r := range roots {
		switch r.what {
		case cancel:
			r.root.Cancel()
		case releaseRunning:
			r.root.Release()
		}
		_, err := semResult(t, r.f)
		if want := [...]error{nil, &vm.Error{Code: "Fail"}, vm.ErrTimeout, vm.ErrCanceled}[r.end]; !errors.Is(err, want) {
			t.Fatalf("flow ending %d: %v", r.end, err)
		}
		switch r.what {
		case release:
			r.root.Release()
		case keep:
			kept = append(kept, r.root)
		}
	}
	l.RunUntilIdle()
	st := l.Stats()
	if st.ArenaInUse != 0 || st.RunningRoots != 0 {
		t.Fatalf("after %d flows: %+v", flows, st)
	}
	if st.Timers != 0 || st.Queued != 0 {
		t.Fatalf("work left after every flow ended: %+v", st)
	}
	if n := vm.CallbacksInUse(l); n != 0 {
		t.Fatalf("%d callback entries in use after every flow ended", n)
	}
	// Kept and canceled roots are still live; the others went back to the pool.
	var wantLive int64
	for _, r := range roots {
		if r.what == keep || r.what == cancel {
			wantLive++
		}
	}
	if st.LiveRoots != wantLive {
		t.Fatalf("LiveRoots = %d, want %d", st.LiveRoots, wantLive)
	}
	// The kept roots can run again and return to zero.
	for _, root := range kept[:10] {
		root.Add(body(0))
		f := root.Promise()
		l.RunUntilIdle()
		semOK(t, f)
	}
	if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 {
		t.Fatalf("after rerunning kept roots: %+v", st)
	}
}

// The last step of a flow, completed from outside the loop's calls, ends
// the run in line: here a sub-step whose Success completes its parent too,
// the parent with a timeout and a cancel handler of its own, in a spawned
// root with no State. Neither cancel handler runs, both timers stop, the
// sub-step's Resumer turns stale, the root goes back to the pool, and the
// next flow that takes it runs.
func TestSemOutsideSuccessEndsNestedSpawnedFlow(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	var h vm.AsyncSteps
	var rs vm.Resumer
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		as.SetCancel(func(vm.AsyncSteps) { log.add("outer cancel") })
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			h, rs = as, as.Resumer()
			as.SetTimeout(time.Second)
			as.SetCancel(func(vm.AsyncSteps) { log.add("inner cancel") })
		}, func(_ vm.AsyncSteps, code string) { log.add("inner %s", code) })
	}, func(_ vm.AsyncSteps, code string) { log.add("outer %s", code) })
	l.RunUntilIdle()
	if s := l.Stats(); s.RunningRoots != 1 || s.Timers != 2 {
		t.Fatalf("waiting: %+v", s)
	}
	h.Success(vm.Int(1))
	if s := l.Stats(); s.RunningRoots != 0 || s.LiveRoots != 0 || s.PooledRoots != 1 {
		t.Fatalf("after the Success: %+v", s)
	}
	if rs.Success() {
		t.Fatal("the ended step's Resumer was accepted")
	}
	clk.Advance(2 * time.Second)
	l.RunUntilIdle()
	semExpect(t, &log)
	semClean(t, l)
	root := l.NewSteps()
	root.Add(log.step("next flow"))
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "next flow")
	root.Release()
	semClean(t, l)
}
