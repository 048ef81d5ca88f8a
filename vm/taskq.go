package vm

// task is one entry of the run queue: an Immediate callback (slot != 0) or
// the next step of a flow's thread, with the values it receives.
type task struct {
	r     *root
	th    *Node  // thread base
	tok   uint64 // th.B when queued; a mismatch means the thread moved on
	epoch uint32 // r.runEpoch when queued
	seq   uint32 // th.Seq when queued: the base may be freed and its memory reused
	slot  uint32 // Immediate callback slot
	gen   uint32
	args  argBuf
}

// taskQueue is a growable FIFO ring of tasks. Popped entries are handed out
// by pointer so the (large) task is not copied; the caller clears it after
// use.
type taskQueue struct {
	buf  []task
	head int
	n    int
}

func (q *taskQueue) len() int { return q.n }

func (q *taskQueue) push(t task) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = t
	q.n++
}

// slot returns a pointer to a new tail entry, to be filled in place.
func (q *taskQueue) slot() *task {
	if q.n == len(q.buf) {
		q.grow()
	}
	t := &q.buf[(q.head+q.n)&(len(q.buf)-1)]
	q.n++
	return t
}

func (q *taskQueue) pop() *task {
	t := &q.buf[q.head]
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return t
}

func (q *taskQueue) grow() {
	size := max(2*len(q.buf), 64)
	buf := make([]task, size)
	for i := range q.n {
		buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
	}
	q.buf, q.head = buf, 0
}
