package vm

import (
	"unsafe"

	"github.com/stepvm/stepvm/opcodes"
)

// runtime.Goexit out of user code. A protected call recovers panics, but a
// Goexit cannot be stopped: the goroutine runs its deferred calls and ends,
// and the frames between the user code and the loop's entry point (pass,
// the dispatch, an unwinding) never finish their work. Each protected call
// that sees one go by records what it was running in Loop.exits and leaves
// depth raised, so that the next pass or Run, on whatever goroutine, finds
// the loop mid-call: it puts the registers back and fails what the Goexit
// abandoned (recoverExits), as a panic of that code would have, instead of
// refusing to run as from inside a callback.

// exitKind is what a Goexit abandoned.
type exitKind uint8

const (
	exitStep     exitKind = iota // a step function: as is its frame
	exitHandler                  // an error handler: as is its frame, th its thread
	exitTeardown                 // a cancel handler or Stack destroy callback of as.r's run as.epoch
	exitCallback                 // an Immediate, Deferred or Post callback, or a root hook: no flow's code
)

type goexit struct {
	kind  exitKind
	as    AsyncSteps
	th    *Node  // the thread of a step or handler
	thSeq uint32 // th.Seq then
}

// What the code a Goexit abandoned is taken to have panicked with.
var (
	errGoexitStep     = &Error{Code: InternalError, Info: "runtime.Goexit in a step function or loop body, which did not return"}
	errGoexitHandler  = &Error{Code: InternalError, Info: "runtime.Goexit in an error handler, which did not return"}
	errGoexitTeardown = &Error{Code: InternalError, Info: "runtime.Goexit in a cancel handler or Stack destroy callback: the flow could not be torn down as it was"}
	errGoexitCallback = &Error{Code: InternalError, Info: "runtime.Goexit in a loop callback (Immediate, Deferred, Post or a root hook), which did not return"}
)

// noteGoexit records that a Goexit is unwinding through a protected call
// that recovered nothing though its callee did not return, and returns
// what the call is taken to have panicked with. It runs for the innermost
// abandoned call first. A step or error handler is found through the
// registers, which still name it (its caller would have put them back
// after the call), not captured by the call's deferred function, which
// would cost every step: a step is the running top frame of the thread
// being dispatched; an error handler, the innermost call's frame, in the
// thread whose handler runs. A teardown names its root, r.
func (l *Loop) noteGoexit(kind exitKind, r *root) any {
	if l.cur != 0 {
		l.exitCur, l.exitCurTh = l.cur, l.curTh
	}
	x := goexit{kind: kind}
	var p any = errGoexitTeardown
	var n *Node
	switch kind {
	case exitCallback:
		l.exits = append(l.exits, x)
		l.leaveAbandoned()
		return errGoexitCallback
	case exitStep:
		p = errGoexitStep
		if l.exitCur == 0 { // no thread dispatched: not a step of the loop's
			return p
		}
		r, x.th = rootAt(l.exitCur), frameAt(l.exitCurTh)
		n = top(x.th)
	case exitHandler:
		p = errGoexitHandler
		if l.inCall == 0 || l.errTh == nil {
			// An error handler that an abandoned call nested in was
			// running: the registers named that call, not this handler,
			// which is left as it is.
			return p
		}
		r, x.th = rootAt(l.errRoot), l.errTh
		n = frameAt(l.inCall)
	}
	x.as = AsyncSteps{r: r, epoch: r.runEpoch}
	if n != nil {
		x.as.n, x.as.seq, x.thSeq = n, n.Seq, x.th.Seq
	}
	if kind == exitTeardown {
		// What the abandoned cancelFrame or destroyStack would have put
		// back: left set, it would refuse the root's other calls.
		r.teardown &^= tearCancel | tearDestroy
	}
	l.exits = append(l.exits, x)
	l.leaveAbandoned()
	return p
}

