package vm

import (
	"math/bits"
	"runtime"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/opcodes"
	"github.com/stepvm/stepvm/ringbuf"
	"github.com/stepvm/stepvm/stackalloc"
)

// root status. Between runs, it tells whether the root frame is started
// (base().Seq != 0), so that quickTarget needs one test for an idle root
// with a frame to add to: newBase makes the root ready, resetRun idle.
const (
	rootIdle    uint8 = iota // not running, and no root frame
	rootRunning              // executed and not completed
	rootReady                // not running, and the root frame is started
)

// root is one flow: the Go side of an AsyncSteps root. Its steps and frames
// are Nodes in its arena; the Go values they need are in its slots.
type root struct {
	// What every step touches comes first, to keep a flow's turn to few
	// cache lines when thousands of flows take turns.
	//
	// used has bit i-1 set when slot i (at most lowSlots) is in use; a
	// slot not in use is nil. Slots 1 to inlineSlots are slotBuf, the
	// others more's table, where free slots above lowSlots are listed. A
	// bitmap, not a list, and the table beyond slotBuf in an object of its
	// own keep the root at 128 bytes: two cache lines.
	used uint64
	seq  uint32 // last Node.Seq handed out
	// runEpoch changes whenever the flow ends: it invalidates the step
	// handles and queued tasks of that run without touching arena memory.
	// rootEpoch changes on Release: it invalidates every handle.
	runEpoch  uint32
	rootEpoch uint32

	status  uint8
	spawned bool
	// teardown tells what tears the flow down on the Go stack now: Release
	// canceling the run or running the release hook (the root must not
	// start again), and the callbacks that tear a frame of the flow down,
	// cancel handlers and Stack destroy callbacks. The VM holds frames
	// across those that another unwinding would free, so Error through
	// another step's handle is refused, and in a destroy callback Cancel
	// and Release wait for the next turn (see destroyStack).
	teardown uint8

	// a holds the flow's nodes and Stack memory. What must outlive the
	// root (for the GC cleanup that returns an unreleased root's memory)
	// is in the arena's off-heap header, named by a.Ref().
	a arena.Arena

	l *Loop
	// state is allocated on first use: most flows never touch it. It also
	// holds the root's rarely used parts (its Future, loop labels, the
	// Foreign a stand-in root dispatches to). (Its run's Stack allocations
	// are listed in its threads' bases, and its arena's larger free-list
	// heads in arena memory: see threadBase and arena.Arena.)
	state *State
	// more holds the slots after slotBuf, made when a run first has more
	// than inlineSlots in use at once, and kept when pooled: the root's own
	// table, or during a run, one the loop lent it (see lendSlots).
	more *slotTable

	// Slots 1 to inlineSlots: a flow of a few steps, such as one waiting
	// in a loop, needs no other heap object.
	slotBuf [inlineSlots]any
}

// slotTable holds a root's slots after slotBuf.
type slotTable struct {
	tab      []any    // slot inlineSlots+1 onwards
	freeHigh []uint32 // free slots above lowSlots (root.used has the others)
	// home is the root's own table while the run has one the loop lent it
	// (lendSlots), which goes back at the run's end (emptySlots); nil in
	// a root's own table.
	home *slotTable
}

// Bits of root.teardown.
const (
	tearCancel  uint8 = 1 << 0 // a cancel handler (cancelFrame)
	tearDestroy uint8 = 1 << 1 // a Stack destroy callback (destroyStack)
	tearRelease uint8 = 1 << 2 // Release canceling the run, or its release hook (nativeReleased)
	tearHooked  uint8 = 1 << 3 // a Release whose hook has run (see runReleased)
)

// inlineSlots is the length of a root's first slot table.
const inlineSlots = 3

// lowSlots is how many slots root.used covers.
const lowSlots = 64

// pooledSlots is the most slots a released root keeps room for in the
// pool (1 KiB of table), far more than a flow of a few steps needs. A run
// with more in use at once than the root's own table takes is lent a
// larger table by the loop (lendSlots).
const pooledSlots = 64

// maxLentSlots is the capacity of the largest slot table a loop keeps to
// lend again, and spareRoots the number of pooled roots' worth of tables
// (pooledSlots each) it keeps at most: 1 MiB of slots by default, and the
// lists of free slots above lowSlots that came with them.
const (
	maxLentSlots = 1024
	spareRoots   = 1024
)

