package vm

import (
	"sync/atomic"

	"github.com/stepvm/stepvm/opcodes"
)

// Mutex lets at most max flows into its critical sections at a time (FTN12
// 1.11.1, 2.3); the others wait in strict FIFO order. A flow is a root's
// main thread or one branch of a Parallel step: branches do not inherit
// their parent's lock, and a flow that syncs on a Mutex it already holds,
// from the section or any of its sub-steps, enters again without waiting
// and without being counted twice (FTN12 1.11.4). There is no deadlock
// detection (optional in FTN12 1.11.5): a branch that syncs on a Mutex its
// parent holds, with no place left, waits until a timeout or a cancel ends
// one of them.
//
// The section is released when it ends, however it ends: success, an
// error that leaves it (its error handler still runs inside), Break, a
// timeout, a cancel of the flow. A flow canceled or timed out while it
// waits leaves the queue.
//
// A Mutex belongs to the loop of the first flow that enters it: like the
// flows themselves it is used from that loop's goroutine only, and a flow
// of another loop that syncs on it fails with InternalError, without
// reading what that loop's goroutine writes. A Mutex must not be copied
// after first use. Make it with NewMutex: a flow that syncs on a zero
// Mutex fails with InternalError.
type Mutex struct {
	// l is the loop the Mutex belongs to, nil until a flow enters it.
	// Flows of two loops may enter a new Mutex at once, each on its loop's
	// goroutine: l is the one field that those of another loop read, and
	// only the first to set it binds the Mutex.
	l atomic.Pointer[Loop]
	// ref is the Mutex's number in l's mutexTable, which each frame that
	// holds a place keeps in its A.
	ref      uint64
	max      int
	maxQueue int
	inside   int
	q        waitQueue
	entered  uint64
	rejected uint64
}

// NewMutex returns a Mutex for at most max flows at a time (at least 1)
// with up to maxQueue flows waiting: Unbounded for no limit, 0 to refuse
// any flow that cannot enter at once. A flow that finds the queue full
// fails with DefenseRejected and the ErrorInfo "Mutex queue limit".
func NewMutex(max, maxQueue int) *Mutex {
	if max < 1 {
		panic("vm: NewMutex: max must be at least 1")
	}
	if maxQueue < Unbounded {
		panic("vm: NewMutex: maxQueue must be Unbounded or at least 0")
	}
	return &Mutex{max: max, maxQueue: maxQueue}
}

// Sync adds to as a step that runs fn inside the section (ISync). Use it
// through AsyncSteps.Sync.
func (m *Mutex) Sync(as AsyncSteps, fn ExecFunc, onError ErrorFunc) {
	switch {
	case m == nil:
		as.misuse("Sync on a nil *Mutex")
	case m.max == 0:
		as.misuse("Sync on a zero Mutex: make it with NewMutex")
	default:
		as.addSync(m, nil, fn, onError)
	}
}

// Stats returns the Mutex's counters. Loop goroutine only.
func (m *Mutex) Stats() SyncStats {
	return SyncStats{Inside: m.inside, Queued: m.q.len(), Entered: m.entered, Rejected: m.rejected}
}

// enter admits the thread of OpSync frame n, just pushed (n.Ops().B becomes
// syncHeld or syncPassed), queues it (syncQueued), or refuses it.
func (m *Mutex) enter(l *Loop, r *root, n *Node) refusal {
	if m.l.Load() == l && m.inside == 0 { // l first: another loop's flow reads nothing else
		// Free: no re-entry to look for, nobody waits. The uncontended
		// Sync takes only this path.
		m.inside, n.Ops().A, n.Ops().B = 1, m.ref, syncHeld
		m.entered++
		return accepted
	}
	return m.contend(l, r, n)
}

// contend is enter when the Mutex is taken, or not bound to a loop yet.
func (m *Mutex) contend(l *Loop, r *root, n *Node) refusal {
	if m.l.Load() != l && !m.bind(l) {
		return refusedMutexLoop
	}
	if m.inside > 0 && m.heldBy(r, at(n.Parent)) {
		n.Ops().B = syncPassed
		return accepted
	}
	// Handing the place over on release keeps inside at max while anyone
	// waits, so a flow that finds room never overtakes the queue.
	if m.inside < m.max {
		m.inside++
		m.entered++
		n.Ops().A, n.Ops().B = m.ref, syncHeld
		return accepted
	}
	if m.maxQueue != Unbounded && m.q.n >= m.maxQueue {
		m.rejected++
		return refusedMutexFull
	}
	n.Ops().A = m.q.push(r, threadOf(n), n, l.argsCur)
	n.Ops().B = syncQueued
	return accepted
}

// bind makes m l's, unless m is a loop's already.
func (m *Mutex) bind(l *Loop) bool {
	if !m.l.CompareAndSwap(nil, l) {
		return false
	}
	m.ref = l.mutexes.bind(m)
	return true
}

// heldBy reports whether a frame from f down to its thread's base holds m:
// the thread re-enters. Frames of a parallel step's thread are below the
// branch's base and are not looked at.
func (m *Mutex) heldBy(r *root, f *Node) bool {
	for ; !f.Op.IsBase(); f = at(f.Parent) {
		if f.Op == opcodes.OpSync && f.Ops().B == syncHeld {
			if p, _ := r.slot(f.Fn).(*Mutex); p == m {
				return true
			}
		}
	}
	return false
}

// exit gives back what frame n holds: its place in the section, which
// goes to the first waiter, or its place in the queue.
func (m *Mutex) exit(l *Loop, n *Node) {
	if n.Ops().B == syncHeld && m.q.n == 0 {
		m.inside-- // nobody to hand the place to
		return
	}
	m.handOn(l, n)
}

// handOn is exit when n holds a place someone waits for, or waits itself.
func (m *Mutex) handOn(l *Loop, n *Node) {
	switch n.Ops().B {
	case syncHeld:
		for {
			i, w := m.q.pop()
			if w == nil {
				m.inside--
				return
			}
			if w.alive() {
				m.entered++
				l.admit(w, m.ref, syncHeld)
				m.q.release(i)
				return
			}
			m.q.release(i)
		}
	case syncQueued:
		m.q.remove(n.Ops().A)
	}
}
