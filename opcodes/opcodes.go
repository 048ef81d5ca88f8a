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
	OpRepeat             // call the body in slot Fn with 0..A-1; label in slot Err
	OpIter               // frame of one loop iteration (its body is the parent loop's Fn)
	OpSync               // run the queued step inside the sync primitive in slot Fn; A, B: the primitive's state
	opCount
)

var opNames = [opCount]string{
	OpNone: "none", OpRoot: "root", OpBranch: "branch", OpExec: "exec",
	OpSuccess: "success", OpParallel: "parallel", OpLoop: "loop",
	OpRepeat: "repeat", OpIter: "iter", OpSync: "sync",
}

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
	FlagWait                        // WaitExternal: no implicit success
	FlagInError                     // its error handler is running
	FlagStack                       // owns Stack allocations
	FlagDone                        // branch finished (success or canceled)
	FlagResumer                     // a Resumer slot is attached (slot in A)
	FlagCanceling                   // being canceled: calls through its handle are ignored
)

// Node is one instruction and, once it runs, its frame, without a Go
// pointer: links to other Nodes are [Link]s, which the vm resolves through
// its arena, so storing one is a plain store, never a write barrier. Its
// 48 bytes of fields are padded to 64 so that a node sits in one cache line:
// with 48-byte nodes, half of them straddle two lines, and the workloads of
// 30,000 flows, where every turn reads a flow's nodes cold, measured 5-10 %
// slower.
//
// Field use by state:
//   - queued: Next links the siblings of one level; Fn, Err, A and B are
//     the operands of Op.
//   - running: Parent is the enclosing frame; Head..Tail queue the sub-steps
//     added by this frame (for OpParallel once started: its branches, linked
//     by Next).
//
// Op-specific operands:
//   - OpRoot, OpBranch: A holds the thread's innermost frame (see Top), B the
//     thread's wake token, which invalidates a scheduled continuation when
//     bumped.
//   - OpExec, OpIter: B holds the cancel handler slot (low 32 bits) and the
//     timeout's timer slot (high 32 bits); A the Resumer slot.
//   - OpSuccess: Fn holds the boxed success values.
//   - OpParallel: A counts running branches.
//   - OpLoop, OpRepeat: A is the next iteration index, B the Repeat count.
//   - OpSync: Fn holds the sync primitive and the queue its critical
//     section; A and B are the primitive's state of the frame.
type Node struct {
	Next   Link
	Parent Link
	Head   Link
	Tail   Link
	Seq    uint32 // generation stamp; 0 when free, unique per root otherwise
	Op     Op
	_      uint8
	Flags  Flags
	Fn     uint32
	Err    uint32
	A      uint64
	B      uint64
	_      [16]byte // pad: see above
}

// Link names a Node by its place in the vm's arena memory (the vm's
// business: see package arena's Link); 0 names none.
type Link uint32

// NodeSize is the size of a Node; the vm allocates exactly this many bytes.
const NodeSize = unsafe.Sizeof(Node{})

// Top returns the innermost frame of the thread whose base is n.
func (n *Node) Top() Link { return Link(n.A) }

// SetTop records f as the innermost frame of the thread whose base is n.
func (n *Node) SetTop(f Link) { n.A = uint64(f) }

// CancelSlot is the slot of a frame's cancel handler.
func (n *Node) CancelSlot() uint32 { return uint32(n.B) }

// SetCancelSlot sets the slot of a frame's cancel handler.
func (n *Node) SetCancelSlot(s uint32) { n.B = n.B&^0xffffffff | uint64(s) }

// TimerSlot is the slot of a frame's timeout timer.
func (n *Node) TimerSlot() uint32 { return uint32(n.B >> 32) }

// SetTimerSlot sets the slot of a frame's timeout timer.
func (n *Node) SetTimerSlot(s uint32) { n.B = n.B&0xffffffff | uint64(s)<<32 }
