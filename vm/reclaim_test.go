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
	// roots dead; give them rounds (not time) to catch up, until every
	// dropped root has been reclaimed or 20 rounds in a row reclaim none (a
	// stale stack slot may keep a few alive for a while). Until then the
	// queued cleanups themselves hold heap memory.
	settle := func() {
		last, still := l.Stats().LiveRoots, 0
		for range 1000 {
			runtime.GC()
			runtime.Gosched()
			l.RunUntilIdle() // applies the reclaims the cleanups posted
			live := l.Stats().LiveRoots
			if live == 0 {
				return
			}
			if still++; live < last {
				last, still = live, 0
			}
			if still == 20 {
				return
			}
		}
	}
	var ms runtime.MemStats
	// held is the arena memory roots hold now (the source never unmaps, so
	// its mapped total keeps the peak and says nothing about leaks).
	measure := func() (held int64, heap uint64) {
		settle()
		// The last reclaims dropped the inbox's overflow buffer after the
		// last collection: collect once more, so the heap is what is live.
		runtime.GC()
		runtime.ReadMemStats(&ms)
		s := arena.ReadSourceStats()
		return s.Mapped - s.Idle, ms.HeapAlloc
	}

	run(total / 10) // warm-up
	held0, heap0 := measure()
	run(total)
	held1, heap1 := measure()

	t.Logf("%d unreleased roots: arena memory held %d -> %d bytes, live heap %d -> %d bytes, live roots %d",
		total, held0, held1, heap0, heap1, l.Stats().LiveRoots)
	// Flat means independent of the number of roots: keeping them would
	// cost hundreds of bytes each; allow 4 per root for GC timing (measured:
	// under 1 per root).
	slack := max(int64(total)*4, 4<<20)
	if held1-held0 > slack {
		t.Errorf("arena memory held grew by %d bytes over %d unreleased roots", held1-held0, total)
	}
	if int64(heap1)-int64(heap0) > slack {
		t.Errorf("live heap grew by %d bytes over %d unreleased roots", int64(heap1)-int64(heap0), total)
	}
	if s := l.Stats(); s.LiveRoots > int64(total/100) {
		t.Errorf("LiveRoots = %d after collection, want the dropped roots reclaimed", s.LiveRoots)
	}
}
