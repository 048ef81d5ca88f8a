package vm_test

import (
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// syncBatch is the number of steps a root runs per Execute in the
// BenchmarkSyncStep sub-benchmarks.
const syncBatch = 256

// BenchmarkSyncStep compares an uncontended Sync on a Mutex with a plain
// Add step: each op adds one step to an idle root and runs it (in batches
// of syncBatch per Execute), so the figures are ns per step, adding and
// running included.
func BenchmarkSyncStep(b *testing.B) {
	b.Run("Add", func(b *testing.B) {
		benchSteps(b, func(root vm.AsyncSteps, fn vm.ExecFunc) { root.Add(fn) })
	})
	b.Run("Sync", func(b *testing.B) {
		m := vm.NewMutex(1, 0)
		benchSteps(b, func(root vm.AsyncSteps, fn vm.ExecFunc) { root.Sync(m, fn) })
	})
}

func benchSteps(b *testing.B, add func(vm.AsyncSteps, vm.ExecFunc)) {
	l := vm.NewLoop()
	root := l.NewSteps()
	ran := 0
	fn := func(vm.AsyncSteps, vm.Args) { ran++ }
	run := func(n int) {
		for range n {
			add(root, fn)
		}
		root.Execute()
		l.RunUntilIdle()
	}
	run(syncBatch) // warm the arena, slots and run queue
	ran = 0
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= syncBatch {
		run(min(left, syncBatch))
	}
	b.StopTimer()
	if ran != b.N {
		b.Fatalf("%d steps ran, want %d", ran, b.N)
	}
}
