package vm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Micro-benchmarks of the interpreter's paths, for profiling. The tracked
// comparisons against goroutines live in package benchmarks. Each checks
// that it did its work: a broken path must not just look fast.

// checkRan fails b unless got, the work counted, is want.
func checkRan(b *testing.B, what string, got, want int) {
	b.Helper()
	if got != want {
		b.Fatalf("%d %s, want %d", got, what, want)
	}
}

// checkDone fails b unless l runs no flow and holds no arena memory.
func checkDone(b *testing.B, l *vm.Loop) {
	b.Helper()
	if s := l.Stats(); s.RunningRoots != 0 || s.ArenaInUse != 0 {
		b.Fatalf("flows left running or memory in use: %+v", s)
	}
}

func BenchmarkInterpSimple(b *testing.B) {
	l := vm.NewLoop()
	b.ReportAllocs()
	ran = 0
	for b.Loop() {
		as := l.NewSteps()
		as.Add(countStep)
		as.Execute()
		l.RunUntilIdle()
		as.Release()
	}
	checkRan(b, "steps", ran, b.N)
}

func BenchmarkInterpSpawn(b *testing.B) {
	l := vm.NewLoop()
	b.ReportAllocs()
	ran = 0
	for b.Loop() {
		l.Spawn(countStep)
		l.RunUntilIdle()
	}
	checkRan(b, "steps", ran, b.N)
}

func BenchmarkInterpRepeat(b *testing.B) {
	l := vm.NewLoop()
	iters := 0
	body := func(vm.AsyncSteps, int) { iters++ }
	b.ReportAllocs()
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.Repeat(b.N, body) })
	b.ResetTimer()
	l.RunUntilIdle()
	checkRan(b, "iterations", iters, b.N)
}

func BenchmarkInterpErrorPath(b *testing.B) {
	l := vm.NewLoop()
	failing := func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }
	handled := 0
	handler := func(as vm.AsyncSteps, _ string) {
		handled++
		as.Success()
	}
	b.ReportAllocs()
	for b.Loop() {
		l.Spawn(failing, handler)
		l.RunUntilIdle()
	}
	checkRan(b, "errors handled", handled, b.N)
}

func BenchmarkInterpTimeoutResumer(b *testing.B) {
	l := vm.NewLoop()
	var res vm.Resumer
	waiting := func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		res = as.Resumer()
	}
	b.ReportAllocs()
	completed := 0
	for b.Loop() {
		l.Spawn(waiting)
		l.RunUntilIdle()
		if res.Success() {
			completed++
		}
		l.RunUntilIdle()
	}
	checkRan(b, "completions", completed, b.N)
	checkDone(b, l)
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
	l.RunUntilIdle()
	checkDone(b, l)
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
			iters := 0
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
				for range held {
					as.StackRaw(8, nil)
				}
				as.Repeat(b.N, func(as vm.AsyncSteps, _ int) {
					iters++
					as.StackRaw(8, nil)
				})
			})
			b.ResetTimer()
			l.RunUntilIdle()
			checkRan(b, "iterations", iters, b.N)
			checkDone(b, l)
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
			checkDone(b, l)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*width), "ns/branch")
		})
	}
}
