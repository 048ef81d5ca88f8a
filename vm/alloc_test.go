package vm_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/internal/allocs"
	"github.com/stepvm/stepvm/vm"
)

// The hot paths allocate nothing once the loop and its pools are warm.
// Each test fails on the first allocation (see internal/allocs). Step functions are prepared
// outside the measured function, as a service would prepare them once.

// assertNoAllocs fails t if fn allocates once warm, or if a run of fn did
// not do its work: each run checks what it did with expect, so that a path
// that does nothing (and so allocates nothing) cannot pass.
func assertNoAllocs(t *testing.T, name string, warm int, fn func()) {
	t.Helper()
	missed = 0
	for range warm {
		fn()
	}
	if n := allocs.Count(1000, fn); n != 0 {
		t.Fatalf("%s: %d allocations in 1000 runs, want 0", name, n)
	}
	if missed != 0 {
		t.Fatalf("%s: %d runs did not do their work", name, missed)
	}
}

// expect counts a run whose work did not happen (see assertNoAllocs).
func expect(ok bool) {
	if !ok {
		missed++
	}
}

var (
	emptyStep = func(vm.AsyncSteps, vm.Args) {}
	sink      int64
	missed    int
	// ran counts the runs of countStep, an empty step that the alloc
	// tests check ran.
	ran       int
	countStep = func(vm.AsyncSteps, vm.Args) { ran++ }
)

func TestZeroAllocRootLifecycle(t *testing.T) {
	l := vm.NewLoop()
	assertNoAllocs(t, "NewSteps+Add+Execute+RunUntilIdle+Release", 10, func() {
		ran = 0
		as := l.NewSteps()
		as.Add(countStep)
		as.Execute()
		l.RunUntilIdle()
		as.Release()
		expect(ran == 1)
	})
	assertNoAllocs(t, "Spawn+RunUntilIdle", 10, func() {
		ran = 0
		l.Spawn(countStep)
		l.RunUntilIdle()
		expect(ran == 1)
	})
	if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 {
		t.Fatalf("stats after the runs: %+v", s)
	}
}

func TestZeroAllocSubStepsWithValues(t *testing.T) {
	l := vm.NewLoop()
	s1 := func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Str("one")) }
	s2 := func(as vm.AsyncSteps, a vm.Args) { as.Success(vm.Int(a.Int(0)+1), vm.Str("two")) }
	got := ""
	s3 := func(as vm.AsyncSteps, a vm.Args) {
		if a.Int(0) == 2 {
			got = a.String(1)
		}
	}
	parent := func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(s1)
		as.Add(s2)
		as.Add(s3)
	}
	assertNoAllocs(t, "three sub-steps with Int and Str", 10, func() {
		got = ""
		l.Spawn(parent)
		l.RunUntilIdle()
		expect(got == "two")
	})
}

// Values that reach waiting steps from outside travel in the run queue:
// one in the queue entry itself, more in the loop's spill table.
func TestZeroAllocExternalValues(t *testing.T) {
	l := vm.NewLoop()
	waiting := make([]vm.AsyncSteps, 0, 2)
	wait := func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		waiting = append(waiting, as)
	}
	got := 0
	use := func(_ vm.AsyncSteps, a vm.Args) { got += int(a.Int(0)) + a.Len() }
	flow := func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(wait)
		as.Add(use)
	}
	assertNoAllocs(t, "external Success with one value and with three", 10, func() {
		waiting, got = waiting[:0], 0
		l.Spawn(flow)
		l.Spawn(flow)
		l.RunUntilIdle()
		waiting[0].Success(vm.Int(1))
		waiting[1].Success(vm.Int(1), vm.Str("two"), vm.Bool(true))
		l.RunUntilIdle()
		expect(got == 1+1+1+3)
	})
	if s := l.Stats(); s.ArenaInUse != 0 || s.RunningRoots != 0 {
		t.Fatalf("stats after the runs: %+v", s)
	}
}