// leaveAbandoned puts back the registers that tell the VM whose code runs,
// as the abandoned call's caller would have: calls from outside the loop's
// callbacks, made before the next pass, must not be taken for calls of the
// abandoned code (a misuse of theirs would panic out of the caller), and a
// completion from outside must queue the thread it continues rather than
// leave it to a dispatch that is gone. depth stays raised for the next
// pass to recover; cur and curTh wait in exitCur and exitCurTh for an
// enclosing step's record.
func (l *Loop) leaveAbandoned() {
	l.cur, l.curTh = 0, 0 // see exitCur
	l.inCall, l.teardown = 0, 0
	l.errTh, l.errRoot = nil, 0
	l.pend, l.raised, l.raisedIn = pending{}, nil, 0
}

// rootAt returns the root whose rootID is id, which a frame of the
// caller's goroutine holds live: the dispatch or an unwinding that called
// the code the Goexit leaves. (Read through memory, not converted: vet
// checks conversions of integers to pointers.)
func rootAt(id uintptr) *root { return *(**root)(unsafe.Pointer(&id)) }

// goexits tells whether a protected call that recovers nil though its
// callee did not return sees a Goexit: so it does unless GODEBUG has
// panicnil=1, under which panic(nil) recovers as nil and the call returns.
// The loop then leaves a Goexit unhandled, as it did before Go 1.21.
var goexits = func() (nilIsPanicNilError bool) {
	defer func() { nilIsPanicNilError = recover() != nil }()
	panic(nil)
}()

// reenter handles a pass started with depth raised: calls that a Goexit
// abandoned, or a pass started from inside one of the loop's callbacks.
func (l *Loop) reenter() {
	if len(l.exits) == 0 {
		l.nestedPass()
	}
	l.recoverExits()
}

// recoverExits puts the loop's registers back as between passes and
// fails, innermost first, what the Goexits recorded in exits abandoned:
// a step as if it had panicked, an error handler as if it had raised
// InternalError, a teardown by ending its flow with InternalError once the
// rest of its frames are canceled. It runs as part of the pass.
func (l *Loop) recoverExits() {
	l.depth = 0
	l.cur, l.curTh, l.cont = 0, 0, contNone
	l.exitCur, l.exitCurTh = 0, 0
	l.argsCur.clear()
	l.argsNxt.clear()
	l.driven = true
	l.owner.Store(goid()) // the goroutine that drove the loop is gone
	l.inPass = true
	// One at a time from the loop's list: a Goexit out of the code a
	// recovery runs leaves the rest, and its own, to the next pass.
	for len(l.exits) > 0 {
		x := l.exits[0]
		l.exits = l.exits[1:]
		l.recoverExit(x)
	}
	l.exits = nil
}

func (l *Loop) recoverExit(x goexit) {
	if x.kind == exitCallback {
		l.reportPanic(errGoexitCallback)
		return
	}
	r, epoch := x.as.r, x.as.epoch
	if r.runEpoch != epoch {
		return // the run ended in the meantime
	}
	switch x.kind {
	case exitStep:
		if n := x.as.n; r.status != rootRunning || n.Op.IsBase() || x.th.Seq != x.thSeq || top(x.th) != n || n.Seq != x.as.seq {
			recordLate(r, epoch, errGoexitStep) // the step ended during the call
			return
		}
		l.after(r, x.th, x.thSeq, x.as, errGoexitStep)
	case exitHandler:
		f := x.as.n
		if r.status != rootRunning || x.th.Seq != x.thSeq || f.Seq != x.as.seq || top(x.th) != f || f.Flags&opcodes.FlagInError == 0 {
			recordLate(r, epoch, errGoexitHandler) // its Success ended f, or the branch ended
			return
		}
		l.classify(r, errGoexitHandler, &pending{})
		f.Flags &^= opcodes.FlagInError
		if f.Head != 0 {
			r.freeQueue(f)
		}
		l.popFrame(r, x.th, f)
		l.unwind(r, x.th, InternalError)
	case exitTeardown:
		if r.status != rootRunning {
			return
		}
		l.classify(r, errGoexitTeardown, &pending{})
		if l.cancelThread(r, r.base()) && r.status == rootRunning {
			l.finish(r, nil, InternalError, false)
		}
	}
}
