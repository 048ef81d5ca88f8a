package vm

import (
	"unsafe"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/opcodes"
)

// Nodes name each other by opcodes.Link, not by pointer, so that linking
// them is a plain store into arena memory (see package arena's Link). The
// functions here convert between the two; on the Go stack and in handles a
// node is a *Node.

// at returns the node k names. k must not be 0: test for "none" first.
func at(k opcodes.Link) *Node { return (*Node)(arena.At(arena.Link(k))) }

// link returns the link naming n, which must not be nil.
func link(n *Node) opcodes.Link { return opcodes.Link(arena.LinkOf(unsafe.Pointer(n))) }

// top returns the innermost frame of the thread whose base is th.
func top(th *Node) *Node { return at(th.Ops().Top()) }

// setTop records f as the innermost frame of the thread whose base is th.
func setTop(th, f *Node) { th.Ops().SetTop(link(f)) }

// frameID returns n's address as an integer: an identity (of the frame
// whose code runs: Loop.inCall) that the garbage collector need not see, as
// nodes live in arena memory outside the Go heap, so that storing it is a
// plain store with no write barrier.
func frameID(n *Node) uintptr { return uintptr(unsafe.Pointer(n)) }

// frameAt returns the node whose frameID is id. Nodes live in one region
// of address space outside the Go heap, which stays mapped once committed,
// so the node is readable even if it has been freed since: callers check
// that it is the node they expect (see innermost).
func frameAt(id uintptr) *Node {
	base := arena.At(0)
	return (*Node)(unsafe.Add(base, id-uintptr(base)))
}

// tok returns the wake token of the thread whose base is th.
func tok(th *Node) *uint64 { return &th.Ops().B }

// ext returns the record of what the running OpExec or OpIter frame n
// waits with (see callback), or nil.
func (l *Loop) ext(n *Node) *callback {
	if n.Next == 0 {
		return nil
	}
	return &l.cbs[n.Next]
}

// parent returns the frame enclosing n: for a branch's base, the parallel
// step; for the root frame (the main thread's base), nil.
func parent(n *Node) *Node {
	if n.Parent == 0 {
		return nil
	}
	return at(n.Parent)
}

// push appends s to the queue of q.
func push(q, s *Node) {
	k := link(s)
	s.Next = 0
	if q.Tail == 0 {
		q.Head = k
	} else {
		at(q.Tail).Next = k
	}
	q.Tail = k
}

// pop removes and returns the first queued node of q, or nil.
func pop(q *Node) *Node {
	if q.Head == 0 {
		return nil
	}
	s := at(q.Head)
	q.Head = s.Next
	if q.Head == 0 {
		q.Tail = 0
	}
	s.Next = 0
	return s
}
