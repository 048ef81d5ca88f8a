//go:build cgo

package ffi

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// waitingFlow makes a root with a C state variable (cleanup counted) whose
// C step waits for an external event, with a cancel handler if cancel is
// set, and then next if not nil; it runs the flow until it waits and
// returns the waiting step's record.
func waitingFlow(l *vm.Loop, cancel bool, next vm.ExecFunc) (vm.AsyncSteps, unsafe.Pointer) {
	root := l.NewSteps()
	rec := Binary(root)
	ctest.Features(rec, 5) // counter 4 allocations, counter 5 cleanups
	ctest.AddWait(rec, cancel)
	if next != nil {
		root.Add(next)
	}
	root.Execute()
	l.RunUntilIdle()
	return root, ctest.Waiting()
}

// A long-lived loop does not keep the flows the program drops while one
// of their C steps waits for an external event: the record of the waiting
// step does not hold the root once the C call has returned. The roots are
// collected with their arena memory, the C state cleanups run once, and
// ffi forgets them.
func TestDroppedWaitingFlowsAreCollected(t *testing.T) {
	const n = 10_000
	l := testLoop()
	ls := loopOf(l)
	warm, _ := waitingFlow(l, true, nil)
	l.RunUntilIdle()
	warm.Release()
	base := l.Stats()
	ctest.ResetCounters()
	cancels := ctest.WaitCancels()
	for i := range n {
		root, rec := waitingFlow(l, i%2 == 0, nil)
		valid := ctest.IsValid(rec)
		runtime.KeepAlive(root) // until checked: then the program drops it
		if !valid {
			t.Fatalf("flow %d: the waiting step's record %p is not valid", i, rec)
		}
	}
	l.RunUntilIdle()
	expectCollected(t, l, base, n)
	if got := ctest.WaitCancels() - cancels; got != 0 {
		t.Errorf("%d cancel handlers ran for collected flows, want 0", got)
	}
	// The records of the waiting steps went back to the loop with their
	// roots: new flows reuse them.
	blocks := len(ls.blocks)
	for range 2 * quarantine {
		root, rec := waitingFlow(l, true, nil)
		ctest.Complete(rec, "done")
		l.RunUntilIdle()
		root.Release()
	}
	if len(ls.blocks) != blocks {
		t.Errorf("record blocks grew from %d to %d: the records of collected waiting steps were not reused", blocks, len(ls.blocks))
	}
}

// completeFrom completes the waiting step of rec with "late" from C (on
// the loop's goroutine, no C call running), from Go (through Wrap), or
// from a thread the loop does not run on.
var completeFrom = map[string]func(rec unsafe.Pointer){
	"C": func(rec unsafe.Pointer) { ctest.Complete(rec, "late") },
	"Go": func(rec unsafe.Pointer) {
		if as := Wrap(rec); as.Valid() {
			as.Success(vm.Str("late"))
		}
	},
	"thread": func(rec unsafe.Pointer) {
		done := make(chan struct{})
		go func() { ctest.Complete(rec, "late"); close(done) }()
		<-done
	},
}

// A C step that waits is completed later through its record, whose root
// the record no longer holds, as long as the program keeps the root.
func TestWaitingStepCompletedLater(t *testing.T) {
	for name, complete := range completeFrom {
		for _, cancel := range []bool{false, true} {
			l := testLoop()
			ls := loopOf(l)
			var got string
			root, rec := waitingFlow(l, cancel, func(_ vm.AsyncSteps, args vm.Args) { got = args.String(0) })
			for range 3 { // the program keeps the root, the record must not be needed
				runtime.GC()
				l.RunUntilIdle()
			}
			if !ctest.IsValid(rec) {
				t.Fatalf("%s, cancel %v: the waiting step's record is not valid", name, cancel)
			}
			complete(rec)
			l.RunUntilIdle()
			if got != "late" || root.State() == nil {
				t.Fatalf("%s, cancel %v: the next step got %q, want late", name, cancel, got)
			}
			if ctest.IsValid(rec) {
				t.Errorf("%s: the record is valid after its step ended", name)
			}
			complete(rec) // a second completion does nothing
			l.RunUntilIdle()
			if ls.stash != nil {
				t.Fatalf("%s: %v", name, ls.stash)
			}
			root.Release()
			if ls.trackedRoots() != 0 {
				t.Errorf("%s: ffi tracks %d roots after release", name, ls.trackedRoots())
			}
		}
	}
}

// Completing a waiting C step through its record after the program
// dropped its root and the root was collected does nothing: the record is
// stale, as that of any ended step.
func TestWaitingStepOfCollectedRoot(t *testing.T) {
	for name, complete := range completeFrom {
		l := testLoop()
		ls := loopOf(l)
		base := l.Stats().LiveRoots
		ctest.ResetCounters()
		_, rec := waitingFlow(l, true, nil)
		l.RunUntilIdle()
		if !settleRoots(l, func() bool {
			return l.Stats().LiveRoots == base && ls.trackedRoots() == 0 && ctest.Counter(5) == 1
		}) {
			t.Fatalf("%s: the dropped waiting root was not collected: live roots %d (baseline %d), tracked %d, cleanups %d",
				name, l.Stats().LiveRoots, base, ls.trackedRoots(), ctest.Counter(5))
		}
		if ctest.IsValid(rec) || Wrap(rec).Valid() {
			t.Fatalf("%s: the record of a collected waiting step is valid", name)
		}
		complete(rec)
		l.RunUntilIdle()
		if ls.stash != nil {
			t.Fatalf("%s: a call with no C step running left %v", name, ls.stash)
		}
		// A C step of a live flow that uses it fails its own flow.
		addThroughStale(t, l, ls, rec, "a collected waiting step's record")
	}
}

// A flow released while its C step waits ends the step, and its record,
// once: the record is stale and the loop's records are reused.
func TestWaitingStepReleased(t *testing.T) {
	l := testLoop()
	ls := loopOf(l)
	cancels := ctest.WaitCancels()
	root, rec := waitingFlow(l, true, nil)
	l.RunUntilIdle()
	root.Release()
	l.RunUntilIdle()
	if ctest.IsValid(rec) {
		t.Fatal("the waiting step's record is valid after its root was released")
	}
	if got := ctest.WaitCancels() - cancels; got != 1 {
		t.Errorf("cancel handler ran %d times, want 1", got)
	}
	if ls.trackedRoots() != 0 {
		t.Errorf("ffi tracks %d roots after release", ls.trackedRoots())
	}
	if n := ls.free.n; n < 1 {
		t.Errorf("%d records released, want the waiting step's", n)
	}
}
