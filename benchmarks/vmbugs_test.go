package benchmarks

import (
	"runtime"
	"testing"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// Regression tests for package vm bugs the benchmarks ran into.

func heldArena() int64 { s := arena.ReadSourceStats(); return s.Mapped - s.Idle }

// TestBugDroppedLoopLeaksArenas: the arenas of roots dropped with a Loop that
// is itself dropped without Close go back to the chunk source (BUG-B1).
func TestBugDroppedLoopLeaksArenas(t *testing.T) {
	before := heldArena()
	func() {
		l := vm.NewLoop()
		for range 1000 {
			as := l.NewSteps() // dropped without Release
			as.Add(func(vm.AsyncSteps, vm.Args) {})
		}
		if heldArena() <= before {
			t.Fatal("the roots hold no arena memory: nothing to check")
		}
	}() // the loop is dropped without Close
	// Cleanups run on their own goroutine after a GC: give them a bounded
	// number of chances, without a clock.
	for i := 0; i < 50 && heldArena() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if h := heldArena(); h > before {
		t.Fatalf("%d bytes of arena chunks still held after the loop and its roots became garbage", h-before)
	}
}
