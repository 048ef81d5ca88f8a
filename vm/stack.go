package vm

import (
	"unsafe"

	"github.com/stepvm/stepvm/opcodes"
	"github.com/stepvm/stepvm/stackalloc"
)

// Stack returns a zero T that lives as long as the current step (FTN12
// 1.14): it is freed when the step ends by success, error or cancel.
//
// A T without Go pointers comes from the root's arena, at no cost to the
// garbage collector. A T that holds Go pointers (strings, slices, maps,
// pointers, interfaces, funcs) must stay visible to the collector, so it is
// allocated on the Go heap and the step keeps it reachable until it ends.
// Stack returns nil for the handle of a step that has ended; called from a
// step, that is misuse, an InternalError of the calling flow, as every call
// through such a handle is (and, like every call, Stack panics for the zero
// AsyncSteps).
func Stack[T any](as AsyncSteps) *T {
	if f := as.foreign(); f != nil {
		return foreignStack[T](f)
	}
	n, ok := as.running("Stack")
	if !ok {
		return nil
	}
	r := as.r
	if stackalloc.HasPointers[T]() {
		p := new(T)
		d := r.put(p)
		r.allocs().Alloc(&r.a, 0, stackOwner(n), d)
		n.Flags |= opcodes.FlagStack
		return p
	}
	n.Flags |= opcodes.FlagStack
	return stackalloc.New[T](r.allocs(), &r.a, uint64(n.Seq), 0)
}

// StackRaw returns size zeroed bytes of arena memory that live as long as
// the current step; destroy, if not nil, runs with them when the step
// ends, innermost allocation first. The memory is invisible to the garbage
// collector: never store Go pointers in it. The step is ending while
// destroy runs: calls through its handle do nothing, and a Cancel or
// Release of its root takes effect in the loop's next turn. Through the
// handle of a step that has ended, StackRaw returns nil, as Stack does.
func (as AsyncSteps) StackRaw(size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	if f := as.foreign(); f != nil {
		return f.Stack(size, destroy)
	}
	n, ok := as.running("StackRaw")
	if !ok || size < 0 {
		return nil
	}
	return as.r.frameAlloc(n, size, destroy)
}

// frameAlloc allocates size bytes of arena memory owned by frame n; destroy
// runs with them when n ends.
func (r *root) frameAlloc(n *Node, size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	var d uint32
	if destroy != nil {
		d = r.put(destroy)
	}
	n.Flags |= opcodes.FlagStack
	return r.allocs().Alloc(&r.a, uintptr(size), stackOwner(n), d)
}

// stackOwner names frame n as the owner of its Stack allocations. Its Seq
// alone would repeat once a run has handed out 2^32 stamps (a long loop
// inside a step that holds Stack memory does that in seconds), and an
// inner frame would then take its outer frame's allocations; no two live
// frames share a node, so its link with its Seq is unique among the
// owners of live allocations.
func stackOwner(n *Node) uint64 { return uint64(link(n))<<32 | uint64(n.Seq) }
