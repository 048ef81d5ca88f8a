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

// The slot tables a loop keeps to lend to runs with many steps at once
// (TestZeroAllocManySlots) are bounded: at most 1,024 pooled roots' worth
// of slots (64 each), none of them a table of more than 1,024 slots, and
// none at all for a loop that pools no roots. The roots in the pool keep
// no more than their own 64.
func TestSpareSlotTablesBounded(t *testing.T) {
	const budget = 1024 * 64
	run := func(l *vm.Loop, flows, steps int) {
		model := emptyModel(l, steps)
		runClones(l, model, make([]vm.AsyncSteps, flows))
		model.Release()
	}

	l := vm.NewLoop()
	defer l.Close()
	run(l, 2000, 100) // each lent a table of 128: twice the budget in all
	kept := vm.SpareSlots(l)
	if kept == 0 || kept > budget {
		t.Fatalf("the loop keeps %d slots of tables, want some and at most %d", kept, budget)
	}
	if slots, _ := vm.PooledTables(l); slots > 64 {
		t.Fatalf("a pooled root keeps room for %d slots, want at most 64", slots)
	}
	l2 := vm.NewLoop()
	defer l2.Close()
	run(l2, 1, 5000)
	if n := vm.SpareSlots(l2); n != 0 {
		t.Fatalf("the loop keeps a table of %d slots from a run of 5,000 steps, want none", n)
	}
	run(l2, 1, 500) // the model's table and its clone's
	if n := vm.SpareSlots(l2); n == 0 || n > 2*1024 {
		t.Fatalf("the loop keeps %d slots from a run of 500 steps, want two tables of at most 1,024", n)
	}
	l3 := vm.NewLoop(vm.WithRootPool(0))
	defer l3.Close()
	run(l3, 10, 100)
	if n := vm.SpareSlots(l3); n != 0 {
		t.Fatalf("a loop that pools no roots keeps %d slots of tables, want none", n)
	}
	for _, l := range []*vm.Loop{l, l2, l3} {
		if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 {
			t.Fatalf("stats after the runs: %+v", s)
		}
	}
}
