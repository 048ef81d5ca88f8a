package vm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Micro-benchmarks of the interpreter's paths, for profiling. The tracked
// comparisons against goroutines live in package benchmarks.

func BenchmarkInterpSimple(b *testing.B) {
	l := vm.NewLoop()
	b.ReportAllocs()
	for b.Loop() {
		as := l.NewSteps()
		as.Add(emptyStep)
		as.Execute()
		l.RunUntilIdle()
		as.Release()
	}
}

func BenchmarkInterpSpawn(b *testing.B) {
	l := vm.NewLoop()
	b.ReportAllocs()
	for b.Loop() {
		l.Spawn(emptyStep)
		l.RunUntilIdle()
	}
}

func BenchmarkInterpRepeat(b *testing.B) {
	l := vm.NewLoop()
	body := func(vm.AsyncSteps, int) {}
	b.ReportAllocs()
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.Repeat(b.N, body) })
	b.ResetTimer()
	l.RunUntilIdle()
}

func BenchmarkInterpErrorPath(b *testing.B) {
	l := vm.NewLoop()
	failing := func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }
	handler := func(as vm.AsyncSteps, _ string) { as.Success() }
	b.ReportAllocs()
	for b.Loop() {
		l.Spawn(failing, handler)
		l.RunUntilIdle()
	}
}

func BenchmarkInterpTimeoutResumer(b *testing.B) {
	l := vm.NewLoop()
	var res vm.Resumer
	waiting := func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		res = as.Resumer()
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Spawn(waiting)
		l.RunUntilIdle()
		res.Success()
		l.RunUntilIdle()
	}
}

func BenchmarkInterpTimeoutDirect(b *testing.B) {
	l := vm.NewLoop()
	var step vm.AsyncSteps
	waiting := func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		step = as
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Spawn(waiting)
		l.RunUntilIdle()
		step.Success()
	}
}

// BenchmarkStackInnerEnds times an iteration that takes stack memory and
// ends while an outer step holds many allocations: the iteration's end
// stops looking once it has found its own, so the time per iteration does
// not grow with what the outer step holds.
func BenchmarkStackInnerEnds(b *testing.B) {
	for _, held := range []int{10, 10000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			l := vm.NewLoop()
			b.ReportAllocs()
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
				for range held {
					as.StackRaw(8, nil)
				}
				as.Repeat(b.N, func(as vm.AsyncSteps, _ int) { as.StackRaw(8, nil) })
			})
			b.ResetTimer()
			l.RunUntilIdle()
		})
	}
}

// BenchmarkStackBranchesEnd times the cancel of a parallel step whose
// branches each hold stack memory and wait: each branch's end looks only
// through its own thread's allocations, so the time per branch does not
// grow with the number of branches.
func BenchmarkStackBranchesEnd(b *testing.B) {
	for _, width := range []int{100, 10000} {
		b.Run(fmt.Sprintf("branches=%d", width), func(b *testing.B) {
			l := vm.NewLoop()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				root := l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					p := as.Parallel()
					for range width {
						p.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.StackRaw(8, nil)
							as.WaitExternal()
						})
					}
				})
				root.Execute()
				l.RunUntilIdle()
				b.StartTimer()
				root.Cancel()
				l.RunUntilIdle()
				b.StopTimer()
				root.Release()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*width), "ns/branch")
		})
	}
}
