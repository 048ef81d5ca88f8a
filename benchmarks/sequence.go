package benchmarks

import (
	"iter"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Sequence: one flow runs an asynchronous loop of b.N iterations whose body
// does nothing but count, so that the run can be checked. One op is one
// iteration.

func sequenceStepvm(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	ran := 0
	body := func(vm.AsyncSteps, int) { ran++ }
	as := l.NewSteps()
	as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Repeat(b.N, body) })
	as.Execute()
	b.ReportAllocs()
	b.ResetTimer()
	l.RunUntilIdle()
	b.StopTimer()
	reportPer(b, "iter")
	as.Release()
	if ran != b.N {
		b.Fatalf("%d iterations ran, want %d", ran, b.N)
	}
}

// sequenceGoroutines is Go's asynchronous sequence: a producer goroutine
// hands each iteration over an unbuffered channel to the consumer, which
// runs the body. Each iteration is a hand-off between goroutines, as each
// stepvm iteration is a turn of the event loop; a plain for loop would
// measure a function call, not an asynchronous loop.
func sequenceGoroutines(b *testing.B) {
	ran := 0
	body := func(int) { ran++ }
	ch := make(chan int)
	b.ReportAllocs()
	b.ResetTimer()
	go func(n int) {
		for i := range n {
			ch <- i
		}
		close(ch)
	}(b.N)
	for i := range ch {
		body(i)
	}
	b.StopTimer()
	reportPer(b, "iter")
	if ran != b.N {
		b.Fatalf("%d iterations ran, want %d", ran, b.N)
	}
}

// sequencePull runs the same sequence as a coroutine with iter.Pull: the
// cheapest hand-off between two goroutines the runtime offers, without the
// scheduler in the way.
func sequencePull(b *testing.B) {
	ran := 0
	body := func(int) { ran++ }
	n := b.N
	seq := func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	next, stop := iter.Pull(seq)
	for {
		i, ok := next()
		if !ok {
			break
		}
		body(i)
	}
	stop()
	b.StopTimer()
	reportPer(b, "iter")
	if ran != b.N {
		b.Fatalf("%d iterations ran, want %d", ran, b.N)
	}
}
