//go:build cgo

package ffi

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// settleRoots runs garbage collection rounds and the loop until done
// reports true, and reports whether it did within a bounded number of
// rounds. The cleanups of collected roots run on a goroutine of the
// garbage collector and hand their work to the loop: RunUntilIdle applies
// it. No round waits on a clock.
func settleRoots(l *vm.Loop, done func() bool) bool {
	for range 200 {
		l.RunUntilIdle()
		if done() {
			return true
		}
		runtime.GC()
		for range 10 {
			runtime.Gosched()
		}
	}
	l.RunUntilIdle()
	return done()
}

func testLoop() *vm.Loop { return vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0)))) }

// noRec is a nil *C.FutoInAsyncSteps: its type, which a test file cannot
// name, for cRec.
var noRec = (&entry{}).bsi()

// cRec returns p as a *C.FutoInAsyncSteps.
func cRec[T any](_ *T, p unsafe.Pointer) *T { return (*T)(p) }

// pinningFlow makes a root that went through every path of ffi that
// attaches state to a root: its record (Binary), a C state variable with
// a C cleanup, a parallel accessor bound to the root (made while no C
// step runs) with a C step, and C steps run to completion. It returns the
// records of the root and of the accessor.
func pinningFlow(l *vm.Loop) (rec, acc unsafe.Pointer) {
	root := l.NewSteps()
	rec = Binary(root)
	ctest.Features(rec, 5) // stateVariable: counter 4 allocations, counter 5 cleanups
	ctest.AddNop(rec)
	acc = unsafe.Pointer(stepvmParallel(cRec(noRec, rec), 0, nil, 0))
	ctest.AddNop(acc)
	root.Execute()
	return rec, acc
}

// A long-lived loop does not keep the roots the program drops without
// Release, whatever ffi attached to them: the roots are collected with
// their arena memory, the C cleanup of each state variable runs exactly
// once, and ffi forgets them.
func TestDroppedRootsAreCollectedOnALiveLoop(t *testing.T) {
	const n = 10_000
	l := testLoop()
	ls := loopOf(l)
	// Warm up the loop's pool, records and arenas, then measure.
	warm := l.NewSteps()
	ctest.AddNop(Binary(warm))
	warm.Execute()
	l.RunUntilIdle()
	warm.Release()
	base := l.Stats()
	ctest.ResetCounters()
	for i := range n {
		if rec, acc := pinningFlow(l); rec == nil || acc == nil {
			t.Fatalf("root %d: record %p, accessor record %p", i, rec, acc)
		}
		if i%100 == 99 {
			l.RunUntilIdle()
		}
	}
	l.RunUntilIdle()
	if got := ctest.Counter(4); got != n {
		t.Fatalf("%d state variables allocated, want %d", got, n)
	}
	var s vm.LoopStats
	if !settleRoots(l, func() bool {
		s = l.Stats()
		return s.LiveRoots == base.LiveRoots && ctest.Counter(5) == n && ls.trackedRoots() == 0
	}) {
		t.Fatalf("after collection: live roots %d (baseline %d), state cleanups %d of %d, roots ffi tracks %d",
			s.LiveRoots, base.LiveRoots, ctest.Counter(5), n, ls.trackedRoots())
	}
	if s.ArenaInUse != base.ArenaInUse {
		t.Errorf("arena bytes in use %d after collection, baseline %d", s.ArenaInUse, base.ArenaInUse)
	}
	// Exactly once: more rounds clean up nothing more.
	settleRoots(l, func() bool { return false })
	if got := ctest.Counter(5); got != n {
		t.Errorf("state cleanups = %d after more collection rounds, want %d", got, n)
	}
	// The records of the collected roots were given back: a new flow
	// reuses them rather than growing the loop's blocks.
	blocks := len(ls.blocks)
	for range 2 * quarantine {
		root := l.NewSteps()
		ctest.AddNop(Binary(root))
		root.Execute()
		l.RunUntilIdle()
		root.Release()
	}
	if len(ls.blocks) != blocks {
		t.Errorf("record blocks grew from %d to %d: the records of collected roots were not reused", blocks, len(ls.blocks))
	}
}

