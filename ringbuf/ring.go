package ringbuf

import (
	"math/bits"
	"sync/atomic"

	"golang.org/x/sys/cpu"
)

// Ring is a bounded lock-free multi-producer single-consumer FIFO
// (Dmitry Vyukov's bounded queue with per-slot sequence numbers).
//
// Slot i is free for the producer claiming position pos when its sequence
// number equals pos, and holds a published item for the consumer at pos when
// it equals pos+1. Producers race only on tail; the consumer alone moves
// head, so the two sit on separate cache lines.
//
// A producer preempted between claiming a slot and publishing it delays the
// consumer for the items queued behind it; no item is ever lost.
//
// A Ring must be created with [NewRing].
type Ring[T any] struct {
	slots []slot[T] // read-only after NewRing
	mask  uint64    // len(slots)-1
	_     cpu.CacheLinePad
	tail  atomic.Uint64 // next position to claim; producers
	_     cpu.CacheLinePad
	head  atomic.Uint64 // next position to read; written by the consumer only
	_     cpu.CacheLinePad
}

type slot[T any] struct {
	seq atomic.Uint64
	val T
}

// NewRing returns an empty Ring holding at least capacity items. The
// capacity is rounded up to a power of two, minimum 2, so that positions map
// to slots with a mask.
func NewRing[T any](capacity int) *Ring[T] {
	r := new(Ring[T])
	r.init(capacity)
	return r
}

func (r *Ring[T]) init(capacity int) {
	n := 2
	if capacity > 2 {
		n = 1 << bits.Len(uint(capacity-1))
	}
	r.slots = make([]slot[T], n)
	r.mask = uint64(n - 1)
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
}

// TryPush appends v and reports whether it did; it fails only when the ring
// is full. It may be called from any goroutine and is lock-free.
func (r *Ring[T]) TryPush(v T) bool {
	pos := r.tail.Load()
	for {
		s := &r.slots[pos&r.mask]
		switch d := int64(s.seq.Load() - pos); {
		case d == 0: // free for pos
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.val = v
				s.seq.Store(pos + 1) // publish
				return true
			}
			pos = r.tail.Load()
		case d < 0: // still holds the item from the previous lap
			return false
		default: // another producer claimed pos first
			pos = r.tail.Load()
		}
	}
}

// TryPop removes and returns the oldest item, or reports false if none is
// published. Only one goroutine may consume at a time. The slot is zeroed
// before it is handed back to producers, so the ring never keeps a popped
// item reachable.
func (r *Ring[T]) TryPop() (v T, ok bool) {
	pos := r.head.Load()
	s := &r.slots[pos&r.mask]
	if s.seq.Load() != pos+1 {
		return v, false
	}
	v = s.val
	r.free(pos)
	r.head.Store(pos + 1)
	return v, true
}

// consume calls fn on up to limit published items in place, oldest first, and
// returns how many it consumed. If fn panics, its item still counts as
// consumed, so the ring stays usable and the item is not delivered twice.
// Consumer only; fn must not consume from r.
func (r *Ring[T]) consume(limit int, fn func(*T)) (n int) {
	pos := r.head.Load()
	inFn := false
	defer func() {
		if inFn {
			r.free(pos)
			pos++
		}
		r.head.Store(pos) // once per call: producers never read head
	}()
	for ; n < limit; n++ {
		s := &r.slots[pos&r.mask]
		if s.seq.Load() != pos+1 {
			break
		}
		inFn = true
		fn(&s.val)
		inFn = false
		r.free(pos)
		pos++
	}
	return n
}

// free zeroes the slot read at pos and hands it to the producer of the next
// lap.
func (r *Ring[T]) free(pos uint64) {
	s := &r.slots[pos&r.mask]
	var zero T
	s.val = zero
	s.seq.Store(pos + r.mask + 1)
}

// empty reports whether every claimed position has been consumed. A claimed
// but unpublished slot counts as an item.
func (r *Ring[T]) empty() bool {
	return r.tail.Load() == r.head.Load()
}

// Len returns the number of items claimed but not yet consumed. It is exact
// only when producers and the consumer are quiescent.
func (r *Ring[T]) Len() int {
	head := r.head.Load() // before tail, so that tail >= head
	n := r.tail.Load() - head
	return int(min(n, r.mask+1))
}

// Cap returns the number of items the ring can hold.
func (r *Ring[T]) Cap() int {
	return len(r.slots)
}
