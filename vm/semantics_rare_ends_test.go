package vm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// Rare states at the end of a run and of a pass, which the rest of the
// suite leaves unvisited.

// A flow with no Future whose last step is wide (one that carries native
// words) ends in the dispatch's fast path, which frees that node by its
// own size: the arena is back to zero, and the pooled root serves the next
// flow.
func TestSemEndRunWideLastStep(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var got vm.NativeWords
	root.Add(func(vm.AsyncSteps, vm.Args) {})
	vm.AddNative(root, func(as vm.AsyncSteps, _ vm.Args) { got = vm.TakeNativeWords(as) }, nil, vm.NativeWords{A: 1, B: 2})
	root.Execute()
	l.RunUntilIdle()
	if got != (vm.NativeWords{A: 1, B: 2}) {
		t.Fatalf("the last step took %+v", got)
	}
	semClean(t, l)
	root.Release()
	semNextRootWorks(t, l)
	semClean(t, l)
}

// A run that grew its arena far beyond what a reset keeps is trimmed at
// its end whichever way it ends: in the dispatch's fast path (no Future)
// as by finish (a Future to resolve).
func TestSemEndRunTrimsGrownArena(t *testing.T) {
	for _, promise := range []bool{false, true} {
		l, _ := semLoop()
		root := l.NewSteps()
		for range 5000 {
			root.Add(func(vm.AsyncSteps, vm.Args) {})
		}
		if promise {
			root.Promise()
		} else {
			root.Execute()
		}
		l.RunUntilIdle()
		semClean(t, l)
		if s := l.Stats(); s.ArenaReserved > arena.KeepBytes {
			t.Fatalf("promise %v: the ended run keeps %d bytes of chunks", promise, s.ArenaReserved)
		}
		root.Release()
		semNextRootWorks(t, l)
	}
}

// Run from a step or an Immediate of the Run that drives the loop is the
// nested pass the loop refuses: the step's flow fails with InternalError,
// the Immediate's panic goes to the panic handler, and the driving Run
// keeps the loop (a Run from another goroutine is still refused) until it
// returns.
func TestSemRunInsideRun(t *testing.T) {
	var handled []any
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(p any) { handled = append(handled, p) }))
	root := l.NewSteps()
	var inner error = errors.New("not returned")
	root.Add(func(vm.AsyncSteps, vm.Args) { inner = l.Run(context.Background()) })
	f := root.Promise()
	immDone := make(chan struct{})
	l.Immediate(func() {
		defer close(immDone)
		l.Run(context.Background())
	})
	stop := semRunAsync(t, l)
	semAwait(t, f.Done(), "the flow")
	semAwait(t, immDone, "the Immediate")
	if err := l.Run(context.Background()); !errors.Is(err, vm.ErrLoopRunning) {
		t.Fatalf("Run from another goroutine while the loop runs: %v", err)
	}
	stop()
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, "inside its own callbacks")
	if inner == nil || len(handled) != 1 {
		t.Fatalf("the inner Run returned %v; panic handler got %v", inner, handled)
	}
	semClean(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	l.Post(cancel)
	if err := l.Run(ctx); err != context.Canceled {
		t.Fatalf("Run afterwards: %v", err)
	}
}

// The waiting last step of a flow with no Future, completed from outside
// the loop's calls, ends the run in line: what it waited with (timeout,
// cancel handler, Resumer) goes with it unrun, a spawned root goes back to
// the pool, and a second Success through the kept handle, the Resumer and
// the timeout's due time find nothing to do.
func TestSemOutsideEndOfWaitingLastStep(t *testing.T) {
	for _, spawn := range []bool{false, true} {
		l, clk := semLoop()
		var h vm.AsyncSteps
		var res vm.Resumer
		body := func(as vm.AsyncSteps, _ vm.Args) {
			h = as
			as.SetTimeout(time.Second)
			as.SetCancel(func(vm.AsyncSteps) { t.Errorf("spawn %v: the cancel handler ran", spawn) })
			res = as.Resumer()
		}
		root := l.NewSteps()
		if spawn {
			root.Release()
			l.Spawn(body)
		} else {
			root.Add(body)
			root.Execute()
		}
		l.RunUntilIdle()
		h.Success(vm.Int(1))
		semClean(t, l)
		if s := l.Stats(); spawn && (s.LiveRoots != 0 || s.PooledRoots != 1) {
			t.Fatalf("the spawned root was not released: %+v", s)
		}
		if res.Success(vm.Int(2)) {
			t.Fatalf("spawn %v: the Resumer was claimed after its step ended", spawn)
		}
		h.Success(vm.Int(3))
		clk.Advance(2 * time.Second)
		l.RunUntilIdle()
		semClean(t, l)
		if vm.ResumersInUse(l) != 0 {
			t.Fatalf("spawn %v: %d Resumers in use", spawn, vm.ResumersInUse(l))
		}
		if root.Valid() {
			root.Release()
		}
		semNextRootWorks(t, l)
		semClean(t, l)
	}
}
