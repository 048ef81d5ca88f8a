package ringbuf

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stepvm/stepvm/internal/allocs"
)

// token mimics the vm's completion token: a pointer, two ids and small values.
type token struct {
	p    *int
	a, b uint32
	_    [4]uint64 // room for the values
}

func TestNewRingCapacity(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-1, 2}, {0, 2}, {1, 2}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1024, 1024},
	} {
		if got := NewRing[int](c.in).Cap(); got != c.want {
			t.Errorf("NewRing(%d).Cap() = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestRingFIFO(t *testing.T) {
	r := NewRing[int](8)
	for i := range 8 {
		if !r.TryPush(i) {
			t.Fatalf("TryPush(%d) failed on non-full ring", i)
		}
	}
	if r.Len() != 8 {
		t.Fatalf("Len = %d, want 8", r.Len())
	}
	if r.TryPush(8) {
		t.Fatal("TryPush succeeded on full ring")
	}
	for i := range 8 {
		v, ok := r.TryPop()
		if !ok || v != i {
			t.Fatalf("TryPop = %d, %v; want %d, true", v, ok, i)
		}
	}
	if v, ok := r.TryPop(); ok {
		t.Fatalf("TryPop on empty ring = %d, true", v)
	}
	if r.Len() != 0 {
		t.Fatalf("Len = %d, want 0", r.Len())
	}
}

func TestRingEmptyPop(t *testing.T) {
	r := NewRing[*int](4)
	if v, ok := r.TryPop(); ok || v != nil {
		t.Fatalf("TryPop on new ring = %v, %v", v, ok)
	}
}

func TestRingWraparound(t *testing.T) {
	r := NewRing[int](4)
	runLaps(t, r, 10_000)
	if _, ok := r.TryPop(); ok {
		t.Fatal("ring not empty at end")
	}
}

// runLaps pushes and pops laps rounds of 1 to Cap items through r, which
// must be empty, so that varying fill levels move head and tail through
// every slot offset: every item comes out once, in order, Len counts them,
// and a full ring refuses a push.
func runLaps(t *testing.T, r *Ring[int], laps int) {
	t.Helper()
	next, want := 0, 0
	for lap := range laps {
		k := lap%r.Cap() + 1
		for range k {
			if !r.TryPush(next) {
				t.Fatalf("lap %d: TryPush(%d) failed", lap, next)
			}
			next++
		}
		if k == r.Cap() && r.TryPush(-1) {
			t.Fatalf("lap %d: TryPush on a full ring succeeded", lap)
		}
		if got := r.Len(); got != k {
			t.Fatalf("lap %d: Len = %d, want %d", lap, got, k)
		}
		for range k {
			v, ok := r.TryPop()
			if !ok || v != want {
				t.Fatalf("lap %d: TryPop = %d, %v; want %d", lap, v, ok, want)
			}
			want++
		}
		if !r.empty() {
			t.Fatalf("lap %d: not empty", lap)
		}
	}
}

// startAt moves an empty ring's counters to pos, as if pos items had gone
// through it.
func startAt[T any](r *Ring[T], pos uint64) {
	r.head.Store(pos)
	r.tail.Store(pos)
	for p := pos; p != pos+uint64(r.Cap()); p++ {
		r.slots[p&r.mask].seq.Store(p)
	}
}

// The positions and sequence numbers wrap past 2^64 with the ring full,
// half full and empty, through the ring and through a Queue's overflow:
// nothing is lost, repeated or reordered, and Len and Empty stay right.
func TestRingCountersWrap(t *testing.T) {
	r := NewRing[int](4)
	startAt(r, 1<<64-6)
	runLaps(t, r, 12)
	if h := r.head.Load(); h >= 1<<63 {
		t.Fatalf("head %d did not wrap", h)
	}

	q := NewQueue[int](4)
	startAt(&q.ring, 1<<64-2)
	for i := range 10 { // 4 in the ring across the wrap, 6 in the overflow
		q.Push(i)
	}
	got := drainAll(q)
	for i, v := range got {
		if v != i {
			t.Fatalf("queue delivered %v", got)
		}
	}
	if len(got) != 10 || !q.Empty() {
		t.Fatalf("queue delivered %v, Empty = %v", got, q.Empty())
	}
}

func TestRingPopZeroesSlot(t *testing.T) {
	r := NewRing[token](4)
	x := 1
	for i := range 3 {
		r.TryPush(token{p: &x, a: uint32(i)})
	}
	r.TryPop()
	if r.slots[0].val != (token{}) {
		t.Fatalf("slot 0 after TryPop = %+v, want zero", r.slots[0].val)
	}
	n := r.consume(10, func(tk *token) {
		if tk.p != &x {
			t.Errorf("consumed token %+v lost its pointer", *tk)
		}
	})
	if n != 2 {
		t.Fatalf("consume = %d, want 2", n)
	}
	for i := range r.slots {
		if r.slots[i].val != (token{}) {
			t.Fatalf("slot %d after consume = %+v, want zero", i, r.slots[i].val)
		}
	}
}

func TestRingConsumePanic(t *testing.T) {
	r := NewRing[int](4)
	for i := range 4 {
		r.TryPush(i)
	}
	func() {
		defer func() { recover() }()
		r.consume(4, func(v *int) {
			if *v == 1 {
				panic("boom")
			}
		})
	}()
	// Items 0 and 1 were delivered; 2 and 3 remain, and the freed slots
	// accept new items.
	for _, want := range []int{2, 3} {
		if v, ok := r.TryPop(); !ok || v != want {
			t.Fatalf("TryPop = %d, %v; want %d", v, ok, want)
		}
	}
	if r.slots[1].val != 0 {
		t.Fatal("slot of panicking item not zeroed")
	}
	for i := range 4 {
		if !r.TryPush(i) {
			t.Fatalf("TryPush %d failed after panic recovery", i)
		}
	}
}

// produce starts producers goroutines; producer p pushes the tokens
// {a: p, b: 0, 1, ... items-1} in that order, each through push.
func produce(producers, items int, push func(token)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range items {
				push(token{a: uint32(p), b: uint32(i)})
			}
		})
	}
	return &wg
}

