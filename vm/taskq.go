package vm

import "github.com/stepvm/stepvm/opcodes"

// task is one entry of the run queue: an Immediate callback (slot != 0) or
// the next step of a flow's thread, with the values it receives. It is one
// cache line: the values a step passes on are most often none or one, which
// the task holds; more go to a spill entry of the loop (see spillArgs).
type task struct {
	r     *root
	tok   uint64       // th's wake token (its B) when queued: a mismatch means the thread moved on
	th    opcodes.Link // thread base
	epoch uint32       // r.runEpoch when queued
	seq   uint32       // th.Seq when queued: the base may be freed and its memory reused
	slot  uint32       // Immediate callback slot
	gen   uint32       // Immediate: the callback's generation; thread, n > 1: the spill entry
	n     uint8        // values passed: in v when 1, in spill entry gen when more
	v     Value
}

// setThread makes t a turn of thread th of r; its values (n, v) are the
// caller's to set.
func (t *task) setThread(r *root, th *Node) {
	t.r, t.tok, t.th, t.epoch, t.seq = r, *tok(th), link(th), r.runEpoch, th.Seq
	t.slot = 0
}

// taskQueue is a growable FIFO ring of tasks. Entries are handed out by
// pointer, to be filled or read in place; the caller clears what a popped
// entry references.
type taskQueue struct {
	buf  []task
	head int
	n    int
}

func (q *taskQueue) len() int { return q.n }

func (q *taskQueue) push(t task) {
	q.room()
	*q.next() = t
}

// room grows a full queue, so that next has an entry to hand out. It is
// apart from next so that each stays small enough to be inlined into
// pushFlow, which runs for every turn a thread takes.
func (q *taskQueue) room() {
	if q.n == len(q.buf) {
		q.grow()
	}
}

// next returns a pointer to a new tail entry, to be filled in place. The
// caller has made room.
func (q *taskQueue) next() *task {
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

// spillArgs stores args, more than one value, for the thread task t in a
// spill entry (pushFlow stores one value or none in the task itself).
func (l *Loop) spillArgs(t *task, args *argBuf) {
	i := takeEntry(&l.spill, &l.spillFree)
	l.spill[i].copyFrom(args)
	t.n, t.gen = args.n, i
}

// unspillArgs moves the values of the thread task t from its spill entry to
// dst (nil: drops them).
func (l *Loop) unspillArgs(t *task, dst *argBuf) {
	e := &l.spill[t.gen]
	if dst != nil {
		dst.copyFrom(e)
	}
	e.clear()
	l.spillFree = append(l.spillFree, t.gen)
	t.n = 0
}
