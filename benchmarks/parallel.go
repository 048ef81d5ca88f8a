package benchmarks

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Parallel: flows are created in batches of batchSize; each flow's first
// step waits for an external Success(Int(1)), delivered once the whole
// batch waits, and its second step subtracts the value it receives from a
// counter, which must be back to zero at the end.

// parallelFlows is the stepvm side's state: the steps of a flow and the
// handles of the steps that wait.
type parallelFlows struct {
	l       *vm.Loop
	waiting []vm.AsyncSteps
	counter int64
	wait    vm.ExecFunc
	sub     vm.ExecFunc
}

func newParallelFlows() *parallelFlows {
	p := &parallelFlows{l: vm.NewLoop(), waiting: make([]vm.AsyncSteps, 0, batchSize)}
	p.wait = func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		p.waiting = append(p.waiting, as)
	}
	p.sub = func(_ vm.AsyncSteps, args vm.Args) { p.counter -= args.Int(0) }
	return p
}

// complete delivers Success(Int(1)) to every waiting step, from the loop
// goroutine through the step's handle (FTN12 2.2.2), and runs the flows to
// their end. It returns how many steps waited.
func (p *parallelFlows) complete() int {
	p.l.RunUntilIdle()
	n := len(p.waiting)
	for _, h := range p.waiting {
		h.Success(vm.Int(1))
	}
	clear(p.waiting) // do not keep the roots' handles alive
	p.waiting = p.waiting[:0]
	p.l.RunUntilIdle()
	return n
}

// timeBatches runs an untimed batch that grows the queues and pools, then
// times b.N flows run in batches of at most batchSize by batch, and checks
// that the counter every flow subtracted its value from is back to zero.
func timeBatches(b *testing.B, batch func(k int), counter func() int64) {
	batch(batchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batchSize {
		batch(min(batchSize, b.N-done))
	}
	b.StopTimer()
	reportPer(b, "flow")
	if c := counter(); c != 0 {
		b.Fatalf("counter = %d, want 0", c)
	}
}

// time is timeBatches on the stepvm side's counter.
func (p *parallelFlows) time(b *testing.B, batch func(k int)) {
	timeBatches(b, batch, func() int64 { return p.counter })
}

func parallelStepvm(b *testing.B) {
	p := newParallelFlows()
	defer p.l.Close()
	roots := make([]vm.AsyncSteps, 0, batchSize)
	batch := func(k int) {
		for range k {
			as := p.l.NewSteps()
			as.Add(p.wait).Add(p.sub)
			as.Execute()
			roots = append(roots, as)
		}
		p.counter += int64(k)
		if n := p.complete(); n != k {
			b.Fatalf("%d steps waited, want %d", n, k)
		}
		for _, as := range roots {
			as.Release()
		}
		roots = roots[:0]
	}
	p.time(b, batch)
}

// parallelSpawn is the per-request form: each flow is a spawned root whose
// step adds the two steps, and which is released when they complete.
func parallelSpawn(b *testing.B) {
	p := newParallelFlows()
	defer p.l.Close()
	start := func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(p.wait)
		as.Add(p.sub)
	}
	batch := func(k int) {
		for range k {
			p.l.Spawn(start)
		}
		p.counter += int64(k)
		if n := p.complete(); n != k {
			b.Fatalf("%d steps waited, want %d", n, k)
		}
	}
	p.time(b, batch)
	if s := p.l.Stats(); s.RunningRoots != 0 {
		b.Fatalf("%d roots still running", s.RunningRoots)
	}
}

// parallelGoroutines runs a goroutine per flow that receives its value on a
// channel of its own (the idiomatic reply channel, buffered so that the
// driver never blocks on a goroutine that has not started yet), subtracts
// it from a shared atomic counter and reports through a WaitGroup.
func parallelGoroutines(b *testing.B) {
	var counter atomic.Int64
	var wg sync.WaitGroup
	chans := make([]chan int64, 0, batchSize)
	batch := func(k int) {
		counter.Add(int64(k))
		wg.Add(k)
		for range k {
			ch := make(chan int64, 1)
			chans = append(chans, ch)
			go func() {
				counter.Add(-<-ch)
				wg.Done()
			}()
		}
		for _, ch := range chans {
			ch <- 1
		}
		wg.Wait()
		clear(chans)
		chans = chans[:0]
	}
	timeBatches(b, batch, counter.Load)
}
