package ringbuf

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stepvm/stepvm/internal/allocs"
)

// drainAll drains q until it is empty and returns the items in delivery order.
func drainAll[T any](q *Queue[T]) []T {
	var got []T
	for !q.Empty() {
		q.Drain(func(v *T) { got = append(got, *v) })
	}
	return got
}

func TestQueueOverflowFIFO(t *testing.T) {
	q := NewQueue[int](4)
	for i := range 10 {
		q.Push(i)
	}
	if q.Empty() {
		t.Fatal("Empty after Push")
	}
	n := q.Drain(func(*int) {})
	if n != 10 || !q.Empty() {
		t.Fatalf("Drain = %d, Empty = %v; want 10, true", n, q.Empty())
	}
	for i := range 10 {
		q.Push(i)
	}
	if got := drainAll(q); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("got %v", got)
	}
	if q.spilled.Load() || len(q.overflow) != 0 || len(q.batch) != 0 {
		t.Fatal("overflow state not reset after drain")
	}
}

func TestQueueSpillDivertsPushes(t *testing.T) {
	q := NewQueue[int](4)
	for i := range 5 { // 0..3 in the ring, 4 in the overflow
		q.Push(i)
	}
	q.ring.TryPop() // make room in the ring
	q.Push(5)       // must still go behind 4
	if len(q.overflow) != 2 {
		t.Fatalf("overflow holds %d items, want 2", len(q.overflow))
	}
	if got := drainAll(q); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("got %v", got)
	}
	q.Push(6) // back on the ring
	if len(q.overflow) != 0 || q.ring.Len() != 1 {
		t.Fatalf("after drain, Push went to overflow")
	}
}

// A producer that has claimed a ring slot but not yet published it must not
// be overtaken by the overflow.
func TestQueueOverflowWaitsForUnpublishedSlot(t *testing.T) {
	q := NewQueue[int](4)
	q.Push(0)
	q.Push(1)
	pos := q.ring.tail.Add(1) - 1 // claim slot 2 without publishing
	q.Push(3)
	q.Push(4) // ring full: overflow
	var got []int
	collect := func(v *int) { got = append(got, *v) }
	if n := q.Drain(collect); n != 2 {
		t.Fatalf("Drain = %d, want 2 (blocked at unpublished slot)", n)
	}
	if q.Empty() {
		t.Fatal("Empty with a claimed slot and overflow")
	}
	s := &q.ring.slots[pos&q.ring.mask]
	s.val = 2
	s.seq.Store(pos + 1)
	q.Drain(collect)
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) || !q.Empty() {
		t.Fatalf("got %v, Empty = %v", got, q.Empty())
	}
}

func TestQueuePushFromDrain(t *testing.T) {
	q := NewQueue[int](2)
	q.Push(0)
	var got []int
	next := 1
	for range 10 {
		q.Drain(func(v *int) {
			got = append(got, *v)
			for range 3 { // outpace the ring from the consumer itself
				if next < 20 {
					q.Push(next)
					next++
				}
			}
		})
	}
	want := make([]int, 20)
	for i := range want {
		want[i] = i
	}
	if got = append(got, drainAll(q)...); !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestQueueDrainPanic(t *testing.T) {
	q := NewQueue[int](2)
	for i := range 8 { // 0,1 in the ring; 2..7 in the overflow
		q.Push(i)
	}
	var got []int
	drainPanicking := func(bad int) {
		defer func() {
			if recover() == nil {
				t.Fatalf("fn did not panic on %d", bad)
			}
		}()
		q.Drain(func(v *int) {
			got = append(got, *v)
			if *v == bad {
				panic(bad)
			}
		})
	}
	drainPanicking(0) // in the ring
	drainPanicking(3) // in the overflow batch
	q.Push(8)         // must wait behind the batch's leftovers
	drainPanicking(7) // last item of the batch
	q.Push(9)
	got = append(got, drainAll(q)...)
	if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("got %v", got)
	}
}

// A fn that panics on the overflow batch's last item has been handed every
// item: the queue is empty at once, not after another Drain.
func TestQueueDrainPanicOnLastItemLeavesEmpty(t *testing.T) {
	q := NewQueue[int](2)
	for i := range 5 { // 0,1 in the ring; 2..4 in the overflow
		q.Push(i)
	}
	func() {
		defer func() { recover() }()
		q.Drain(func(v *int) {
			if *v == 4 {
				panic(*v)
			}
		})
	}()
	if !q.Empty() {
		t.Fatal("Empty = false once every item was delivered")
	}
	q.Push(5)
	if q.ring.Len() != 1 {
		t.Fatal("Push after the batch went to the overflow")
	}
	if got := drainAll(q); !slices.Equal(got, []int{5}) {
		t.Fatalf("got %v", got)
	}
}