func TestZeroAllocRepeat(t *testing.T) {
	l := vm.NewLoop()
	iters := 0
	body := func(as vm.AsyncSteps, i int) { iters++ }
	step := func(as vm.AsyncSteps, _ vm.Args) { as.Repeat(1000, body) }
	assertNoAllocs(t, "1,000 Repeat iterations", 3, func() {
		iters = 0
		l.Spawn(step)
		l.RunUntilIdle()
		expect(iters == 1000)
	})
}

func TestZeroAllocLoopBreak(t *testing.T) {
	l := vm.NewLoop()
	n := 0
	body := func(as vm.AsyncSteps) {
		if n++; n%10 == 0 {
			as.Break()
		}
	}
	step := func(as vm.AsyncSteps, _ vm.Args) { as.Loop(body) }
	labelled := func(as vm.AsyncSteps, _ vm.Args) { as.Loop(body, "OUTER") }
	assertNoAllocs(t, "Loop left with Break", 10, func() {
		n = 0
		l.Spawn(step)
		l.RunUntilIdle()
		expect(n == 10)
	})
	assertNoAllocs(t, "labelled Loop left with Break", 10, func() {
		n = 0
		l.Spawn(labelled)
		l.RunUntilIdle()
		expect(n == 10)
	})
}

func TestZeroAllocErrorRecovered(t *testing.T) {
	l := vm.NewLoop()
	failing := func(as vm.AsyncSteps, _ vm.Args) { as.Error("E", "info") }
	handled := 0
	handler := func(as vm.AsyncSteps, code string) {
		if code == "E" {
			handled++
		}
		as.Success()
	}
	assertNoAllocs(t, "Error recovered by its handler", 10, func() {
		handled = 0
		l.Spawn(failing, handler)
		l.RunUntilIdle()
		expect(handled == 1)
	})
}

func TestZeroAllocTimeoutResumer(t *testing.T) {
	l := vm.NewLoop()
	var res vm.Resumer
	waiting := func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		res = as.Resumer()
	}
	assertNoAllocs(t, "SetTimeout then Resumer completion", 10, func() {
		l.Spawn(waiting)
		l.RunUntilIdle()
		if !res.Success(vm.Int(1)) {
			panic("resumer refused")
		}
		l.RunUntilIdle()
	})
	if s := l.Stats(); s.Timers != 0 || s.RunningRoots != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestZeroAllocDeferredCancel(t *testing.T) {
	l := vm.NewLoop()
	fn := func() { sink++ }
	assertNoAllocs(t, "Deferred+Cancel", 10, func() {
		h := l.Deferred(time.Minute, fn)
		armed := l.IsValid(h)
		l.Cancel(h)
		expect(armed && !l.IsValid(h))
	})
}

func TestZeroAllocParallel(t *testing.T) {
	l := vm.NewLoop()
	step := func(as vm.AsyncSteps, _ vm.Args) {
		as.Parallel().Add(countStep).Add(countStep).Add(countStep).Add(countStep)
	}
	assertNoAllocs(t, "Parallel of 4 branches", 10, func() {
		ran = 0
		l.Spawn(step)
		l.RunUntilIdle()
		expect(ran == 4)
	})
}

// SuccessStep's values live in a buffer the loop keeps for the next
// SuccessStep once its step has run, in a flow and in clones of a model.
func TestZeroAllocSuccessStep(t *testing.T) {
	l := vm.NewLoop()
	got := int64(0)
	use := func(as vm.AsyncSteps, a vm.Args) { got += a.Int(0) + int64(len(a.String(1))) }
	step := func(as vm.AsyncSteps, _ vm.Args) {
		as.SuccessStep(vm.Int(1), vm.Str("one"))
		as.Add(use)
	}
	assertNoAllocs(t, "SuccessStep inside a step", 10, func() {
		got = 0
		l.Spawn(step)
		l.RunUntilIdle()
		expect(got == 1+3)
	})
	model := l.NewSteps()
	model.SuccessStep(vm.Int(2), vm.Str("two")).Add(use)
	var roots [2]vm.AsyncSteps
	assertNoAllocs(t, "clones of a model with a SuccessStep", 10, func() {
		got = 0
		runClones(l, model, roots[:])
		expect(got == 2*(2+3))
	})
	model.Release()
}

