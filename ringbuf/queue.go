package ringbuf

import (
	"sync"
	"sync/atomic"
)

// Queue is a [Ring] that never refuses an item. When the ring is full, items
// go to a mutex-protected overflow slice, the only path that may allocate.
// From then on every push goes to the overflow until the consumer has drained
// it, so each producer's items stay in FIFO order.
//
// Drain delivers the overflow only once the ring is empty, and the ring is
// used again only after the overflow has been delivered; together these keep
// any one producer's items in the order it pushed them. Items from different
// producers have no defined order.
//
// A Queue must be created with [NewQueue].
type Queue[T any] struct {
	ring Ring[T]

	// spilled is set while items wait in overflow or batch. It diverts Push
	// to the overflow and makes Empty report false.
	spilled atomic.Bool

	mu       sync.Mutex
	overflow []T // guarded by mu

	// Consumer only. batch holds overflow items being delivered; batch and
	// overflow swap backing arrays so that Drain does not allocate.
	batch []T
	next  int // batch[:next] has been delivered
}

// keepOverflow bounds, in ring capacities, the overflow buffer a Queue
// keeps for reuse after a burst (at least 256 items).
const keepOverflow = 4

func (q *Queue[T]) keepCap() int { return max(keepOverflow*q.ring.Cap(), 256) }

// NewQueue returns an empty Queue whose ring holds capacity items, rounded as
// by [NewRing].
func NewQueue[T any](capacity int) *Queue[T] {
	q := new(Queue[T])
	q.ring.init(capacity)
	return q
}

// Push appends v. It may be called from any goroutine, including from the
// consumer inside Drain's fn. It never waits for the consumer to make room
// and never drops v: the overflow mutex is held only briefly, for an append
// or the consumer's O(1) swap, never while Drain's fn runs.
func (q *Queue[T]) Push(v T) {
	if !q.spilled.Load() && q.ring.TryPush(v) {
		return
	}
	q.mu.Lock()
	q.overflow = append(q.overflow, v)
	q.spilled.Store(true)
	q.mu.Unlock()
}

// Drain calls fn on the items available now, ring first and then overflow,
// and returns how many it delivered. Items pushed during Drain may or may not
// be included. fn receives a pointer into the queue's storage to avoid
// copying large items; it must not retain it after returning, since the
// storage is zeroed and reused.
//
// Only one goroutine may drain at a time, and fn must not call Drain. If fn
// panics, its item counts as delivered and the next Drain resumes with the
// item after it.
func (q *Queue[T]) Drain(fn func(*T)) int {
	n := 0
	if len(q.batch) > 0 { // left over by a panicking fn
		n += q.deliverBatch(fn)
	}
	n += q.ring.consume(q.ring.Cap(), fn)
	if !q.spilled.Load() {
		return n
	}
	q.mu.Lock()
	if !q.ring.empty() {
		// These ring items may precede overflow items of the same producer.
		// Checked under mu: a producer's later overflow append cannot be in
		// the batch unless its earlier tail claim is visible here.
		q.mu.Unlock()
		return n
	}
	q.batch, q.overflow = q.overflow, q.batch[:0]
	q.mu.Unlock()
	return n + q.deliverBatch(fn)
}

// deliverBatch hands batch[next:] to fn. next advances before fn runs, so a
// panicking fn does not see its item again.
func (q *Queue[T]) deliverBatch(fn func(*T)) int {
	n := len(q.batch) - q.next
	// Deferred, so that a fn that panics on the batch's last item leaves
	// the batch delivered: Empty is true once every item has been.
	defer q.endBatch()
	for q.next < len(q.batch) {
		q.next++
		fn(&q.batch[q.next-1])
	}
	return n
}

// endBatch resets the batch once all of it has been delivered (a batch
// left by a panicking fn waits for the next Drain). spilled is cleared
// only then, and only if no new overflow arrived, so that Push keeps
// diverting to the overflow while older overflow items are pending.
func (q *Queue[T]) endBatch() {
	if q.next < len(q.batch) {
		return
	}
	clear(q.batch) // retain no pointers
	q.batch = q.batch[:0]
	q.next = 0
	if cap(q.batch) > q.keepCap() {
		// A burst grew the buffer far past the ring: do not hold that
		// memory for good. The next burst allocates again.
		q.batch = nil
	}

	q.mu.Lock()
	if len(q.overflow) == 0 {
		q.spilled.Store(false)
	}
	q.mu.Unlock()
}

// Empty reports whether the queue holds no items. Once a Push has returned,
// Empty reports false until Drain has delivered the item. A Push that has
// claimed a ring slot but not yet filled it also counts, so Drain may briefly
// deliver nothing while Empty is false. Empty performs only sequentially
// consistent atomic loads, which is what makes the handshake in the package
// documentation sound.
func (q *Queue[T]) Empty() bool {
	return !q.spilled.Load() && q.ring.empty()
}
