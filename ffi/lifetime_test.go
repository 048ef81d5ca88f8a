//go:build cgo

package ffi_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// collect runs garbage collection rounds until done reports true, and
// reports whether it did within a bounded number of rounds. Cleanups run
// on goroutines of their own after the cycle that found their objects
// unreachable: yielding gives them their turn. No round waits on a clock.
func collect(done func() bool) bool {
	for range 200 {
		if done() {
			return true
		}
		runtime.GC()
		for range 10 {
			runtime.Gosched()
		}
	}
	return done()
}

// How a dropped loop leaves its flow (see runAndDrop).
const (
	dropReleased = iota // the root was released
	dropRoot            // the root was not: it holds its record
	dropStateVar        // the root holds a C state variable
	dropWaiting         // a flow waits forever, holding a custom object; C tasks are pending
	dropKinds
)

// runAndDrop runs a flow with C steps on a new loop, leaves it as kind
// says, and drops the loop. It returns the loop's id; alive counts the
// loops not collected yet.
func runAndDrop(kind int, alive *atomic.Int64) uint32 {
	l, _ := newLoop()
	root := l.NewSteps()
	p := ffi.Binary(root)
	ctest.AddNop(p)
	switch kind {
	case dropStateVar:
		ctest.Features(p, 1)
	case dropWaiting:
		ctest.Features(p, 2)
		ctest.Emit(p, 5)
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			as.State().Set("object", args.Any(1))
			as.WaitExternal()
		})
	}
	root.Execute()
	l.RunUntilIdle()
	if kind == dropReleased {
		root.Release()
	}
	alive.Add(1)
	runtime.AddCleanup(l, func(n *atomic.Int64) { n.Add(-1) }, alive)
	return ffi.LoopID(l)
}

// A loop that ran C code is collected once the program drops it, released
// root or not, flows waiting or not, and its ffi state goes with it: its
// id leaves the registry, its blocks of records are reused by later
// loops, and what its flows held in C is cleaned up (C state variables of
// roots never released, custom objects its flows held).
func TestDroppedLoopsAreCollected(t *testing.T) {
	const loops = 1000
	ctest.ResetCounters()
	ctest.ResetCleanups()
	_, total0 := ffi.RecordBlocks()
	var alive atomic.Int64
	ids := make([]uint32, 0, loops)
	for i := range loops {
		id := runAndDrop(i%dropKinds, &alive)
		if id == 0 {
			t.Fatal("a loop that ran C code has no id")
		}
		ids = append(ids, id)
		// Collect as the program goes, so that later loops may reuse the
		// records of earlier ones.
		if i%100 == 99 && !collect(func() bool { return alive.Load() == 0 }) {
			t.Fatalf("%d of the first %d dropped loops were not collected", alive.Load(), i+1)
		}
	}
	ctest.ResetTrace()

	const perKind = loops / dropKinds
	var missing string
	if !collect(func() bool {
		live := ffi.LiveLoopIDs()
		registered := 0
		for _, id := range ids {
			if live[id] {
				registered++
			}
		}
		missing = fmt.Sprintf("%d loops alive, %d ids registered, %d of %d state variables and %d of %d objects cleaned up",
			alive.Load(), registered, ctest.Counter(2), perKind, ctest.Cleanups(), perKind)
		return alive.Load() == 0 && registered == 0 && ctest.Counter(2) == perKind && ctest.Cleanups() == perKind
	}) {
		t.Fatalf("after collection: %s", missing)
	}
	lent, total := ffi.RecordBlocks()
	t.Logf("%d loops collected; record blocks: %d lent, %d in all (%d before), loops registered %d",
		loops, lent, total, total0, ffi.LoopsLive())
	// Each loop took a block of records of its own: without reuse, the
	// blocks would number at least one per loop.
	if total-total0 >= loops/4 {
		t.Errorf("record blocks grew from %d to %d over %d dropped loops: the blocks of collected loops are not reused", total0, total, loops)
	}
}