// Marks of a root's arena (arena.Arena.SetMark): whether the root is
// counted in its loop's roots, and in its running roots, which the cleanup
// of a root the program dropped must undo.
const (
	markReleased uint64 = 0
	markLive     uint64 = 1 << 0
	markRunning  uint64 = 1 << 1
)

// NewSteps returns a new root, drawn from the loop's pool. Release it when
// done; a root never released is reclaimed by the garbage collector with
// its arena memory.
func (l *Loop) NewSteps() AsyncSteps {
	r := l.newRoot()
	return r.handle()
}

func (l *Loop) newRoot() *root {
	l.roots++
	// The pool slice is read once: resliced from l.pool after the store,
	// it was checked against a capacity loaded anew.
	if p := l.pool; len(p) > 0 {
		r := p[len(p)-1]
		p[len(p)-1] = nil
		l.pool = p[:len(p)-1] // marked live already: see Release
		r.newBase()
		return r
	}
	r := &root{l: l}
	r.a.Init(l.acct)
	r.a.SetMark(markLive)
	// The cleanup's argument is the root's arena memory alone, which must
	// not reach the root (or the root would never become unreachable): an
	// 8-byte argument with a pointer costs the cleanup an 8-byte box. The
	// loop comes from l.reclaim, one closure per loop, through a weak
	// pointer: a cleanup is a GC root, so a strong one would keep the
	// loop, its pool and every pooled root alive for good.
	runtime.AddCleanup(r, l.reclaim, r.a.Ref())
	r.newBase()
	return r
}

// reclaim returns the arena of a root the program dropped without Release.
// It runs on the GC's cleanup goroutine, so it hands the work to the loop,
// which owns the arena's accounting and the records of its frames: a closed
// loop too, which may still be iterated by hand (if it is not, the arena
// goes back when the loop is collected, see reclaimDead). When the loop is
// gone, the chunks go back to the source directly.
func reclaim(self weak.Pointer[Loop], m arena.Ref) {
	if l := self.Value(); l != nil {
		l.dropped.Push(m)
		l.dropping.Store(true)
		l.wake()
		return
	}
	m.Abandon()
}

// reclaimDead runs when a loop is collected: arenas whose reclaim was
// queued but never handled go back to the source. (Reclaims that come
// later find the loop gone and return their arenas themselves.)
func reclaimDead(dropped *ringbuf.Queue[arena.Ref]) {
	dropped.Drain(func(m *arena.Ref) { m.Abandon() })
}

func (l *Loop) reclaimMem(m arena.Ref) {
	if base := (*Node)(m.Fixed()); base != nil && base.Op == opcodes.OpRoot && base.Seq != 0 {
		l.dropRecords(base)
	}
	inUse, reserved, mark := m.Abandon()
	l.acct.Remove(inUse, reserved)
	if mark&markLive != 0 {
		l.roots--
	}
	if mark&markRunning != 0 { // a flow nothing could complete any more
		l.running--
		if f := l.futures.take(uint32(mark >> markFutureShift)); f != nil {
			f.resolve(Args{}, &Error{Code: InternalError, Info: errRootDropped})
		}
	}
}

// dropRecords frees the callback records of the frames of thread th and of
// its branches: those of a flow the program dropped while its steps waited
// with cancel handlers. (A pending timeout or a Resumer keeps its root
// alive.) It also gives back the places its frames hold in Mutexes. The
// arena, about to be abandoned, still holds the frames.
func (l *Loop) dropRecords(th *Node) {
	for f := top(th); f != th; f = at(f.Parent) {
		switch f.Op {
		case opcodes.OpSync:
			if f.Ops().B == syncHeld {
				if m := l.mutexes.lookup(f.Ops().A); m != nil {
					m.exit(l, f)
				}
			}
		case opcodes.OpExec, opcodes.OpIter:
			if k := uint32(f.Next); k != 0 && int(k) < len(l.cbs) {
				if cb := &l.cbs[k]; cb.kind == cbFrame && cb.n == f {
					l.freeCallback(k, cb)
				}
			}
		case opcodes.OpParallel:
			// Its queue holds its branches while they run; once its error
			// handler has added steps, it holds those not run yet (the
			// running one is on this chain), which are no threads.
			if f.Flags&opcodes.FlagChild != 0 {
				for k := f.Head; k != 0; k = at(k).Next {
					if b := at(k); b.Op == opcodes.OpBranch && b.Flags&opcodes.FlagDone == 0 {
						l.dropRecords(b)
					}
				}
			}
		}
	}
}

