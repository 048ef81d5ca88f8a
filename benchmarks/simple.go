package benchmarks

import (
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Simple: per flow, a root with one empty step is created, executed, run to
// completion and released.

func simpleStepvm(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	ran := 0
	step := func(vm.AsyncSteps, vm.Args) { ran++ }
	flow := func() {
		as := l.NewSteps()
		as.Add(step)
		as.Execute()
		l.RunUntilIdle()
		as.Release()
	}
	timeFlows(b, flow, func() { ran = 0 })
	if ran != b.N {
		b.Fatalf("%d steps ran, want %d", ran, b.N)
	}
}

// simpleSpawn is the per-request form: Spawn takes a root from the pool and
// releases it when its step completes.
func simpleSpawn(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	ran := 0
	step := func(vm.AsyncSteps, vm.Args) { ran++ }
	flow := func() {
		l.Spawn(step)
		l.RunUntilIdle()
	}
	timeFlows(b, flow, func() { ran = 0 })
	if ran != b.N {
		b.Fatalf("%d steps ran, want %d", ran, b.N)
	}
}

// simpleGoroutines starts a goroutine per flow and waits for it before the
// next, as the stepvm side runs each flow to completion. Waiting on a
// channel that is reused across flows measured faster than a WaitGroup
// (sync.WaitGroup.Go allocates its closure too).
func simpleGoroutines(b *testing.B) {
	done := make(chan struct{}, 1)
	ran := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		go func() {
			ran++
			done <- struct{}{}
		}()
		<-done
	}
	b.StopTimer()
	reportPer(b, "flow")
	if ran != b.N {
		b.Fatalf("%d goroutines ran, want %d", ran, b.N)
	}
}
