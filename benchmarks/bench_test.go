package benchmarks

import "testing"

func BenchmarkSimple(b *testing.B)           { run(b, "Simple") }
func BenchmarkParallel(b *testing.B)         { run(b, "Parallel") }
func BenchmarkParallelWaitLoop(b *testing.B) { run(b, "ParallelWaitLoop") }
func BenchmarkSequence(b *testing.B)         { run(b, "Sequence") }
func BenchmarkErrorPath(b *testing.B)        { run(b, "ErrorPath") }
func BenchmarkTimeoutCancel(b *testing.B)    { run(b, "TimeoutCancel") }

// run runs the named workload's stepvm and goroutines sides, then its
// variants, as sub-benchmarks.
func run(b *testing.B, name string) {
	w := workload(b, name)
	b.Run("stepvm", w.Stepvm)
	b.Run("goroutines", w.Goroutines)
	for _, v := range w.Variants {
		b.Run(v.Name, v.Run)
	}
}

func workload(tb testing.TB, name string) Workload {
	for _, w := range Workloads {
		if w.Name == name {
			return w
		}
	}
	tb.Fatalf("no workload %q", name)
	return Workload{}
}