// rootID returns r's address as an integer: an identity whose store needs
// no write barrier, as frameID's. Loop.cur keeps it from r's turn to the
// next task or the pass's end, and is compared only during the turn, while
// r is on the Go stack: no other root can have r's memory then.
func rootID(r *root) uintptr { return uintptr(unsafe.Pointer(r)) }

// handle returns the root handle of r, valid until r is released.
func (r *root) handle() AsyncSteps { return AsyncSteps{r: r, epoch: r.rootEpoch} }

// resetRun frees everything a run allocated: nodes, slots, stack memory,
// and the root frame, which must be started (finish's run had one; Release
// tests it). A run that ended cleanly has freed every node and slot one by
// one; then only the tables are truncated, and the arena keeps its free
// lists unless it holds more memory than a reset would keep.
func (r *root) resetRun() {
	b := r.base()
	if b.Flags&opcodes.FlagChild == 0 && b.Head != 0 {
		r.freeQueue(b) // steps an error or a cancel left unexecuted
	}
	b.Seq = 0 // the fixed block is not freed: Seq 0 marks it unused, see base
	allocsOf(b).Reset()
	if r.state != nil {
		r.state.misused = false // a report's step is gone with the queue
	}
	if r.status == rootReady {
		r.status = rootIdle
	}
	if r.used != 0 || r.slotCount() > lowSlots { // else every slot is free, hence nil
		r.slotBuf = [inlineSlots]any{}
		if m := r.more; m != nil {
			clear(m.tab)
		}
		if r.state != nil {
			clear(r.state.labels)
		}
	}
	r.used = 0
	if m := r.more; m != nil {
		r.emptySlots(m)
	}
	if !r.a.Settled() {
		r.a.Reset()
	}
}

// emptySlots empties m, r's slot table, whose slots are all nil: a table
// the loop lent goes back to it, and the root has its own again.
func (r *root) emptySlots(m *slotTable) {
	m.tab, m.freeHigh = m.tab[:0], m.freeHigh[:0]
	if m.home != nil {
		r.more, m.home = m.home, nil
		r.l.keepSpare(m)
	}
}

// lendSlots returns a table for a run whose slots outgrow own, its root's
// own table, with own's slots moved to it: one kept from an earlier run
// if the loop has one, else a new one. Flows with many steps at once (a
// wide Parallel, a long model cloned per request) then allocate no table
// per run, while a pooled root keeps no more than pooledSlots.
func (l *Loop) lendSlots(own *slotTable) *slotTable {
	var m *slotTable
	if k := len(l.spare); k > 0 {
		m = l.spare[k-1]
		l.spare[k-1] = nil
		l.spare = l.spare[:k-1]
		l.spareCap -= cap(m.tab)
	} else {
		m = &slotTable{tab: make([]any, 0, pooledSlots)}
	}
	m.tab = append(m.tab, own.tab...) // a lent table has room for more than own holds
	clear(own.tab)
	own.tab = own.tab[:0]
	m.home = own
	return m
}

// keepSpare keeps m, an empty table lent to a run, to lend again, unless
// it is larger than maxLentSlots or the loop keeps enough already.
func (l *Loop) keepSpare(m *slotTable) {
	c := cap(m.tab)
	if c > maxLentSlots || l.spareCap+c > min(l.poolMax, spareRoots)*pooledSlots {
		return
	}
	l.spare = append(l.spare, m)
	l.spareCap += c
}

// put stores v in a free slot and returns its number.
func (r *root) put(v any) uint32 {
	// The lowest free slot, if it is in slotBuf; addExec spells this out.
	if i := bits.TrailingZeros64(^r.used); i < inlineSlots {
		r.used |= 1 << i
		r.slotBuf[i] = v
		return uint32(i + 1)
	}
	return r.putMore(v)
}

