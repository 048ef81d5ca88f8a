package benchmarks

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Synchronization workloads (FTN12 1.11): syncFlows flows at a time
// contend for a Mutex of syncMax places, or for a Throttle of
// throttleRate entries per period. Each op is one entry into the critical
// section; ns/entry is the time per entry, flow creation included.
//
// The stepvm section spans two turns (the section's step, then a
// sub-step), so that the flows really wait for each other; the goroutine
// section yields the processor once (runtime.Gosched) for the same reason.

const (
	syncFlows    = 10000
	syncMax      = 10
	throttleRate = 1000 // entries per period
)

func BenchmarkMutex(b *testing.B) {
	b.Run("stepvm", mutexStepvm)
	b.Run("goroutines", mutexChan)
	b.Run("goroutines-cond", mutexCond)
}

func BenchmarkThrottle(b *testing.B) {
	b.Run("stepvm", throttleStepvm)
	b.Run("goroutines", throttleBucket)
}

// syncBatches runs n entries in batches of at most syncFlows, calling
// batch with the size of each.
func syncBatches(n int, batch func(k int)) {
	for left := n; left > 0; left -= syncFlows {
		batch(min(left, syncFlows))
	}
}

// mutexStepvm spawns the flows of a batch, each syncing on one Mutex, and
// runs the loop until all have left.
func mutexStepvm(b *testing.B) {
	l := vm.NewLoop()
	m := vm.NewMutex(syncMax, vm.Unbounded)
	inside, most, entered := 0, 0, 0
	leave := func(vm.AsyncSteps, vm.Args) {
		inside--
		entered++
	}
	section := func(as vm.AsyncSteps, _ vm.Args) {
		inside++
		most = max(most, inside)
		as.Add(leave)
	}
	flow := func(as vm.AsyncSteps, _ vm.Args) { as.Sync(m, section) }
	batch := func(k int) {
		for range k {
			l.Spawn(flow)
		}
		l.RunUntilIdle()
	}
	batch(syncFlows) // warm the root pool, the wait queue and the run queue
	entered, most = 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	syncBatches(b.N, batch)
	b.StopTimer()
	reportPer(b, "entry")
	if entered != b.N || most > syncMax || (b.N > syncMax && most != syncMax) {
		b.Fatalf("%d entries (want %d), at most %d inside (want %d)", entered, b.N, most, syncMax)
	}
}

// mutexChan starts a goroutine per flow; a buffered channel of syncMax
// tokens is the semaphore.
func mutexChan(b *testing.B) {
	sem := make(chan struct{}, syncMax)
	goroutinesInside(b, func() { sem <- struct{}{} }, func() { <-sem })
}

// goroutinesInside starts a goroutine per flow, in batches, that enters
// with lock, yields once inside, and leaves with unlock; it checks that
// every flow entered and that at most syncMax were ever inside at once.
func goroutinesInside(b *testing.B, lock, unlock func()) {
	var inside, most, entered atomic.Int64
	var wg sync.WaitGroup
	flow := func() {
		defer wg.Done()
		lock()
		n := inside.Add(1)
		if n > most.Load() {
			most.Store(n) // racy maximum, but never above the true one
		}
		runtime.Gosched()
		inside.Add(-1)
		entered.Add(1)
		unlock()
	}
	batch := func(k int) {
		wg.Add(k)
		for range k {
			go flow()
		}
		wg.Wait()
	}
	b.ReportAllocs()
	b.ResetTimer()
	syncBatches(b.N, batch)
	b.StopTimer()
	reportPer(b, "entry")
	if entered.Load() != int64(b.N) || most.Load() > syncMax {
		b.Fatalf("%d entries (want %d), at most %d inside", entered.Load(), b.N, most.Load())
	}
}

// countingMutex lets at most max goroutines in: a sync.Mutex and a
// sync.Cond, the other classic way to write a counting semaphore.
type countingMutex struct {
	mu     sync.Mutex
	cond   sync.Cond
	inside int
	max    int
}

func (c *countingMutex) lock() {
	c.mu.Lock()
	for c.inside == c.max {
		c.cond.Wait()
	}
	c.inside++
	c.mu.Unlock()
}

func (c *countingMutex) unlock() {
	c.mu.Lock()
	c.inside--
	c.mu.Unlock()
	c.cond.Signal()
}

func mutexCond(b *testing.B) {
	c := &countingMutex{max: syncMax}
	c.cond.L = &c.mu
	goroutinesInside(b, c.lock, c.unlock)
}

