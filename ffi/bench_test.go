//go:build cgo

package ffi_test

import (
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/internal/allocs"
	"github.com/stepvm/stepvm/vm"
)

// goNop and goNopSuccess are the Go side's nop steps; goNops counts their
// runs, as ctest.Nops counts the C ones.
var goNops int

func goNop(vm.AsyncSteps, vm.Args) { goNops++ }

func goNopSuccess(as vm.AsyncSteps, _ vm.Args) {
	goNops++
	as.Success()
}

// nopsRun returns how many nop steps, Go's and C's, have run.
func nopsRun() int { return goNops + ctest.Nops() }

// checkNops fails b unless n nop steps ran since before, what nopsRun
// returned then.
func checkNops(b *testing.B, before, n int) {
	b.Helper()
	if got := nopsRun() - before; got != n {
		b.Fatalf("%d steps ran, want %d", got, n)
	}
}

// simple is the Simple workload: create a root, add one step, execute, run
// until idle, release.
type simple struct {
	name string
	add  func(root vm.AsyncSteps)
}

var simpleFlows = []simple{
	{"Go", func(root vm.AsyncSteps) { root.Add(goNop) }},
	{"C", func(root vm.AsyncSteps) { ctest.AddNop(ffi.Binary(root)) }},
	{"Go-success", func(root vm.AsyncSteps) { root.Add(goNopSuccess) }},
	{"C-success", func(root vm.AsyncSteps) { ctest.AddNopSuccess(ffi.Binary(root)) }},
}

func runSimple(l *vm.Loop, add func(vm.AsyncSteps)) {
	root := l.NewSteps()
	add(root)
	root.Execute()
	l.RunUntilIdle()
	root.Release()
}

// BenchmarkFFISimple runs the Simple workload with a C step and, for
// comparison, a Go step. The C step's cost includes adding it from C (a
// call into C that calls back into stepvm) and running it (a call into C);
// the -success variants' steps call success, one more call back.
func BenchmarkFFISimple(b *testing.B) {
	for _, sc := range simpleFlows {
		b.Run(sc.name, func(b *testing.B) {
			l := vm.NewLoop()
			b.ReportAllocs()
			before := nopsRun()
			for b.Loop() {
				runSimple(l, sc.add)
			}
			checkNops(b, before, b.N)
		})
	}
}

// BenchmarkCgo is what cgo itself costs on the machine, the floor of a C
// step: a call into an empty C function, and a call into C that calls
// back into an empty Go function. A Simple flow with a C step makes two
// calls into C (adding the step, running it) and one back into Go (the
// add).
func BenchmarkCgo(b *testing.B) {
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			ctest.Nop()
		}
	})
	b.Run("callback", func(b *testing.B) {
		for b.Loop() {
			ctest.Callback()
		}
	})
}

// BenchmarkFFIStepOverhead measures the cost of a C step over a Go step:
// flows of 100 steps copied from a model, so that each iteration only runs
// steps. The difference of the ns/step metrics is the C call overhead per
// step: binding a FutoInAsyncSteps record to the frame and the call into C.
func BenchmarkFFIStepOverhead(b *testing.B) {
	const steps = 100
	for _, sc := range []simple{
		{"Go", func(root vm.AsyncSteps) {
			for range steps {
				root.Add(goNop)
			}
		}},
		{"C", func(root vm.AsyncSteps) { ctest.AddNops(ffi.Binary(root), steps) }},
	} {
		b.Run(sc.name, func(b *testing.B) {
			l := vm.NewLoop()
			model := l.NewSteps()
			sc.add(model)
			b.ReportAllocs()
			before := nopsRun()
			for b.Loop() {
				root := l.NewSteps()
				root.CopyFrom(model)
				root.Execute()
				l.RunUntilIdle()
				root.Release()
			}
			checkNops(b, before, steps*b.N)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/steps, "ns/step")
		})
	}
}

// The Simple workload with a C step allocates nothing on the Go heap once
// the pools are warm.
func TestFFISimpleZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, sc := range simpleFlows {
		l := vm.NewLoop()
		flow := func() { runSimple(l, sc.add) }
		for range 2000 {
			flow()
		}
		if n := allocs.Count(2000, flow); n != 0 {
			t.Errorf("%s: %d allocations in 2000 flows, want 0", sc.name, n)
		}
	}
}

// A C step that waits through its record, completed by C from a thread
// that does not run its loop (the Resumer the record took, through the
// loop's ring), allocates nothing on the Go heap either.
func TestFFICompletionFromAnotherThreadZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	l := vm.NewLoop()
	// The loop runs on a goroutine of its own, a pass at a time on
	// request, so that this one completes its steps from elsewhere.
	pass, passed := make(chan struct{}), make(chan struct{})
	go func() {
		for range pass {
			l.RunUntilIdle()
			passed <- struct{}{}
		}
	}()
	defer close(pass)
	run := func() { pass <- struct{}{}; <-passed }
	completed := 0
	count := func(vm.AsyncSteps, vm.Args) { completed++ }
	root := l.NewSteps()
	root.Loop(func(as vm.AsyncSteps) {
		ctest.AddWait(ffi.Binary(as))
		as.Add(count)
	})
	root.Execute()
	run()
	flow := func() {
		ctest.Complete(ctest.Waiting(), "") // away: this goroutine runs no pass
		run()
	}
	for range 2000 {
		flow()
	}
	before := completed
	if n := allocs.Count(2000, flow); n != 0 {
		t.Errorf("%d allocations in 2000 completions, want 0", n)
	}
	if completed-before != 2001 {
		t.Errorf("%d steps completed, want 2001", completed-before)
	}
	root.Cancel()
	run()
}