// Flows with more steps at once than a root's own slot table holds run on
// tables the loop lends and takes back: a model of 100 steps cloned per
// flow, a Parallel of 100 branches, and eight such flows at once.
func TestZeroAllocManySlots(t *testing.T) {
	const steps = 100
	l := vm.NewLoop()
	model := emptyModel(l, steps)
	var roots [8]vm.AsyncSteps
	assertNoAllocs(t, "a clone of a model of 100 steps", 10, func() {
		ran = 0
		runClones(l, model, roots[:1])
		expect(ran == steps)
	})
	assertNoAllocs(t, "eight clones of the model at once", 10, func() {
		ran = 0
		runClones(l, model, roots[:])
		expect(ran == 8*steps)
	})
	wide := func(as vm.AsyncSteps, _ vm.Args) {
		p := as.Parallel()
		for range steps {
			p.Add(countStep)
		}
	}
	assertNoAllocs(t, "Parallel of 100 branches", 10, func() {
		ran = 0
		l.Spawn(wide)
		l.RunUntilIdle()
		expect(ran == steps)
	})
	model.Release()
	if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 {
		t.Fatalf("stats after the runs: %+v", s)
	}
}

// emptyModel returns a root of n empty steps (countStep), never executed,
// to clone.
func emptyModel(l *vm.Loop, n int) vm.AsyncSteps {
	model := l.NewSteps()
	for range n {
		model.Add(countStep)
	}
	return model
}

// runClones runs len(roots) clones of model at once, to their end, and
// releases them.
func runClones(l *vm.Loop, model vm.AsyncSteps, roots []vm.AsyncSteps) {
	for i := range roots {
		roots[i] = l.NewSteps()
		roots[i].CopyFrom(model)
		roots[i].Execute()
	}
	l.RunUntilIdle()
	for _, as := range roots {
		as.Release()
	}
}

func TestZeroAllocPostFromAnotherGoroutine(t *testing.T) {
	l := vm.NewLoop()
	posted := 0
	fn := func() { posted++ }
	// A long-lived goroutine posts on request, so that only Post and the
	// loop's drain are measured, not goroutine creation.
	req := make(chan struct{})
	done := make(chan struct{})
	go func() {
		for range req {
			l.Post(fn)
			done <- struct{}{}
		}
	}()
	defer close(req)
	assertNoAllocs(t, "Post from another goroutine", 10, func() {
		posted = 0
		req <- struct{}{}
		<-done
		l.RunUntilIdle()
		expect(posted == 1)
	})
}

// Tearing a frame down runs its cancel handler and its Stack destroy
// callback through protected calls that allocate nothing.
func TestZeroAllocTeardown(t *testing.T) {
	l := vm.NewLoop()
	onCancel := func(vm.AsyncSteps) { sink++ }
	destroy := func(unsafe.Pointer) { sink++ }
	step := func(as vm.AsyncSteps, _ vm.Args) {
		as.StackRaw(32, destroy)
		as.SetCancel(onCancel)
	}
	before := sink
	assertNoAllocs(t, "cancel handler and Stack destroy", 10, func() {
		root := l.NewSteps()
		root.Add(step)
		root.Execute()
		l.RunUntilIdle()
		root.Cancel()
		root.Release()
	})
	if sink-before < 2*1010 {
		t.Fatalf("cancel handlers and destroy callbacks ran %d times, want at least %d", sink-before, 2*1010)
	}
}

// ForeignArgs, which a foreign engine's call of a Go step makes, holds
// its values in the Args value itself: handing them to a step function
// (which the compiler cannot see into) allocates nothing.
func TestZeroAllocForeignArgs(t *testing.T) {
	vals := []vm.Value{vm.Int(1), vm.Str("x")}
	sink = 0
	assertNoAllocs(t, "ForeignArgs", 1, func() { foreignStep(vm.AsyncSteps{}, vm.ForeignArgs(vals)) })
	if sink == 0 {
		t.Fatal("ForeignArgs lost its values")
	}
}

// foreignStep is a package variable, so that its calls stay opaque.
var foreignStep vm.ExecFunc = func(_ vm.AsyncSteps, a vm.Args) { sink += a.Int(0) + int64(len(a.String(1))) }