// throttleStepvm spawns the flows of a batch, each syncing on a Throttle
// of throttleRate entries per second of a manual clock, and advances the
// clock a second at a time until all have entered.
func throttleStepvm(b *testing.B) {
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	th := vm.NewThrottle(l, throttleRate, time.Second, vm.Unbounded)
	entered, perSecond := 0, 0
	mostPerSecond := 0
	section := func(vm.AsyncSteps, vm.Args) {
		entered++
		perSecond++
		mostPerSecond = max(mostPerSecond, perSecond)
	}
	flow := func(as vm.AsyncSteps, _ vm.Args) { as.Sync(th, section) }
	batch := func(k int) {
		want := entered + k
		for range k {
			l.Spawn(flow)
		}
		for {
			l.RunUntilIdle()
			if entered == want {
				break
			}
			clk.Advance(time.Second)
			perSecond = 0
		}
		clk.Advance(time.Second) // a fresh period for the next batch
		l.RunUntilIdle()
		perSecond = 0
	}
	batch(syncFlows)
	entered, mostPerSecond = 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	syncBatches(b.N, batch)
	b.StopTimer()
	reportPer(b, "entry")
	if entered != b.N || mostPerSecond > throttleRate {
		b.Fatalf("%d entries (want %d), at most %d per second", entered, b.N, mostPerSecond)
	}
}

// bucket is a token bucket in the manner of golang.org/x/time/rate's
// Limiter.Wait: tokens accrue continuously at rate per second up to burst,
// a caller reserves one and sleeps until its reservation is due. Time is
// virtual (see throttleBucket): a sleeper waits on a channel of its own,
// as rate.Limiter.Wait waits on a timer of its own.
type bucket struct {
	mu     sync.Mutex
	perTok float64 // nanoseconds per token
	burst  float64
	tokens float64
	last   int64 // virtual time of the last update, ns
	now    int64 // virtual time, ns
	sleep  []sleeper
	next   int // first sleeper not yet woken
	// blocked counts the goroutines asleep or done; the driver advances
	// time once all of the batch are.
	blocked int
	settled chan struct{}
	want    int
}

type sleeper struct {
	at   int64
	wake chan struct{}
}

// wait blocks until the caller may enter.
func (b *bucket) wait(wake chan struct{}) {
	b.mu.Lock()
	now := b.now
	b.tokens = min(b.burst, b.tokens+float64(now-b.last)/b.perTok)
	b.last = now
	b.tokens--
	if b.tokens >= 0 {
		b.mu.Unlock()
		return
	}
	// Reservations are made under the lock, so their times only grow and
	// the sleepers stay sorted.
	at := now + int64(-b.tokens*b.perTok)
	b.sleep = append(b.sleep, sleeper{at, wake})
	b.settle()
	b.mu.Unlock()
	<-wake
}

// done records that a goroutine of the batch has finished.
func (b *bucket) done() {
	b.mu.Lock()
	b.settle()
	b.mu.Unlock()
}

func (b *bucket) settle() {
	b.blocked++
	if b.blocked == b.want {
		b.settled <- struct{}{}
	}
}

// advance moves virtual time by d and wakes the sleepers now due; it
// reports how many it woke.
func (b *bucket) advance(d time.Duration) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now += int64(d)
	woke := 0
	for b.next < len(b.sleep) && b.sleep[b.next].at <= b.now {
		b.sleep[b.next].wake <- struct{}{}
		b.sleep[b.next] = sleeper{}
		b.next++
		woke++
	}
	b.blocked -= woke
	if b.next == len(b.sleep) {
		b.sleep, b.next = b.sleep[:0], 0
	}
	return woke
}

// throttleBucket starts a goroutine per flow, each waiting on the bucket
// (throttleRate tokens per virtual second, burst throttleRate), and
// advances virtual time a second at a time once every goroutine of the
// batch is asleep or done.
func throttleBucket(b *testing.B) {
	bk := &bucket{
		perTok: float64(time.Second) / throttleRate,
		burst:  throttleRate,
		tokens: throttleRate,
	}
	var entered atomic.Int64
	var wg sync.WaitGroup
	flow := func() {
		defer wg.Done()
		bk.wait(make(chan struct{}, 1))
		entered.Add(1)
		bk.done()
	}
	batch := func(k int) {
		bk.mu.Lock()
		bk.blocked, bk.want, bk.settled = 0, k, make(chan struct{}, 1)
		bk.mu.Unlock()
		wg.Add(k)
		for range k {
			go flow()
		}
		for {
			<-bk.settled
			bk.mu.Lock()
			finished := bk.blocked == k && bk.next == len(bk.sleep)
			bk.mu.Unlock()
			if finished {
				break
			}
			for bk.advance(time.Second) == 0 {
			}
		}
		wg.Wait()
		bk.advance(time.Second) // refill for the next batch
	}
	b.ReportAllocs()
	b.ResetTimer()
	syncBatches(b.N, batch)
	b.StopTimer()
	reportPer(b, "entry")
	if entered.Load() != int64(b.N) {
		b.Fatalf("%d entries, want %d", entered.Load(), b.N)
	}
}
