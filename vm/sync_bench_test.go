package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// syncBatch is the number of steps a root runs per Execute in the
// BenchmarkSyncStep sub-benchmarks.
const syncBatch = 256

// BenchmarkSyncStep compares an uncontended Sync on a Mutex with a plain
// Add step: each op adds one step to an idle root and runs it (in batches
// of syncBatch per Execute), so the figures are ns per step, adding and
// running included. Ratio alternates the two batch by batch and reports
// the fastest batch of each, per step (ns/add, ns/sync), and their
// quotient (sync/add): batches take microseconds, so on a loaded machine
// most of them still run undisturbed, and the minima compare the code
// rather than the load.
func BenchmarkSyncStep(b *testing.B) {
	steps := func(sync bool) func(b *testing.B) {
		return func(b *testing.B) {
			run, ran := stepBatches(sync)
			b.ReportAllocs()
			b.ResetTimer()
			for left := b.N; left > 0; left -= syncBatch {
				run(min(left, syncBatch))
			}
			b.StopTimer()
			if *ran != b.N {
				b.Fatalf("%d steps ran, want %d", *ran, b.N)
			}
		}
	}
	b.Run("Add", steps(false))
	b.Run("Sync", steps(true))
	b.Run("Ratio", func(b *testing.B) {
		runAdd, ranAdd := stepBatches(false)
		runSync, ranSync := stepBatches(true)
		minAdd, minSync := time.Duration(1<<62), time.Duration(1<<62)
		b.ResetTimer()
		for left := b.N; left > 0; left -= syncBatch {
			k := min(left, syncBatch)
			t0 := time.Now()
			runAdd(k)
			t1 := time.Now()
			runSync(k)
			t2 := time.Now()
			if k == syncBatch {
				minAdd, minSync = min(minAdd, t1.Sub(t0)), min(minSync, t2.Sub(t1))
			}
		}
		b.StopTimer()
		if *ranAdd != b.N || *ranSync != b.N {
			b.Fatalf("%d and %d steps ran, want %d", *ranAdd, *ranSync, b.N)
		}
		if b.N >= syncBatch {
			b.ReportMetric(float64(minAdd.Nanoseconds())/syncBatch, "ns/add")
			b.ReportMetric(float64(minSync.Nanoseconds())/syncBatch, "ns/sync")
			b.ReportMetric(float64(minSync)/float64(minAdd), "sync/add")
		}
	})
}

// stepBatches returns a function that adds n steps to a root of a loop of
// its own and runs them, warmed up, and the count of steps run. The steps
// are Syncs on a Mutex of that loop if sync is set, plain Adds otherwise.
func stepBatches(sync bool) (run func(n int), ran *int) {
	l := vm.NewLoop()
	m := vm.NewMutex(1, 0)
	root := l.NewSteps()
	ran = new(int)
	fn := func(vm.AsyncSteps, vm.Args) { *ran++ }
	run = func(n int) {
		for range n {
			if sync {
				root.Sync(m, fn)
			} else {
				root.Add(fn)
			}
		}
		root.Execute()
		l.RunUntilIdle()
	}
	run(syncBatch) // warm the arena, slots and run queue
	*ran = 0
	return run, ran
}
