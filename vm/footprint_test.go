package vm_test

import (
	"context"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// TestWaitingLoopFootprint pins the arena cost of the flow shape the
// ParallelWaitLoop benchmark holds by the thousand: a loop whose body waits
// for an external event with one more step queued. It takes five nodes:
// the root frame in the arena's fixed block and four narrow 32-byte ones
// (loop, iteration, waiting step, queued step), which must fit the rest of
// the arena's first 256-byte chunk.
func TestWaitingLoopFootprint(t *testing.T) {
	const flows = 1000
	l := vm.NewLoop()
	defer l.Close()
	var waiting []vm.AsyncSteps
	body := func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal()
			waiting = append(waiting, as)
		})
		as.Add(func(vm.AsyncSteps, vm.Args) {})
	}
	roots := make([]vm.AsyncSteps, flows)
	for i := range roots {
		roots[i] = l.NewSteps()
		roots[i].Loop(body)
		roots[i].Execute()
	}
	l.RunUntilIdle()
	if len(waiting) != flows {
		t.Fatalf("%d flows wait, want %d", len(waiting), flows)
	}
	s := l.Stats()
	if got := s.ArenaInUse / flows; got != 4*32 {
		t.Errorf("arena bytes in use per waiting flow = %d, want %d (four 32-byte nodes)", got, 4*32)
	}
	if got := s.ArenaReserved / flows; got > 256 {
		t.Errorf("arena bytes reserved per waiting flow = %d, want at most 256 (one chunk)", got)
	}
	for _, as := range roots {
		as.Release()
	}
	if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 {
		t.Fatalf("after Release: ArenaInUse %d, LiveRoots %d, want 0", s.ArenaInUse, s.LiveRoots)
	}
}

// A flow that keeps more steps waiting than root.used covers and runs a
// loop alongside reuses the slots its iterations free above them: its
// slot table stays the size of what is in use at once, however long the
// loop runs.
func TestHighSlotsReused(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	const waiting, rounds = 80, 1000
	root := l.NewSteps()
	var held []vm.AsyncSteps
	iterations := 0
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		p := as.Parallel()
		for range waiting {
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				held = append(held, as)
			})
		}
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(rounds, func(as vm.AsyncSteps, _ int) {
				as.Add(func(vm.AsyncSteps, vm.Args) { iterations++ }, func(vm.AsyncSteps, string) {})
			})
		})
	})
	f := root.Promise()
	l.RunUntilIdle()
	if iterations != rounds || len(held) != waiting {
		t.Fatalf("%d iterations and %d steps waiting, want %d and %d", iterations, len(held), rounds, waiting)
	}
	// Each iteration's step and handler took two slots above the low ones
	// and gave them back; the table holds the waiting steps, the branches'
	// and the loop's, and no more than a few of those.
	if n := vm.SlotsInUse(root); n > waiting+10 {
		t.Errorf("slot table of %d entries after %d iterations, want at most %d", n, rounds, waiting+10)
	}
	for _, h := range held {
		h.Success()
	}
	l.RunUntilIdle()
	if _, err := f.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