// putMore is put when no slot of slotBuf is free.
func (r *root) putMore(v any) uint32 {
	m := r.more
	if m == nil {
		m = new(slotTable)
		r.more = m
	}
	// The lowest free slot up to lowSlots (i is lowSlots when every one
	// of those is in use), if the table has it.
	if i := bits.TrailingZeros64(^r.used); i < inlineSlots+len(m.tab) && i < lowSlots {
		r.used |= 1 << i
		m.tab[i-inlineSlots] = v
		return uint32(i + 1)
	}
	if high := m.freeHigh; len(high) > 0 {
		i := high[len(high)-1]
		m.freeHigh = high[:len(high)-1]
		m.tab[i-1-inlineSlots] = v
		return i
	}
	if len(m.tab) == cap(m.tab) && m.home == nil && inlineSlots+2*cap(m.tab) > pooledSlots {
		m = r.l.lendSlots(m) // the root's own table would grow past what a pooled root keeps
		r.more = m
	}
	m.tab = append(m.tab, v)
	i := inlineSlots + len(m.tab)
	if i <= lowSlots {
		r.used |= 1 << (i - 1)
	}
	return uint32(i)
}

// slotCount returns the length of r's slot table.
func (r *root) slotCount() int {
	if r.more == nil {
		return inlineSlots
	}
	return inlineSlots + len(r.more.tab)
}

// slot returns the value in slot i, which must not be 0. Slots are
// numbered from 1, so that a Node's 0 names none: reserving a slot for
// none would cost every root an entry of slotBuf, 16 bytes.
func (r *root) slot(i uint32) any {
	if i <= inlineSlots {
		return r.slotBuf[i-1]
	}
	return r.more.tab[i-1-inlineSlots]
}

// setSlot stores v in slot i, which is in use.
func (r *root) setSlot(i uint32, v any) {
	if i <= inlineSlots {
		r.slotBuf[i-1] = v
	} else {
		r.more.tab[i-1-inlineSlots] = v
	}
}

func (r *root) freeSlot(i uint32) {
	if i != 0 {
		r.setSlot(i, nil)
		if r.state != nil && i < uint32(len(r.state.labels)) {
			r.state.labels[i] = ""
		}
		if i <= lowSlots {
			r.used &^= 1 << ((i - 1) & 63) // masked: see endRun
		} else {
			r.more.freeHigh = append(r.more.freeHigh, i)
		}
	}
}

// setLabel attaches a loop label to slot i.
func (r *root) setLabel(i uint32, label string) {
	st := r.st()
	if k := int(i) + 1; k > len(st.labels) {
		st.labels = append(st.labels, make([]string, k-len(st.labels))...)
	}
	st.labels[i] = label
}

// label returns the loop label of slot i, "" if none.
func (r *root) label(i uint32) string {
	if r.state != nil && i < uint32(len(r.state.labels)) {
		return r.state.labels[i]
	}
	return ""
}

// The root frame lives in the arena's fixed block; nodes are small blocks
// (arena.Arena.Reuse and Recycle).
var (
	_ [arena.FixedSize - opcodes.NodeSize]struct{}
	_ [arena.SmallSize - opcodes.NodeSize]struct{}
)

// newBase starts a run's root frame in the arena's fixed block: a root
// frame is needed by every run, so it costs no allocation. It is small
// enough to inline (cost 72 of 80) into newRoot and Execute: keep it so.
// A root's arena has its first chunk from newRoot on (SetMark), so the
// block is FixedAgain. Its callers have an idle root (Execute makes it
// running next).
func (r *root) newBase() *Node {
	n := (*Node)(r.a.FixedAgain())
	*n = Node{Seq: r.nextSeq(), Op: opcodes.OpRoot, Wide: true}
	*n.Ops() = opcodes.Operands{A: uint64(link(n))} // the thread's top: itself, see setTop
	r.status = rootReady
	return n
}

// base returns the root frame, in the arena's fixed block: the level 0
// queue and the main thread. Its Seq is 0 while the root has none (newBase
// starts it, resetRun ends it), which base's callers test where the root
// may be between runs: deriving it from the arena, rather than keeping a
// pointer with nil for none, keeps the root a size class smaller. A
// root's arena has its first chunk from newRoot on, so the block is
// FixedAgain; a foreign stand-in root has none, and no path reaches its
// base (its epochs never match).
func (r *root) base() *Node { return (*Node)(r.a.FixedAgain()) }