func TestQueueDrainZeroes(t *testing.T) {
	q := NewQueue[*int](2)
	x := 1
	for range 5 {
		q.Push(&x)
	}
	q.Drain(func(**int) {})
	for i := range q.ring.slots {
		if q.ring.slots[i].val != nil {
			t.Errorf("ring slot %d retains a pointer", i)
		}
	}
	for i, p := range q.overflow[:cap(q.overflow)] {
		if p != nil {
			t.Errorf("overflow[%d] retains a pointer", i)
		}
	}
	for i, p := range q.batch[:cap(q.batch)] {
		if p != nil {
			t.Errorf("batch[%d] retains a pointer", i)
		}
	}
}

func TestQueueConcurrent(t *testing.T) {
	const producers, items = 4, 100_000
	q := NewQueue[token](8) // small, so the overflow path is exercised
	wg := produce(producers, items, q.Push)
	check := inOrder(t, producers)
	for got := 0; got < producers*items; {
		n := q.Drain(check)
		if n == 0 {
			runtime.Gosched()
		}
		got += n
	}
	wg.Wait()
	if !q.Empty() {
		t.Fatal("queue not empty after all items arrived")
	}
}

// TestQueueHandshake runs the sleep/wake protocol from the package
// documentation. A lost wakeup shows up as a hang.
func TestQueueHandshake(t *testing.T) {
	const producers, items = 4, 20_000
	q := NewQueue[token](4)
	var sleeping atomic.Int32
	wake := make(chan struct{}, 1)
	wg := produce(producers, items, func(tk token) {
		q.Push(tk)
		if sleeping.Load() == 1 {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		if tk.b%64 == 0 {
			runtime.Gosched() // let the consumer catch up and sleep
		}
	})
	check := inOrder(t, producers)
	got, sleeps := 0, 0
	for got < producers*items {
		got += q.Drain(check)
		sleeping.Store(1)
		if q.Empty() && got < producers*items {
			<-wake
			sleeps++
		}
		sleeping.Store(0)
	}
	wg.Wait()
	t.Logf("consumer slept %d times", sleeps)
}

func TestQueueNoAlloc(t *testing.T) {
	q := NewQueue[token](8)
	x := 1
	tk := token{p: &x, a: 1}
	var sum uint32
	fn := func(t *token) { sum += t.a }
	runs := 0
	allocs := allocs.Count(1000, func() {
		q.Push(tk)
		q.Push(tk)
		if q.Drain(fn) == 2 {
			runs++
		}
	})
	if allocs != 0 {
		t.Fatalf("Push+Drain allocated %d times in 1000 runs", allocs)
	}
	if runs < 1001 || sum != uint32(2*runs) {
		t.Fatalf("%d runs drained their two items, %d items in all", runs, sum)
	}
}

func TestQueueOverflowNoAllocAfterGrowth(t *testing.T) {
	q := NewQueue[token](4)
	fn := func(*token) {}
	short := 0
	cycle := func() {
		for range 20 {
			q.Push(token{})
		}
		if q.Drain(fn)+q.Drain(fn) != 20 {
			short++
		}
	}
	cycle()
	cycle() // both swap buffers have grown
	if allocs := allocs.Count(100, cycle); allocs != 0 {
		t.Fatalf("overflow Push+Drain allocated %d times in 100 runs after growth", allocs)
	}
	if short != 0 {
		t.Fatalf("%d cycles drained fewer than their 20 items", short)
	}
}

// A burst far larger than the ring does not leave its buffer behind.
func TestQueueReleasesLargeOverflow(t *testing.T) {
	q := NewQueue[token](4)
	n := 0
	for range 10_000 {
		q.Push(token{})
	}
	for range 3 {
		n += q.Drain(func(*token) {})
	}
	if n != 10_000 {
		t.Fatalf("delivered %d of 10000", n)
	}
	q.Push(token{}) // one more cycle swaps the buffers back
	q.Drain(func(*token) {})
	limit := q.keepCap()
	if cap(q.batch) > limit || cap(q.overflow) > limit {
		t.Fatalf("kept overflow buffers of %d and %d items after the burst, want at most %d",
			cap(q.batch), cap(q.overflow), limit)
	}
}

// TestQueueConcurrentDrainPanics drains while producers push and spill, with
// an fn that panics now and then, in the ring and in the overflow batch
// alike: every item arrives once, each producer's in order, and the queue
// ends empty with its overflow state reset.
func TestQueueConcurrentDrainPanics(t *testing.T) {
	const producers, items = 4, 50_000
	q := NewQueue[token](4)
	wg := produce(producers, items, q.Push)
	check := inOrder(t, producers)
	got := 0
	fn := func(tk *token) {
		check(tk)
		got++
		if got%97 == 0 {
			panic(got)
		}
	}
	drain := func() (n int) {
		defer func() {
			if p := recover(); p != nil {
				n = -1
			}
		}()
		return q.Drain(fn)
	}
	for got < producers*items {
		if drain() == 0 {
			runtime.Gosched()
		}
	}
	wg.Wait()
	for drain() != 0 {
	}
	if got != producers*items || !q.Empty() || q.spilled.Load() || len(q.overflow) != 0 || len(q.batch) != 0 {
		t.Fatalf("delivered %d of %d; Empty %v, spilled %v, %d in overflow, %d in batch",
			got, producers*items, q.Empty(), q.spilled.Load(), len(q.overflow), len(q.batch))
	}
}
