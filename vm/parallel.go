package vm

import "github.com/stepvm/stepvm/opcodes"

// Parallel steps (FTN12 1.4). A parallel step's queued steps become
// branches, each a thread of its own; the step completes when every branch
// has, and the first error cancels the others.

// startParallel turns the steps queued on P into branches, each a thread
// of its own whose first step runs in its own turn, in the order added.
func (l *Loop) startParallel(r *root, th, P *Node) {
	if P.Head == 0 {
		l.complete(r, th, P, nil)
		return
	}
	steps := P.Head
	P.Head, P.Tail = 0, 0
	var count uint64
	for k := steps; k != 0; {
		s := at(k)
		k = s.Next
		b := r.newNode(opcodes.OpBranch)
		b.Parent = link(P)
		b.Flags = opcodes.FlagRunning
		setTop(b, b)
		push(b, s)
		push(P, b)
		count++
	}
	P.Ops().A = count
	P.Flags |= opcodes.FlagChild
	for k := P.Head; k != 0; {
		b := at(k)
		l.pushFlow(r, b, nil)
		k = b.Next
	}
}

// branchDone records that branch b finished; the last one completes the
// parallel step.
func (l *Loop) branchDone(r *root, b *Node) {
	l.stopThread(b)
	b.Flags |= opcodes.FlagDone
	P := at(b.Parent)
	o := P.Ops()
	o.A--
	if o.A > 0 {
		return
	}
	P.Flags &^= opcodes.FlagChild
	r.freeQueue(P)
	l.complete(r, threadOf(P), P, nil)
}
