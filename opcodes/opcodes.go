// Package opcodes defines stepvm's instruction set and its encoding: the
// operations a step can be, and the fixed-size record ([Node]) in which the
// vm stores each queued step and, once it runs, the step's frame.
//
// It is pure data. Nodes live in off-heap arena memory, so a Node holds no
// pointers at all: links name other Nodes by 32-bit [Link]s, and every Go
// value a step needs (closures, labels, success values) sits in a GC-visible
// table of the owning root, referenced here by a uint32 slot number (0 =
// none).
package opcodes

import "unsafe"

// Op is the operation of a Node.
type Op uint8

const (
	OpNone     Op = iota // never executed; a freed or zero record
	OpRoot               // bottom frame of a root's main thread; Head..Tail is level 0
	OpBranch             // bottom frame of one branch of a parallel step
	OpExec               // call the ExecFunc in slot Fn; error handler in slot Err
	OpSuccess            // SuccessStep: complete with the values boxed in slot Fn
	OpParallel           // run each queued step as its own branch; error handler in slot Err
	OpLoop               // call the body in slot Fn until Break; label in slot Err
	OpRepeat             // call the body in slot Fn with 0..B-1 (A: the next index); label in slot Err
	OpIter               // frame of one loop iteration (its body is the parent loop's Fn)
	OpSync               // run the queued step inside the sync primitive in slot Fn; A, B: the primitive's state
	opCount
)

var opNames = [opCount]string{
	OpNone: "none", OpRoot: "root", OpBranch: "branch", OpExec: "exec",
	OpSuccess: "success", OpParallel: "parallel", OpLoop: "loop",
	OpRepeat: "repeat", OpIter: "iter", OpSync: "sync",
}

// String returns the operation's name ("exec", "parallel", ...), and
// "op?" for a value that is not an operation.
func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return "op?"
}

// IsLoop reports whether frames of o restart their body when their queue
// drains instead of completing, and are targets of Break and Continue.
func (o Op) IsLoop() bool { return o == OpLoop || o == OpRepeat }

// IsBase reports whether o is the bottom frame of a thread of execution.
func (o Op) IsBase() bool { return o == OpRoot || o == OpBranch }

// Flags describe the state of a running frame.
type Flags uint16

const (
	FlagRunning   Flags = 1 << iota // popped from its queue and pushed as a frame
	FlagChild                       // a sub-step (or, for OpParallel, a branch) is running
	FlagWait                        // WaitExternal, SetTimeout or SetCancel: no implicit success
	FlagInError                     // its error handler is running
	FlagDone                        // branch finished (success or canceled)
	FlagResumer                     // a Resumer slot is attached (in the record Next names)
	FlagCanceling                   // being canceled: calls through its handle are ignored
)

// FlagStack, the high byte of a running frame's Flags, counts the Stack
// allocations the frame owns, StackOne each: the frame owns some when it
// is not zero, and its end stops looking for them once it has found them
// all. A count that reaches FlagStack stays there, and the end then looks
// through every allocation of the frame's thread.
const (
	StackOne  Flags = 1 << 8
	FlagStack Flags = 0xff << 8 // the count's bits, and its saturated value
)

// Node is one instruction and, once it runs, its frame, without a Go
// pointer: links to other Nodes are [Link]s, which the vm resolves through
// its arena, so storing one is a plain store, never a write barrier.
//
// A Node is 32 bytes, two to a cache line. The operations that need
// operands beyond these fields get a wide node: the Node followed by
// [Operands], 64 bytes in all (Wide is set). Which ones do is fixed by the
// operation (see [Op.Wide]), except for OpExec, wide when it carries
// native words. A waiting flow thus holds few bytes: a flow parked in a
// Loop body is its root frame and four narrow nodes.
//
// Field use by state:
//   - queued: Next links the siblings of one level; Fn and Err are the
//     operands of Op, and a wide node's Operands the rest.
//   - running: Parent is the enclosing frame; Head..Tail queue the sub-steps
//     added by this frame (for OpParallel once started: its branches, linked
//     by Next). Next, unused by a frame, holds the vm's slot for what an
//     OpExec or OpIter frame waits with (cancel handler, timeout, Resumer),
//     once it has one.
//
// Operands of wide nodes:
//   - OpRoot, OpBranch: A holds the thread's innermost frame (see
//     [Operands.Top]), B the thread's wake token, which invalidates a
//     scheduled continuation when bumped. The vm keeps the Stack
//     allocations of the thread's frames in the spare half.
//   - OpExec with native words: A and B, until the step runs.
//   - OpParallel: A counts running branches.
//   - OpRepeat: A is the next iteration index, B the count.
//   - OpSync: Fn holds the sync primitive and the queue its critical
//     section; A and B are the primitive's state of the frame.
//
// OpLoop runs until Break and numbers nothing, so it is narrow.
type Node struct {
	Next   Link
	Parent Link
	Head   Link
	Tail   Link
	Seq    uint32 // generation stamp; 0 when free, else a per-root count, which wraps
	Op     Op
	Wide   bool // Operands follow
	Flags  Flags
	Fn     uint32
	Err    uint32
}

// Operands follow a wide Node. They fill its second half-line, so that a
// wide node is a cache line's 64 bytes: one line when its block starts on
// one, as the root frame's does (a 64-byte block that the arena carves
// after an odd number of 32-byte ones spans two).
type Operands struct {
	A uint64
	B uint64
	_ [16]byte
}

// Link names a Node by its place in the vm's arena memory (the vm's
// business: see package arena's Link); 0 names none.
type Link uint32

// Sizes the vm allocates: a narrow node, a wide one.
const (
	NodeSize = unsafe.Sizeof(Node{})
	WideSize = NodeSize + unsafe.Sizeof(Operands{})
)

// Wide reports whether nodes of o always carry Operands.
func (o Op) Wide() bool { return wideOps>>o&1 != 0 }

const wideOps = 1<<OpRoot | 1<<OpBranch | 1<<OpParallel | 1<<OpRepeat | 1<<OpSync

// Size is the number of bytes n occupies.
func (n *Node) Size() uintptr {
	if n.Wide {
		return WideSize
	}
	return NodeSize
}

// Ops returns the Operands of n, which must be wide.
func (n *Node) Ops() *Operands {
	return (*Operands)(unsafe.Add(unsafe.Pointer(n), NodeSize))
}

// Top returns the innermost frame of the thread whose base has these
// operands.
func (o *Operands) Top() Link { return Link(o.A) }

// SetTop records f as the innermost frame of the thread.
func (o *Operands) SetTop(f Link) { o.A = uint64(f) }
