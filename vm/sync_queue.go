package vm

// waitQueue is the FIFO of flows waiting to enter a Mutex or a Throttle.
// Its entries live in a slab and are linked by index, so that a wait
// allocates nothing once the slab has grown to the longest queue seen, and
// a flow that leaves early (canceled, timed out) is unlinked in O(1)
// without disturbing the order of the others. The zero value is an empty
// queue.
type waitQueue struct {
	slab       []waiter // entry i is slab[i-1]; 0 means none
	free       uint32   // first free entry, linked by next
	head, tail uint32
	n          int
}

// waiter is one waiting flow: its queued OpSync frame and the values its
// section will receive, which the interpreter only passes during a turn.
type waiter struct {
	r          *root
	th, n      *Node // thread base and OpSync frame
	seq, epoch uint32
	gen        uint32 // bumped when the entry is freed: stale handles miss
	prev, next uint32
	args       argBuf
}

// handle names entry i in a frame's A: the index and its generation.
func (q *waitQueue) handle(i uint32) uint64 { return uint64(i) | uint64(q.slab[i-1].gen)<<32 }

func (q *waitQueue) len() int { return q.n }

// push appends frame n of thread th, waiting with args, and returns the
// entry's handle.
func (q *waitQueue) push(r *root, th, n *Node, args *argBuf) uint64 {
	i := q.free
	if i != 0 {
		q.free = q.slab[i-1].next
	} else {
		q.slab = append(q.slab, waiter{})
		i = uint32(len(q.slab))
	}
	w := &q.slab[i-1]
	w.r, w.th, w.n, w.seq, w.epoch = r, th, n, n.Seq, r.runEpoch
	w.args.copyFrom(args)
	w.prev, w.next = q.tail, 0
	if q.tail != 0 {
		q.slab[q.tail-1].next = i
	} else {
		q.head = i
	}
	q.tail = i
	q.n++
	return q.handle(i)
}

// pop unlinks the first entry and returns it (nil when empty). The entry
// stays valid until release, so that its values can be handed on.
func (q *waitQueue) pop() (uint32, *waiter) {
	i := q.head
	if i == 0 {
		return 0, nil
	}
	q.unlink(i)
	return i, &q.slab[i-1]
}

// remove unlinks and frees the entry named by handle h, if it is still
// queued.
func (q *waitQueue) remove(h uint64) {
	i, gen := uint32(h), uint32(h>>32)
	if i == 0 || int(i) > len(q.slab) || q.slab[i-1].gen != gen || q.slab[i-1].n == nil {
		return
	}
	q.unlink(i)
	q.release(i)
}

func (q *waitQueue) unlink(i uint32) {
	w := &q.slab[i-1]
	if w.prev != 0 {
		q.slab[w.prev-1].next = w.next
	} else {
		q.head = w.next
	}
	if w.next != 0 {
		q.slab[w.next-1].prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = 0, 0
	q.n--
}

// release frees entry i, which is no longer linked, dropping its
// references so that the garbage collector does not see them.
func (q *waitQueue) release(i uint32) {
	w := &q.slab[i-1]
	w.r, w.th, w.n = nil, nil, nil
	w.args.clear()
	w.gen++
	w.next = q.free
	q.free = i
}

// alive reports whether w's frame still waits: its run has not ended and
// its node was not freed. exitSync takes every ending frame out of the
// queue, so this only guards the invariant.
func (w *waiter) alive() bool {
	return w.r.runEpoch == w.epoch && w.n.Seq == w.seq
}
