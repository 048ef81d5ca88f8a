package vm

import "github.com/stepvm/stepvm/opcodes"

// Synchronization primitives (FTN12 1.11) run as OpSync frames.
//
// Sync adds an OpSync node whose slot Fn holds the primitive and whose
// queue holds one OpExec node, the critical section: the caller's function
// and error handler. A Limiter adds two OpSync nodes, its Mutex's and,
// nested in it, its Throttle's. When the interpreter reaches an OpSync node
// it pushes it as a frame and stepSync asks the primitive to admit the
// thread, which ends one of three ways:
//
//   - admitted: the section's step runs at once, in the same turn, with the
//     values the OpSync step received;
//   - queued: the thread waits; the primitive keeps the values and, when it
//     admits the thread, schedules it with them, so that the section's
//     step runs as the frame's next sub-step in a later turn;
//   - refused: the error is raised from the frame (DefenseRejected when
//     the queue is full).
//
// The section's step completes the frame with its own values, so the next
// step receives them as if there were no section. However the frame ends
// (success, an error leaving it, Break, a timeout, a cancel, the release
// of its root), the interpreter's endFrame calls exitSync, which gives
// back what the frame holds or takes it out of the queue. Every frame ends
// through endFrame, so a primitive never keeps a flow that has gone. An
// error from the section reaches its error handler while the frame, and
// thus the lock, is still held: the section is released once the error
// leaves it.
//
// A frame's state is in B (one of the sync* constants); a queued frame
// keeps its waiter's handle in A, and a frame that holds a Mutex's place
// the Mutex's number (see mutexTable).
//
// A root the program drops while a frame of it holds a place is
// collected, frames and all, without ending them: its reclaim gives the
// place back instead (dropRecords). One dropped while it waits cannot be:
// the queue keeps it alive.

// OpSync frame states.
const (
	syncIdle   uint64 = iota // not admitted: refused, or not yet asked
	syncQueued               // waiting in the primitive's queue; A is the waiter
	syncHeld                 // admitted and counted by a Mutex: released on exit
	syncPassed               // admitted, nothing to give back: a Mutex re-entry, a Throttle entry
)

// SyncStats is a snapshot of the counters of a Mutex or a Throttle.
type SyncStats struct {
	// Inside is, for a Mutex, the number of flows holding a place: inside
	// a section, or admitted and about to run it (a flow that re-entered
	// counts once); for a Throttle, the number of entries in the current
	// period.
	Inside int
	// Queued is the number of flows waiting to enter.
	Queued int
	// Entered counts the entries admitted since creation, not counting a
	// flow's re-entries into a Mutex it holds.
	Entered uint64
	// Rejected counts the entries refused with DefenseRejected because the
	// queue was full.
	Rejected uint64
}

// addSync adds the steps of a Sync: an OpSync node for outer, holding one
// for inner (nil: none), holding the section (fn, onError).
func (as AsyncSteps) addSync(outer, inner any, fn ExecFunc, onError ErrorFunc) {
	if fn == nil {
		as.misuse("Sync with a nil step function")
		return
	}
	q := as.target("Sync")
	if q == nil {
		return
	}
	r := as.r
	sec := r.newNode(opcodes.OpExec)
	sec.Fn = r.put(fn)
	if onError != nil {
		sec.Err = r.put(onError)
	}
	if inner != nil {
		s := r.newNode(opcodes.OpSync)
		s.Fn = r.put(inner)
		push(s, sec)
		sec = s
	}
	s := r.newNode(opcodes.OpSync)
	s.Fn = r.put(outer)
	push(s, sec)
	push(q, s)
}

// refusal is why a primitive did not let a flow in or queue it.
type refusal uint8

const (
	accepted refusal = iota // admitted at once or queued: the frame's state tells
	refusedMutexFull
	refusedMutexLoop
	refusedThrottleFull
	refusedThrottleLoop
	refusedCorrupt
)

// refusals are the error code and ErrorInfo of each refusal.
var refusals = [...]struct{ code, info string }{
	refusedMutexFull:    {DefenseRejected, "Mutex queue limit"},
	refusedMutexLoop:    {InternalError, "Mutex used by flows of two loops"},
	refusedThrottleFull: {DefenseRejected, "Throttle queue limit"},
	refusedThrottleLoop: {InternalError, "Throttle used by a flow of another loop"},
	refusedCorrupt:      {InternalError, "corrupt sync instruction"},
}

// stepSync runs OpSync frame n, which the dispatch (runThread) has just
// pushed on thread th. A section entered at once runs in the same turn:
// the dispatch goes on with it (contSame).
func (l *Loop) stepSync(r *root, th, n *Node) {
	why := refusedCorrupt
	switch p := r.slot(n.Fn).(type) {
	case *Mutex:
		why = p.enter(l, r, n)
	case *Throttle:
		why = p.enter(l, r, th, n)
	}
	switch {
	case why != accepted:
		e := &refusals[why]
		r.st().recordError(e.code, e.info)
		l.raise(r, th, e.code)
	case n.Ops().B != syncQueued:
		l.cont = contSame // the section, in this turn, with the values n received
	}
}

// exitSync gives back what OpSync frame n holds as it ends. endFrame calls
// it for every OpSync frame, before the node is freed.
func (l *Loop) exitSync(r *root, n *Node) {
	if n.Ops().B != syncIdle {
		switch p := r.slot(n.Fn).(type) {
		case *Mutex:
			p.exit(l, n)
		case *Throttle:
			p.exit(n)
		}
	}
	n.Ops().A, n.Ops().B = 0, syncIdle
}

// admit marks the queued frame of w admitted in state st, with a for its
// A, and schedules its thread with the values it waited with. The caller
// frees w afterwards.
func (l *Loop) admit(w *waiter, a, st uint64) {
	w.n.Ops().A, w.n.Ops().B = a, st
	l.schedule(w.r, w.th, &w.args)
}
