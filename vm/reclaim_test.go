package vm_test

import (
	"runtime"
	"testing"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// A root that is never released is reclaimed by the garbage collector
// together with its off-heap arena: over a million such roots, mapped arena
// memory and the Go heap stay flat after warm-up.
func TestUnreleasedRootsAreReclaimed(t *testing.T) {
	total := 1_000_000
	if raceEnabled || testing.Short() {
		total = 100_000
	}
	l := vm.NewLoop()
	step := func(as vm.AsyncSteps, _ vm.Args) { as.Add(emptyStep) }
	run := func(n int) {
		for i := range n {
			as := l.NewSteps()
			as.Add(step)
			as.Execute()
			if i%1000 == 0 {
				l.RunUntilIdle()
			}
		}
		l.RunUntilIdle()
	}
	// Cleanups run on their own goroutine after the cycle that found the
	// roots dead; give them rounds (not time) to catch up.
	settle := func() {
		prev := int64(-1)
		for range 50 {
			runtime.GC()
			runtime.Gosched()
			l.RunUntilIdle() // applies the reclaims the cleanups posted
			live := l.Stats().LiveRoots
			if live == prev {
				return
			}
			prev = live
		}
	}
	var ms runtime.MemStats
	measure := func() (mapped int64, heap uint64) {
		settle()
		runtime.ReadMemStats(&ms)
		return arena.ReadSourceStats().Mapped, ms.HeapInuse
	}

	run(total / 10) // warm-up
	mapped0, heap0 := measure()
	run(total)
	mapped1, heap1 := measure()

	t.Logf("%d unreleased roots: arena mapped %d -> %d bytes, heap in use %d -> %d bytes",
		total, mapped0, mapped1, heap0, heap1)
	// Flat means independent of the number of roots: allow slack for GC
	// timing (cleanups run after the cycle that found the root dead), far
	// below what keeping the roots would take (hundreds of bytes each).
	const slack = 8 << 20
	if mapped1-mapped0 > slack {
		t.Errorf("arena mapped memory grew by %d bytes over %d unreleased roots", mapped1-mapped0, total)
	}
	if heap1 > heap0+slack {
		t.Errorf("heap in use grew by %d bytes over %d unreleased roots", heap1-heap0, total)
	}
	if s := l.Stats(); s.LiveRoots > int64(total/10) {
		t.Errorf("LiveRoots = %d after collection, want the dropped roots reclaimed", s.LiveRoots)
	}
}
