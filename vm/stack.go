package vm

import (
	"strconv"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
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
// Stack returns nil for the handle of a step that has ended, and for a T
// of more than 1 GiB; called from a step, that is misuse, an InternalError
// of the calling flow, as every call through such a handle is (and, like
// every call, Stack panics for the zero AsyncSteps).
func Stack[T any](as AsyncSteps) *T {
	// Refused before a T exists: one that large, made on the Go heap (a
	// zero T to size, a T with pointers), is a fatal out-of-memory error.
	size := unsafe.Sizeof(*(*T)(nil))
	if size > maxStackSize {
		as.misuse("Stack of " + strconv.FormatUint(uint64(size), 10) + " bytes" + overStackMax)
		return nil
	}
	if f := as.foreign(); f != nil {
		return foreignStack[T](f)
	}
	n, ok := as.stackFrame("Stack")
	if !ok {
		return nil
	}
	r := as.r
	list := r.l.stackList(r, n)
	if stackalloc.HasPointers[T]() {
		p := new(T)
		list.Alloc(&r.a, stackSize(0), ownStack(n), r.put(p)) // the slot keeps p until n ends
		return p
	}
	return (*T)(list.Alloc(&r.a, stackSize(size), ownStack(n), 0))
}

// stackSize is what to ask a Stack list for size bytes: never a block of a
// node's size. A node's block, once freed, serves the next allocation of
// its class; held by Stack memory, its bytes (the list's header, or the
// user's) would stand where a stale handle of that node reads its stamp
// (Node.Seq), and could match it: the handle would be valid again, and a
// call through it would take Stack memory for a frame.
func stackSize(size uintptr) uintptr {
	if t := stackalloc.Bytes(size); t <= arena.SmallSize {
		if b := arena.BlockSize(t); b == opcodes.NodeSize || b == opcodes.WideSize {
			return size + (b - t) + 16 // the next class up
		}
	}
	return size
}

// StackRaw returns size zeroed bytes of arena memory that live as long as
// the current step; destroy, if not nil, runs with them when the step
// ends, innermost allocation first. The memory is invisible to the garbage
// collector: never store Go pointers in it. The step is ending while
// destroy runs: calls through its handle do nothing, and a Cancel or
// Release of its root takes effect in the loop's next turn. Through the
// handle of a step that has ended, StackRaw returns nil, as Stack does,
// and so it does for a negative size: both are misuse.
//
// Each thread's allocations (the root's, each parallel branch's) are one
// list, newest first. The end of a frame that allocated looks through its
// thread's until it has found as many as the frame took, which for an
// inner step are at the front however many its outer steps, or other
// branches, hold; a frame that took more than 254 looks through the whole
// list once.
func (as AsyncSteps) StackRaw(size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	if f := as.foreign(); f != nil {
		return f.Stack(size, destroy)
	}
	n, ok := as.stackFrame("StackRaw")
	if !ok {
		return nil
	}
	if size < 0 {
		as.misuse("StackRaw with a negative size")
		return nil
	}
	if size > maxStackSize {
		as.misuse("StackRaw of " + strconv.Itoa(size) + " bytes" + overStackMax)
		return nil
	}
	return as.r.frameAlloc(n, size, destroy)
}

// maxStackSize bounds a Stack allocation. Far past what a step's scratch
// memory needs, it keeps a size no chunk could hold from reaching the
// arena, whose refusal is a panic: inside a step's call that fails its
// flow, but from the loop's goroutine between passes it would come out of
// the call.
const maxStackSize = 1 << 30

// overStackMax ends the misuse report of a Stack allocation over maxStackSize.
const overStackMax = ", more than the 1 GiB a Stack allocation may take"

// stackFrame is running for Stack and StackRaw, which an error handler (a
// step's or a parallel step's) may call too: the memory lives with the
// frame whose error it handles, until the handler's Success, its added
// steps or the error it lets through end that.
func (as AsyncSteps) stackFrame(what string) (*Node, bool) {
	if n, ok := as.frame(); ok && !n.Op.IsLoop() &&
		n.Flags&(opcodes.FlagInError|opcodes.FlagCanceling) == opcodes.FlagInError {
		return n, true
	}
	return as.running(what)
}

// frameAlloc allocates size bytes of arena memory owned by frame n; destroy
// runs with them when n ends.
func (r *root) frameAlloc(n *Node, size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	var d uint32
	if destroy != nil {
		d = r.put(destroy)
	}
	return r.l.stackList(r, n).Alloc(&r.a, stackSize(uintptr(size)), ownStack(n), d)
}

// stackList returns the list of frame n's thread, which its allocations go
// on. In the common cases n is the innermost frame of the thread whose
// turn or error handler runs; else n's enclosing frames lead to its base.
// The loop's registers are trusted only when they name a thread of n's
// root r: r's run, which n belongs to, holds their memory then, where a
// thread of another root may have been freed since with its run, and its
// chunk taken by another arena, on another goroutine.
func (l *Loop) stackList(r *root, n *Node) *stackalloc.List {
	if l.curTh != 0 && l.cur == rootID(r) {
		if th := frameAt(l.curTh); innermost(th, n) {
			return allocsOf(th)
		}
	}
	if th := l.errTh; th != nil && l.errRoot == rootID(r) && innermost(th, n) {
		return allocsOf(th)
	}
	return allocsOf(threadOf(n))
}

// innermost reports whether frame n is the innermost of thread th, a
// thread of n's root. A base in use whose top is n is n's thread; th may
// have been freed meanwhile, and its memory then serve another node or a
// Stack block, which its Seq and Op tell.
func innermost(th, n *Node) bool {
	return th.Seq != 0 && th.Op.IsBase() && top(th) == n
}

// ownStack counts one more Stack allocation of frame n and returns the
// owner it is to carry: every allocation path takes it here, so that n's
// end (destroyStack) finds all of them.
func ownStack(n *Node) uint64 {
	if n.Flags&opcodes.FlagStack != opcodes.FlagStack {
		n.Flags += opcodes.StackOne
	}
	return stackOwner(n)
}

// stackOwner names frame n as the owner of its Stack allocations. Its Seq
// alone would repeat once a run has handed out 2^32 stamps (a long loop
// inside a step that holds Stack memory does that in seconds), and an
// inner frame would then take its outer frame's allocations; no two live
// frames share a node, so its link with its Seq is unique among the
// owners of live allocations.
func stackOwner(n *Node) uint64 { return uint64(link(n))<<32 | uint64(n.Seq) }

// destroyStack runs the destroy callbacks of the Stack allocations of frame
// n of thread th, newest first, and frees them. Its callers hold frames of
// r across it (n, detached from its thread, and n's parent), so the
// callbacks must not end the run or unwind a thread: n is marked
// canceling, which makes calls through its handle do nothing, and r's
// teardown tearDestroy (see endLater and Error). The parent, which its
// callers have already told it has no child running, is marked as having
// one again meanwhile, so that its handle refuses to complete it (this
// keeps that cost off the callers' common path).
func (l *Loop) destroyStack(r *root, th, n *Node) {
	owner := stackOwner(n)
	list := allocsOf(th)
	n.Flags |= opcodes.FlagCanceling // the frame is ending: it is freed next
	var parentChild opcodes.Flags
	if n.Parent != 0 {
		p := at(n.Parent)
		parentChild = p.Flags & opcodes.FlagChild
		p.Flags |= opcodes.FlagChild
	}
	// Nested when a callback completes a step of another branch of r.
	was := r.teardown
	r.teardown |= tearDestroy
	for n.Flags&opcodes.FlagStack != 0 {
		p, d, ok := list.Take(owner)
		if !ok {
			break
		}
		if n.Flags&opcodes.FlagStack != opcodes.FlagStack {
			n.Flags -= opcodes.StackOne // the last one found ends the search
		}
		if d != 0 {
			if fn, ok := r.slot(d).(func(unsafe.Pointer)); ok {
				recordLate(r, r.runEpoch, l.callDestroy(r, fn, p)) // an unwinding: Error through n's handle
			}
			r.freeSlot(d)
		}
		list.Free(&r.a, p)
	}
	r.teardown = was
	if n.Parent != 0 {
		p := at(n.Parent)
		p.Flags = p.Flags&^opcodes.FlagChild | parentChild
	}
	n.Flags &^= opcodes.FlagStack
}