// C code that kept the record of a root the program dropped, or of an
// accessor bound to it, reaches nothing once the root has been collected:
// the record is invalid, calls through it are ignored when no C step runs
// and fail the calling flow as misuse when one does.
func TestRecordOfCollectedRoot(t *testing.T) {
	l := testLoop()
	ls := loopOf(l)
	base := l.Stats().LiveRoots
	ctest.ResetCounters()
	rec, acc := pinningFlow(l)
	l.RunUntilIdle()
	if !settleRoots(l, func() bool {
		return l.Stats().LiveRoots == base && ls.trackedRoots() == 0 && ctest.Counter(5) == 1
	}) {
		t.Fatalf("the dropped root was not collected: live roots %d (baseline %d), tracked %d, cleanups %d",
			l.Stats().LiveRoots, base, ls.trackedRoots(), ctest.Counter(5))
	}
	for _, p := range []unsafe.Pointer{rec, acc} {
		bsi := cRec(noRec, p)
		if ctest.IsValid(p) || Wrap(p).Valid() {
			t.Fatal("the record of a collected root is valid")
		}
		// No C call runs (the loop id C reports is 0): ignored.
		stepvmAdd(bsi, 0, nil, nil, 0)
		stepvmFree(bsi, 0)
		if stepvmStateVariable(bsi, 0, nil, nil, nil, 0) != 0 || stepvmRootId(bsi, 0) != 0 {
			t.Fatal("a call through the record of a collected root returned something")
		}
		ctest.AddNop(p)
		if ls.stash != nil {
			t.Fatalf("a call with no C step running left %v", ls.stash)
		}
	}
	if got := ctest.Counter(5); got != 1 {
		t.Errorf("state cleanups = %d, want 1", got)
	}

	// A C step of a live flow that uses them fails its own flow.
	for _, p := range []unsafe.Pointer{rec, acc} {
		addThroughStale(t, l, ls, p, "a collected root's record")
	}
}

// addThroughStale runs a flow whose step calls add through the stale
// record p, as a C step would, and checks that the flow fails with
// InternalError for it.
func addThroughStale(t *testing.T, l *vm.Loop, ls *loopState, p unsafe.Pointer, what string) {
	t.Helper()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		s := ls.enter(as)
		stepvmAdd(cRec(noRec, p), 0, nil, nil, ls.id)
		ls.settle(s)
	})
	f := root.Promise()
	l.RunUntilIdle()
	_, err := f.Wait(t.Context())
	if e, ok := err.(*vm.Error); !ok || e.Code != vm.InternalError || e.Info != "add"+badStale {
		t.Errorf("flow using %s: %v, want InternalError: add%s", what, err, badStale)
	}
	root.Release()
}

// A released root gives back what ffi held for it exactly once, and the
// loop reuses the root object with the same rootInfo: the old record stays
// stale, the new one works.
func TestReleasedRootReused(t *testing.T) {
	l := testLoop()
	ls := loopOf(l)
	ctest.ResetCounters()
	var infos [2]*rootInfo
	var recs [2]unsafe.Pointer
	for i := range 2 {
		root := l.NewSteps()
		recs[i] = Binary(root)
		infos[i] = infoOf(root)
		ctest.Features(recs[i], 5)
		root.Execute()
		l.RunUntilIdle()
		if ls.trackedRoots() != 1 || !ctest.IsValid(recs[i]) {
			t.Fatalf("use %d: tracked roots %d, record valid %v; want 1, true", i, ls.trackedRoots(), ctest.IsValid(recs[i]))
		}
		root.Release()
		rootReleased(root) // a second call changes nothing
		if ls.trackedRoots() != 0 || ctest.Counter(5) != i+1 || ctest.IsValid(recs[i]) {
			t.Fatalf("use %d released: tracked roots %d, state cleanups %d, record valid %v; want 0, %d, false",
				i, ls.trackedRoots(), ctest.Counter(5), ctest.IsValid(recs[i]), i+1)
		}
	}
	if infos[0] == nil || infos[0] != infos[1] {
		t.Errorf("the reused root got rootInfo %p, then %p: want the same", infos[0], infos[1])
	}
	if ctest.Counter(4) != 2 {
		t.Errorf("state variables allocated: %d, want 2", ctest.Counter(4))
	}
}

// On a closed loop, which runs no callbacks, the C state variables of a
// root the program dropped are destroyed all the same, once, on the
// garbage collector's cleanup goroutine.
func TestDroppedRootOfClosedLoop(t *testing.T) {
	l := testLoop()
	ctest.ResetCounters()
	pinningFlow(l)
	l.RunUntilIdle()
	l.Close()
	if !settleRoots(l, func() bool { return ctest.Counter(5) == 1 }) {
		t.Fatalf("state cleanups = %d, want 1", ctest.Counter(5))
	}
	settleRoots(l, func() bool { return false })
	if got := ctest.Counter(5); got != 1 {
		t.Errorf("state cleanups = %d after more rounds, want 1", got)
	}
	runtime.KeepAlive(l)
}
