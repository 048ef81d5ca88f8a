package benchmarks

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// ParallelWaitLoop: batchSize flows each loop forever on { wait for an
// external Success(Int(1)); subtract the value from a counter }. A driver
// on the benchmark goroutine completes every waiting flow per round. One op
// is one flow-iteration. Setup also measures B/waitflow (see Workloads).

func waitLoopStepvm(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	roots := make([]vm.AsyncSteps, 0, batchSize)
	waiting := make([]vm.AsyncSteps, 0, batchSize)
	ready := make([]vm.AsyncSteps, 0, batchSize)
	var counter int64
	wait := func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		waiting = append(waiting, as)
	}
	sub := func(_ vm.AsyncSteps, args vm.Args) { counter -= args.Int(0) }
	body := func(as vm.AsyncSteps) {
		as.Add(wait)
		as.Add(sub)
	}

	// The flows start one by one, each run until it waits, so that the
	// loop's run queue does not grow to hold batchSize first steps: what is
	// measured is what the waiting flows hold.
	before, arenaBefore := memInUse(l), l.Stats().ArenaReserved
	for range batchSize {
		as := l.NewSteps()
		as.Loop(body)
		as.Execute()
		l.RunUntilIdle()
		roots = append(roots, as)
	}
	after, arenaAfter := memInUse(l), l.Stats().ArenaReserved
	if len(waiting) != batchSize {
		b.Fatalf("%d flows wait, want %d", len(waiting), batchSize)
	}

	// One untimed round grows the run queue and the roots' free lists to
	// their steady-state size.
	ready, waiting = waiting, ready[:0]
	for _, h := range ready {
		h.Success(vm.Int(1))
	}
	l.RunUntilIdle()
	counter = 0

	timeRounds(b, &waiting, &ready, func(hs []vm.AsyncSteps) {
		for _, h := range hs {
			h.Success(vm.Int(1))
		}
	}, l.RunUntilIdle)
	reportPer(b, "iter")
	b.ReportMetric(float64(after-before)/float64(batchSize), "B/waitflow")
	b.ReportMetric(float64(arenaAfter-arenaBefore)/float64(batchSize), "arenaB/waitflow")
	if counter != -int64(b.N) {
		b.Fatalf("counter = %d, want %d", counter, -b.N)
	}
	if len(waiting) != batchSize {
		b.Fatalf("%d flows wait, want %d", len(waiting), batchSize)
	}
	for _, as := range roots {
		as.Release()
	}
}

// timeRounds times b.N completions of waiting flows, in rounds: each round
// completes the flows that wait at its start (no more than the completions
// left), then runs the loop until they wait again. A flow appends itself to
// *waiting when it waits; ready is the other round's buffer.
func timeRounds[W any](b *testing.B, waiting, ready *[]W, complete func([]W), runUntilIdle func()) {
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		*ready, *waiting = *waiting, (*ready)[:0]
		k := min(len(*ready), b.N-done)
		complete((*ready)[:k])
		*waiting = append(*waiting, (*ready)[k:]...) // the last round's rest
		done += k
		runUntilIdle()
	}
	b.StopTimer()
}

// waitLoopGoroutines runs a goroutine per flow, ranging over a channel of
// its own; the driver sends each waiting goroutine its value and waits on a
// WaitGroup for the round to be done.
func waitLoopGoroutines(b *testing.B) {
	chans := make([]chan int64, batchSize)
	var counter atomic.Int64
	var started, round, exited sync.WaitGroup

	before := memInUse(nil)
	started.Add(batchSize)
	exited.Add(batchSize)
	for i := range chans {
		ch := make(chan int64, 1)
		chans[i] = ch
		go func() {
			defer exited.Done()
			started.Done()
			for v := range ch {
				counter.Add(-v)
				round.Done()
			}
		}()
	}
	// Every goroutine has reached its receive, or is about to: at most
	// GOMAXPROCS of them may not hold their blocked-receive record yet.
	started.Wait()
	after := memInUse(nil)

	// One untimed round, as on the stepvm side.
	round.Add(batchSize)
	for _, ch := range chans {
		ch <- 1
	}
	round.Wait()
	counter.Store(0)

	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(batchSize, b.N-done)
		round.Add(k)
		for _, ch := range chans[:k] {
			ch <- 1
		}
		round.Wait()
		done += k
	}
	b.StopTimer()
	reportPer(b, "iter")
	b.ReportMetric(float64(after-before)/float64(batchSize), "B/waitflow")
	for _, ch := range chans {
		close(ch)
	}
	exited.Wait()
	if c := counter.Load(); c != -int64(b.N) {
		b.Fatalf("counter = %d, want %d", c, -b.N)
	}
}