// inOrder returns a check that fails t unless the tokens of each of
// producers arrive in the order produce pushed them.
func inOrder(t *testing.T, producers int) func(*token) {
	next := make([]uint32, producers)
	return func(tk *token) {
		if tk.b != next[tk.a] {
			t.Fatalf("producer %d: got item %d, want %d", tk.a, tk.b, next[tk.a])
		}
		next[tk.a]++
	}
}

func TestRingConcurrent(t *testing.T) {
	const producers, items = 4, 100_000
	r := NewRing[token](16)
	wg := produce(producers, items, func(tk token) {
		for !r.TryPush(tk) {
			runtime.Gosched()
		}
	})
	check := inOrder(t, producers)
	for got := 0; got < producers*items; {
		tk, ok := r.TryPop()
		if !ok {
			runtime.Gosched()
			continue
		}
		check(&tk)
		got++
	}
	wg.Wait()
	if tk, ok := r.TryPop(); ok {
		t.Fatalf("extra item %+v", tk)
	}
}

func TestRingNoAlloc(t *testing.T) {
	r := NewRing[token](8)
	x := 1
	tk := token{p: &x, a: 1, b: 2}
	failed := 0
	allocs := allocs.Count(1000, func() {
		if !r.TryPush(tk) || !r.TryPush(tk) {
			failed++
		}
		if a, ok := r.TryPop(); !ok || a != tk {
			failed++
		}
		if _, ok := r.TryPop(); !ok {
			failed++
		}
	})
	if allocs != 0 {
		t.Fatalf("TryPush+TryPop allocated %d times in 1000 runs", allocs)
	}
	if failed != 0 {
		t.Fatalf("%d pushes or pops failed", failed)
	}
}
