//go:build cgo

package ffi

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// What C code may still report once a loop has been collected: its id
// (the loop a C call runs for, or the loop of a scheduled callback's
// handle) and its records. Each finds nothing: the
// calls do nothing, or fail the calling flow of a live loop as misuse, and
// never touch another loop.
func TestDeadLoopID(t *testing.T) {
	newLoop := func() *vm.Loop { return vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0)))) }
	var (
		gone      atomic.Bool
		deadID    = (&loopState{}).id   // the id the loop had
		deadRec   = (&entry{}).bsi()    // its root's record
		deadValid func(*loopState) bool // sched_is_valid of its pending task's handle on another loop
		deadClear func(*loopState)      // sched_cancel of that handle on another loop
	)
	func() {
		l := newLoop()
		ls := loopOf(l)
		deadID, deadRec = ls.id, ls.root(l.NewSteps()).record()
		h := ls.schedule(true, time.Hour, nil, 0) // never runs: the loop is dropped first
		deadValid = func(o *loopState) bool { return o.taskValid(&h) }
		deadClear = func(o *loopState) { o.cancelTask(&h) }
		runtime.AddCleanup(l, func(b *atomic.Bool) { b.Store(true) }, &gone)
	}()
	for range 200 {
		if gone.Load() && loopByID(deadID) == nil && !LiveLoopIDs()[uint32(deadID)] {
			break
		}
		runtime.GC()
		for range 10 {
			runtime.Gosched()
		}
	}
	if !gone.Load() || LiveLoopIDs()[uint32(deadID)] {
		t.Fatalf("the dropped loop was not collected (%v) or its id is still registered", gone.Load())
	}

	// A live loop, with a task at the same index and generation as the
	// dead loop's.
	l := newLoop()
	ls := loopOf(l)
	if ls.id == deadID {
		t.Fatal("a new loop got the id of a collected one")
	}
	h := ls.schedule(true, time.Hour, nil, 0)
	if deadValid(ls) {
		t.Error("the handle of a collected loop's task is valid on another loop")
	}
	deadClear(ls)
	if !ls.taskValid(&h) {
		t.Error("canceling the handle of a collected loop's task canceled another loop's task")
	}
	ls.cancelTask(&h)

	// Calls from C that report the dead loop are ignored: there is no C
	// call of a live loop to fail, and the records are not the dead loop's.
	root := l.NewSteps()
	rec := ls.root(root).record()
	stepvmAdd(rec, 0, nil, nil, deadID)     // a misuse, for no loop
	stepvmAdd(deadRec, 0, nil, nil, deadID) // a stale record, for no loop
	stepvmSyncLock(nil, nil, deadID)
	stepvmFree(deadRec, deadID)
	if ls.stash != nil {
		t.Fatalf("a call for a collected loop touched a live loop: %v", ls.stash)
	}
	if stepvmIsValid(deadRec, deadID) != 0 || Wrap(unsafe.Pointer(deadRec)).Valid() {
		t.Error("the record of a collected loop is valid")
	}

	// A C step of the live loop that uses the dead loop's record fails its
	// own flow, as any stale record does.
	addThroughStale(t, l, ls, unsafe.Pointer(deadRec), "a collected loop's record")
	root.Release()
}