// threadBase is the layout of a thread's base, the root frame or a branch
// (wide nodes both): its Operands hold the thread's top and wake token (A
// and B, see opcodes.Node) and, in their spare half, the Stack allocations
// (FTN12 1.14) of the thread's frames. A frame's allocations go on its own
// thread's list, so that they are at its front when the frame ends: frames
// end innermost first within a thread, but the branches of a parallel step
// end in any order, and on one list for the run each would look past the
// allocations of every branch that allocated after it. Kept off the heap,
// the lists cost the root nothing; newBase's zeroed Operands, and a new
// branch's zeroed node, start them empty.
type threadBase struct {
	Node
	_      [2]uint64       // Operands.A and B
	allocs stackalloc.List // arena memory only
}

var (
	_ [opcodes.WideSize - unsafe.Sizeof(threadBase{})]struct{}
	_ [unsafe.Offsetof(threadBase{}.allocs) - opcodes.NodeSize - 16]struct{}
)

// allocsOf returns the Stack allocations of the frames of thread th.
func allocsOf(th *Node) *stackalloc.List { return &(*threadBase)(unsafe.Pointer(th)).allocs }

// nextSeq returns a new Node.Seq stamp: never 0, which marks a free node.
func (r *root) nextSeq() uint32 {
	r.seq++
	if r.seq == 0 {
		r.seq = 1
	}
	return r.seq
}

// newNode returns a zeroed node for op, wide if op's nodes are.
func (r *root) newNode(op opcodes.Op) *Node { return r.allocNode(op, op.Wide()) }

// allocNode returns a zeroed node for op, wide or not. (addExec spells its
// narrow case out.)
func (r *root) allocNode(op opcodes.Op, wide bool) *Node {
	var p unsafe.Pointer
	if wide { // two calls with constant sizes: each clears a fixed length
		p = r.a.Reuse(opcodes.WideSize)
	} else {
		p = r.a.Reuse(opcodes.NodeSize)
	}
	if p == nil { // one call, off the path: no spills on it
		p = r.carve(wide)
	}
	n := (*Node)(p)
	n.Op, n.Wide = op, wide
	n.Seq = r.nextSeq()
	return n
}

// carve is allocNode's slow path: a node from new arena memory.
func (r *root) carve(wide bool) unsafe.Pointer {
	if wide {
		return r.a.Alloc(opcodes.WideSize)
	}
	return r.a.Alloc(opcodes.NodeSize)
}

// extOf returns the record of what n, a running OpExec or OpIter frame,
// waits with, making it on first use; endFrame frees it.
func (r *root) extOf(n *Node) *callback {
	if n.Next != 0 { // l.ext, spelled out: with the call, extOf no longer inlines
		return &r.l.cbs[n.Next]
	}
	return r.newExt(n)
}

func (r *root) newExt(n *Node) *callback {
	slot, cb := r.l.newCallback(cbFrame)
	cb.n, cb.seq, cb.epoch = n, n.Seq, r.runEpoch
	n.Next = opcodes.Link(slot)
	return cb
}

// freeNode releases a node that is neither queued nor a frame any more,
// with the slots its operands hold. Only the operations that name slots
// (opcodes.OpExec to OpRepeat, and OpSync) set Fn and Err; the others leave
// them 0, which names none.
func (r *root) freeNode(n *Node) {
	r.freeSlot(n.Fn)
	r.freeSlot(n.Err)
	n.Seq = 0
	if n.Wide { // two calls with constant sizes, as in allocNode: each folds its class and count
		r.a.Recycle(unsafe.Pointer(n), opcodes.WideSize)
	} else {
		r.a.Recycle(unsafe.Pointer(n), opcodes.NodeSize)
	}
}

// freeQueue frees the nodes queued on n, recursively.
func (r *root) freeQueue(n *Node) {
	for s := pop(n); s != nil; s = pop(n) {
		if s.Head != 0 {
			r.freeQueue(s)
		}
		r.freeNode(s)
	}
}

// st returns the root's state, allocating it the first time; a pooled root
// keeps it.
func (r *root) st() *State {
	if r.state == nil {
		r.state = new(State)
	}
	return r.state
}
