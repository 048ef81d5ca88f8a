package vm

import (
	"fmt"
	"unsafe"

	"github.com/stepvm/stepvm/internal/wheel"
	"github.com/stepvm/stepvm/opcodes"
)

// The interpreter. A root runs as one or more threads: its main thread,
// whose base frame is the OpRoot node, and one thread per running branch of
// a parallel step (base: an OpBranch node). A thread's frames form a chain
// from its innermost frame (top(base)) down to the base through Parent;
// each frame queues its sub-steps on Head..Tail.
//
// A thread is in exactly one of three states: running (its step is on the
// Go stack), queued (one task in the run queue, or the inline continuation
// of the thread being run), or waiting (for an external event, a timer, or
// its branches). The base's B field is the thread's wake token: every
// schedule and every unwinding bumps it, so a task queued before is dropped
// when it comes up.
//
// Every call into user code goes through a call* function that recovers
// panics. Error, Break and Continue unwind the user's function by panicking
// with a sentinel; the dispatcher turns what it recovers into an outcome.
// After any user call, the interpreter revalidates what it holds (the run
// epoch, the frame's Seq): user code may have completed, canceled or
// released the flow in the meantime.

// pending is what an unwinding sentinel carries.
type pending struct {
	code  string // outError: the error code
	label string // outBreak, outContinue: the loop label
}

type unwinding struct{ what outcome }

var (
	unwindError    = &unwinding{outError}
	unwindBreak    = &unwinding{outBreak}
	unwindContinue = &unwinding{outContinue}
)

// outcome is how a user call ended.
type outcome uint8

const (
	outReturn outcome = iota
	outError
	outBreak
	outContinue
)

// classify turns what a protected call recovered into an outcome, pd
// being what an unwinding sentinel carries. Errors are recorded in r's
// state; the code (or loop label) is returned.
func (l *Loop) classify(r *root, p any, pd *pending) (outcome, string) {
	switch v := p.(type) {
	case nil:
		return outReturn, ""
	case *unwinding:
		if v.what == outError {
			return outError, pd.code
		}
		return v.what, pd.label
	case *Error:
		if v == nil || v.Code == "" {
			v = codeless(v)
		}
		r.st().recordError(v.Code, v.Info)
		r.st().recordPanic(v)
		return outError, v.Code
	}
	r.st().recordError(InternalError, fmt.Sprint(p))
	r.st().recordPanic(p)
	return outError, InternalError
}

// swallowed reports whether the function of frame n, which has returned,
// called Error, Break or Continue first: it then recovered their panic and
// went on, and what it did next (added steps, waited, returned for
// implicit success) is not for its flow to act on. The flow's state then
// records InternalError, which the caller raises.
func (l *Loop) swallowed(r *root, n *Node) bool {
	if n.Flags&opcodes.FlagRaised == 0 {
		return false
	}
	n.Flags &^= opcodes.FlagRaised
	r.st().recordError(InternalError, "the step's function returned after Error, Break or Continue: "+swallowedInfo)
	return true
}

// swallowedInfo says what a function that swallows the VM's unwinding did
// wrong. (A C function that Go calls directly, not through ffi's step
// calls, does the same with handle_error, breakLoop or continueLoop: no
// panic crosses C.)
const swallowedInfo = "their panic did not reach the VM (a recover must re-panic what IsUnwinding reports)"

// codeless returns the error a panic with e, a *Error without a code (or
// nil), raises: InternalError with e's info, as Error("") does. A flow
// must not end with no code, which reads as success, nor LastException
// hold a nil *Error.
func codeless(e *Error) *Error {
	if e == nil {
		return &Error{Code: InternalError, Info: "panic with a nil *Error"}
	}
	return &Error{Code: InternalError, Info: e.Info}
}

// runThread runs the next step of the thread task t names, then, while the
// run queue is empty and the budget lasts, the steps the thread schedules
// for itself. The thread stays the loop's current one (cur, curTh) after
// the turn: pass restores them before it runs anything else.
func (l *Loop) runThread(t *task) {
	r, th := t.r, at(t.th)
	t.r = nil // the queue must not keep a dropped root alive
	// The epoch check comes first: only then is th known to point into
	// memory this run of r still owns.
	stale := r.runEpoch != t.epoch || th.Seq != t.seq || *tok(th) != t.tok
	// The values move out of the task, which must keep nothing alive.
	switch t.n {
	case 0:
	case 1:
		if !stale {
			l.argsCur.v[0], l.argsCur.n = t.v, 1
		}
		t.v, t.n = Value{}, 0
	default:
		dst := l.argsCur
		if stale {
			dst = nil
		}
		l.unspillArgs(t, dst)
	}
	if stale {
		return // the flow ended, the branch was freed, or it moved on
	}
	l.cur, l.curTh = rootID(r), frameID(th)
	for budget := inlineBudget; ; budget-- {
		l.inline = false
		l.step(r, th)
		if !l.inline {
			break
		}
		l.inline = false
		if budget == 0 || l.runq.len() > 0 {
			l.pushFlow(r, th, l.argsNxt)
			break
		}
		l.argsCur, l.argsNxt = l.argsNxt, l.argsCur
	}
	l.argsCur.clear()
	l.argsNxt.clear() // values a queued continuation took, or one stopped
}

// schedule makes thread th runnable with args (nil: no values). The thread
// being run continues inline; any other thread is queued.
func (l *Loop) schedule(r *root, th *Node, args *argBuf) {
	*tok(th)++
	if frameID(th) == l.curTh && rootID(r) == l.cur {
		l.inline = true
		if args == nil {
			l.argsNxt.clear()
		} else if args != l.argsNxt {
			l.argsNxt.copyFrom(args)
		}
		return
	}
	l.pushFlow(r, th, args)
}

// pushFlow queues a turn of thread th of r with args (nil: no values).
func (l *Loop) pushFlow(r *root, th *Node, args *argBuf) {
	l.runq.room()
	t := l.runq.next() // reused entry: set every field
	t.setThread(r, th)
	switch {
	case args == nil || args.n == 0:
		t.n = 0
	case args.n == 1:
		t.n, t.v = 1, args.v[0]
	default:
		l.spillArgs(t, args)
	}
}

// stopThread drops a pending continuation of th.
func (l *Loop) stopThread(th *Node) {
	*tok(th)++
	if frameID(th) == l.curTh {
		l.inline = false
	}
}

// threadOf returns the base of the thread frame n belongs to.
func threadOf(n *Node) *Node {
	for !n.Op.IsBase() {
		n = at(n.Parent)
	}
	return n
}

// step executes the next instruction of thread th.
func (l *Loop) step(r *root, th *Node) {
	// The links of f and n are at hand: stored as they are, not converted
	// back from pointers.
	fk := th.Ops().Top()
	f := at(fk)
	if f.Op.IsLoop() {
		l.iterate(r, th, f)
		return
	}
	nk := f.Head
	n := pop(f)
	if n == nil {
		l.complete(r, th, f, l.argsCur)
		return
	}
	n.Parent = fk
	n.Flags |= opcodes.FlagRunning
	f.Flags |= opcodes.FlagChild
	th.Ops().SetTop(nk)
	switch n.Op {
	case opcodes.OpExec:
		fn, _ := r.slot(n.Fn).(ExecFunc)
		as := AsyncSteps{r: r, n: n, seq: n.Seq, epoch: r.runEpoch}
		thSeq := th.Seq
		prev := l.enter(frameID(n))
		p := l.callExec(fn, as, Args{l.argsCur})
		l.leave(prev)
		if returnedLive(r, th, as, p) && n.Head == 0 {
			if n.Next == 0 && n.Flags == opcodes.FlagRunning && l.lost == nil {
				// The common case in line: a plain step (no sub-steps, timer,
				// cancel handler, wait or Stack memory) ended by implicit
				// success (FTN12 1.6): complete's first round, with endFrame
				// reduced to what such a frame holds. The enclosing frame (f)
				// is found again through n: keeping f across the call costs
				// more, in spills.
				pk := n.Parent
				th.Ops().SetTop(pk)
				pf := at(pk)
				pf.Flags &^= opcodes.FlagChild
				switch {
				case pf.Head != 0 || pf.Op.IsLoop():
					r.freeNode(n)
					l.schedule(r, th, nil)
				case pf.Op == opcodes.OpRoot:
					// complete's end of a flow, a call less: a step runs
					// at depth 0, so its flow ends in this turn.
					l.endRun(r, pf, n)
				default:
					r.freeNode(n)
					l.complete(r, th, pf, nil)
				}
				return
			}
			if n.Flags&(opcodes.FlagWait|opcodes.FlagRaised) == opcodes.FlagWait && l.lost == nil {
				return // the next common case: the step waits (as in after)
			}
		}
		l.after(r, th, thSeq, as, p)
	case opcodes.OpSuccess:
		vals, _ := r.slot(n.Fn).(*argBuf)
		l.complete(r, th, n, vals)
	case opcodes.OpParallel:
		l.startParallel(r, th, n)
	case opcodes.OpLoop:
		l.iterate(r, th, n)
	case opcodes.OpRepeat:
		n.Ops().A = 0
		l.iterate(r, th, n)
	case opcodes.OpSync:
		l.stepSync(r, th, n)
	default:
		r.st().recordError(InternalError, "corrupt instruction "+n.Op.String())
		l.raise(r, th, InternalError)
	}
}

// returnedLive reports whether the call that ran the step of handle as on
// thread th returned, leaving the flow, the thread and the step's frame
// running, that frame innermost: the case of after that step takes in line
// (callIterations makes the same test for iterate). Within a run, a thread
// outlives its frames (a branch is freed only after they are all popped,
// and freeing one clears its Seq), so the frame's Seq vouches for the
// thread's: after's test of th.Seq is implied here.
func returnedLive(r *root, th *Node, as AsyncSteps, p any) bool {
	return p == nil && r.runEpoch == as.epoch && as.n.Seq == as.seq && top(th) == as.n
}

// after finishes a step call: it raises what the call raised, schedules
// the sub-steps it added, or completes it implicitly (FTN12 1.6) unless it
// waits for an external event.
func (l *Loop) after(r *root, th *Node, thSeq uint32, as AsyncSteps, p any) {
	if l.lost != nil {
		p = l.takeLost(p, as.n)
	}
	if r.runEpoch != as.epoch || th.Seq != thSeq {
		return // the flow or this branch ended during the call
	}
	n := as.n
	alive := n.Seq == as.seq
	if p != nil {
		if alive {
			n.Flags &^= opcodes.FlagRaised // the unwinding reached the VM
		}
		out, code := l.classify(r, p, &l.pend)
		switch out {
		case outError:
			l.raise(r, th, code)
		case outBreak, outContinue:
			if !l.loopControl(r, th, out == outBreak, code) {
				l.raise(r, th, InternalError)
			}
		}
		return
	}
	if !alive || top(th) != n {
		return // completed or unwound during the call
	}
	if l.swallowed(r, n) {
		l.raise(r, th, InternalError)
		return
	}
	if n.Head != 0 {
		l.schedule(r, th, nil)
		return
	}
	if n.Flags&opcodes.FlagWait != 0 {
		return // waits: WaitExternal, a cancel handler or a timeout
	}
	l.complete(r, th, n, nil)
}

// complete ends frame n of thread th with success and args, then every
// enclosing frame whose queue is drained, and schedules what comes next.
func (l *Loop) complete(r *root, th, n *Node, args *argBuf) {
	// The frames' loop is entered only for a frame: a thread's base (the
	// root's, most often) is then completed without the spills its calls
	// need.
	if !n.Op.IsBase() {
		for {
			p := at(n.Parent)
			if p.Op.IsLoop() {
				l.parkIteration(r, th, n)
				l.schedule(r, th, nil) // next iteration
				return
			}
			th.Ops().SetTop(n.Parent) // popFrame, in line
			p.Flags &^= opcodes.FlagChild
			l.endFrame(r, n)
			if p.Head != 0 {
				l.schedule(r, th, args)
				return
			}
			if n = p; n.Op.IsBase() {
				break
			}
		}
	}
	if l.depth > 0 && (frameID(n) == l.curTh || n == l.errTh) {
		// Completed from inside this thread's own call (its step, or an
		// error handler, which a timer or a Resumer may run outside the
		// thread's turn): end it in its next turn, so that misuse later in
		// the same call (a second Success) still fails the flow instead of
		// going unnoticed.
		l.schedule(r, n, args)
		return
	}
	if n.Op == opcodes.OpRoot {
		l.finish(r, args, "", false)
	} else {
		l.branchDone(r, n)
	}
}

// popFrame removes the innermost frame n of thread th and frees it.
func (l *Loop) popFrame(r *root, th, n *Node) {
	p := at(n.Parent)
	th.Ops().SetTop(n.Parent)
	p.Flags &^= opcodes.FlagChild
	l.endFrame(r, n)
}

// parkIteration removes iteration frame it, the innermost frame of thread
// th, releases what it holds (as endFrame does for an OpIter) and parks it
// on its loop for the next iteration, as callIterations does: a loop whose
// iterations add steps reuses one frame too. A loop's Tail is free while an
// iteration runs.
func (l *Loop) parkIteration(r *root, th, it *Node) {
	L := at(it.Parent)
	th.Ops().SetTop(it.Parent)
	L.Flags &^= opcodes.FlagChild
	if e := l.ext(it); e != nil {
		l.endExt(r, it, e)
	}
	if it.Flags&opcodes.FlagStack != 0 {
		l.destroyStack(r, it)
	}
	if it.Head != 0 {
		r.freeQueue(it)
	}
	it.Seq = 0
	L.Tail = link(it)
}

// endExt releases what frame n waits with, and its record e.
func (l *Loop) endExt(r *root, n *Node, e *callback) {
	l.stopTimer(e)
	if e.cancel != 0 {
		r.freeSlot(e.cancel)
	}
	if n.Flags&opcodes.FlagResumer != 0 {
		l.resumers.release(e.resumer)
	}
	l.freeCallback(uint32(n.Next), e)
	n.Next = 0
}

// endLater carries out a Cancel (release false) or Release of r asked for
// by a Stack destroy callback of r's own steps, which cannot happen in
// place (see destroyStack). It runs as an Immediate: before the thread
// whose frame was torn down takes another step (its inline continuation
// yields to queued work), and not at all if the root was released, or for
// a Cancel, if the run ended, meanwhile.
func (l *Loop) endLater(r *root, release bool) {
	rootEpoch, runEpoch := r.rootEpoch, r.runEpoch
	l.Immediate(func() {
		switch {
		case r.rootEpoch != rootEpoch:
		case release:
			l.release(r)
		case r.runEpoch == runEpoch:
			l.cancelRoot(r)
		}
	})
}

// endFrame releases what frame n holds, then n itself.
func (l *Loop) endFrame(r *root, n *Node) {
	if n.Op == opcodes.OpSync {
		l.exitSync(r, n)
	}
	if n.Op == opcodes.OpExec || n.Op == opcodes.OpIter {
		if e := l.ext(n); e != nil {
			l.endExt(r, n, e)
		}
	}
	if n.Flags&opcodes.FlagStack != 0 {
		l.destroyStack(r, n)
	}
	if n.Op.IsLoop() && n.Tail != 0 {
		r.freeNode(at(n.Tail)) // the parked iteration frame
		n.Tail = 0
	}
	if n.Head != 0 {
		r.freeQueue(n)
	}
	r.freeNode(n)
}

// raise unwinds thread th with error code (FTN12 1.2): from the innermost
// frame down, each frame's timeout is stopped and its cancel handler run;
// a frame with an error handler that has not run yet gets the error. The
// handler may Success (the flow continues after that frame), Error (the
// code changes), add steps (they run in the frame's place, the handler is
// retired) or return (unwinding goes on). An error that leaves a branch
// aborts its parallel step; one that leaves the main thread ends the flow.
func (l *Loop) raise(r *root, th *Node, code string) {
	l.recordStack(r, th)
	l.unwind(r, th, code)
}

// unwind carries out raise once the error's async stack is recorded; an
// error leaving a branch continues here, in the parallel step's thread.
func (l *Loop) unwind(r *root, th *Node, code string) {
	epoch := r.runEpoch
	l.stopThread(th)
	for {
		f := top(th)
		if f.Op.IsBase() {
			break
		}
		if !l.cancelFrame(r, f) || r.runEpoch != epoch || f.Seq == 0 {
			return
		}
		if f.Err != 0 && f.Flags&opcodes.FlagInError == 0 &&
			(f.Op == opcodes.OpExec || f.Op == opcodes.OpParallel) {
			var done bool
			if code, done = l.handleError(r, th, f, code); done {
				return
			}
		}
		l.popFrame(r, th, f)
	}
	if th.Op == opcodes.OpRoot {
		l.finish(r, nil, code, false)
		return
	}
	th.Flags |= opcodes.FlagDone
	l.unwind(r, threadOf(at(th.Parent)), code)
}

// handleError runs the error handler of frame f. done reports that the
// handler settled the error; otherwise unwinding goes on with code.
func (l *Loop) handleError(r *root, th, f *Node, code string) (string, bool) {
	if f.Head != 0 {
		r.freeQueue(f)
	}
	epoch, seq, thSeq := r.runEpoch, f.Seq, th.Seq
	h, _ := r.slot(f.Err).(ErrorFunc)
	// A FlagRaised f has already is its step function's, whose unwinding
	// this handler runs nested in (see below): it is not the handler's to
	// answer for, and goes back for after once the handler returns.
	raised := f.Flags & opcodes.FlagRaised
	f.Flags = f.Flags&^opcodes.FlagRaised | opcodes.FlagInError
	prevTh := l.errTh
	l.errTh = th
	// The handler's unwinding must not replace what an unwinding in flight
	// carries: Error through a waiting step's handle from a deferred
	// function of a step that is unwinding with an Error of its own runs
	// this handler nested in that unwinding.
	outer := l.pend
	prev := l.enter(frameID(f))
	p := l.callError(h, AsyncSteps{r: r, n: f, seq: seq, epoch: epoch}, code)
	l.leave(prev)
	if l.lost != nil {
		p = l.takeLost(p, f)
	}
	pd := l.pend
	l.pend = outer
	l.errTh = prevTh
	if r.runEpoch != epoch {
		return "", true
	}
	if f.Seq != seq {
		// Success, then a panic: raised in th if th goes on. A branch its
		// Success ended is freed, and its memory may serve another node
		// already (a Stack destroy callback run on the way allocates).
		if p != nil && th.Seq == thSeq {
			if out, c := l.classify(r, p, &pd); out == outError {
				l.raise(r, th, c)
			}
		}
		return "", true // Success: the flow goes on after f
	}
	if p == nil && l.swallowed(r, f) {
		p = unwindError
		pd.code = InternalError
	}
	f.Flags = f.Flags&^(opcodes.FlagInError|opcodes.FlagRaised) | raised
	out, c := l.classify(r, p, &pd)
	switch out {
	case outReturn:
		if f.Head != 0 {
			r.freeSlot(f.Err)
			f.Err = 0
			l.schedule(r, th, nil)
			return "", true
		}
		return code, false
	case outError:
		if f.Head != 0 {
			r.freeQueue(f)
		}
		return c, false
	}
	if f.Head != 0 {
		r.freeQueue(f)
	}
	if !l.loopControl(r, th, out == outBreak, c) {
		// Raised from f, the error would come back to this handler:
		// it leaves f as an error the handler raised does.
		return InternalError, false
	}
	return "", true
}

// cancelFrame cancels what frame f waits on: the branches of a parallel
// step, its timeout, and its cancel handler, innermost first. It reports
// false if user code ended the flow meanwhile.
func (l *Loop) cancelFrame(r *root, f *Node) bool {
	epoch := r.runEpoch
	switch f.Op {
	case opcodes.OpParallel:
		if f.Flags&opcodes.FlagChild != 0 {
			for k := f.Head; k != 0; {
				b := at(k)
				if b.Flags&opcodes.FlagDone == 0 && !l.cancelThread(r, b) {
					return false
				}
				k = b.Next
			}
			f.Flags &^= opcodes.FlagChild
			r.freeQueue(f)
		}
	case opcodes.OpExec, opcodes.OpIter:
		e := l.ext(f)
		if e == nil {
			break
		}
		l.stopTimer(e)
		if f.Flags&opcodes.FlagResumer != 0 {
			// Its wait is over: a completion that comes now, or is on its
			// way, must not reach the steps an error handler adds in f.
			l.resumers.release(e.resumer)
			f.Flags &^= opcodes.FlagResumer
		}
		if cs := e.cancel; cs != 0 {
			h, _ := r.slot(cs).(CancelFunc)
			e.cancel = 0
			r.freeSlot(cs)
			seq := f.Seq
			f.Flags |= opcodes.FlagCanceling
			was := r.teardown // see Error
			r.teardown |= tearCancel
			p := l.callCancel(h, AsyncSteps{r: r, n: f, seq: seq, epoch: epoch})
			r.teardown = was
			if r.runEpoch != epoch {
				return false
			}
			if f.Seq == seq {
				f.Flags &^= opcodes.FlagCanceling
			}
			if _, ok := p.(*unwinding); p != nil && !ok {
				r.st().recordPanic(p)
			}
		}
	}
	return true
}

// cancelThread unwinds every frame of thread th, running cancel handlers,
// without calling error handlers. It reports false if user code ended the
// flow meanwhile.
func (l *Loop) cancelThread(r *root, th *Node) bool {
	epoch := r.runEpoch
	l.stopThread(th)
	for f := top(th); !f.Op.IsBase(); f = top(th) {
		if !l.cancelFrame(r, f) || r.runEpoch != epoch {
			return false
		}
		if top(th) == f {
			l.popFrame(r, th, f)
		}
	}
	th.Flags |= opcodes.FlagDone
	return true
}

// cancelRoot cancels a running flow (FTN12 2.2.3 cancel).
func (l *Loop) cancelRoot(r *root) {
	if r.status != rootRunning {
		return
	}
	if r.teardown&tearDestroy != 0 {
		l.endLater(r, false)
		return
	}
	if l.cancelThread(r, r.base()) && r.status == rootRunning {
		l.finish(r, nil, "", true)
	}
}

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

// iterate runs the next iteration of loop frame L, or completes L when a
// Repeat has run its count. Iterations whose body returns without adding
// sub-steps or waiting complete on the spot, and while nothing else is
// queued the next one runs in the same turn (as the inline continuation
// would), reusing the iteration frame and the protected call: an empty
// iteration costs a call.
func (l *Loop) iterate(r *root, th, L *Node) {
	thSeq := th.Seq
	var as AsyncSteps
	live, p := l.callIterations(r, th, L, &as)
	n := as.n
	if n == nil { // the Repeat has run its count
		l.complete(r, th, L, nil)
		return
	}
	if live && n.Head != 0 && n.Flags&opcodes.FlagRaised == 0 && l.lost == nil {
		l.schedule(r, th, nil) // after's common case in line: the body added steps
		return
	}
	l.after(r, th, thSeq, as, p)
}

// callIterations runs iterations of L under one recover until one does not
// end by implicit success, the budget runs out, other work is queued, or a
// Repeat has run its count (as.n is nil then). as is the handle of the last
// iteration run; live reports returnedLive of its call, which the loop has
// tested already.
func (l *Loop) callIterations(r *root, th, L *Node, as *AsyncSteps) (live bool, p any) {
	prev := l.enter(0)
	returned := false
	defer func() {
		if !returned { // as in callExec
			p = recover()
			if l.lost != nil {
				p = l.takeLost(p, as.n)
			}
			// live may still be an earlier iteration's, which ended at
			// once: iterate would schedule the sub-steps this one added
			// and drop what it raised.
			live = false
		}
		l.leave(prev)
	}()
	epoch := r.runEpoch
	Lk := th.Ops().Top() // L is the innermost frame
	// rep is set exactly for a Repeat (bodies are not nil), loop otherwise.
	var rep func(AsyncSteps, int)
	var loop func(AsyncSteps)
	if L.Op == opcodes.OpRepeat {
		rep, _ = r.slot(L.Fn).(func(AsyncSteps, int))
	} else {
		loop, _ = r.slot(L.Fn).(func(AsyncSteps))
	}
	for budget := inlineBudget; ; budget-- {
		var i uint64
		if rep != nil {
			o := L.Ops()
			if o.A >= o.B {
				*as = AsyncSteps{}
				returned = true
				return false, nil
			}
			i = o.A
			o.A++
		}
		var it *Node
		itk := L.Tail
		if itk != 0 { // an iteration frame parked by the previous iteration
			it = at(itk)
			L.Tail = 0
			it.Seq = r.nextSeq()
		} else {
			it = r.newNode(opcodes.OpIter)
			itk = link(it)
		}
		it.Parent = Lk
		it.Flags = opcodes.FlagRunning
		L.Flags |= opcodes.FlagChild
		th.Ops().SetTop(itk)
		*as = AsyncSteps{r: r, n: it, seq: it.Seq, epoch: epoch}
		l.inCall = frameID(it)
		if rep != nil {
			rep(*as, int(i))
		} else {
			loop(*as)
		}
		l.inCall = 0
		live = r.runEpoch == epoch && it.Seq == as.seq && th.Ops().Top() == itk
		if !live || it.Head != 0 || it.Next != 0 || it.Flags != opcodes.FlagRunning ||
			budget == 0 || l.runq.len() > 0 || l.lost != nil {
			returned = true
			return live, nil // the caller finishes this iteration as any step
		}
		th.Ops().SetTop(Lk) // implicit success: park the frame for the next iteration
		L.Flags &^= opcodes.FlagChild
		it.Seq = 0
		L.Tail = itk
	}
}

// loopControl carries out Break (brk) or Continue of the innermost loop,
// or of the loop labelled label, unwinding the frames in between (their
// cancel handlers run, their error handlers do not: a break is not an
// error). Leaving a branch aborts its parallel step. With no such loop it
// records the misuse and returns false: the caller raises InternalError
// from where the call was made.
func (l *Loop) loopControl(r *root, th *Node, brk bool, label string) bool {
	var target *Node
	for f := top(th); f != nil; f = parent(f) {
		if f.Op.IsLoop() && (label == "" || r.label(f.Err) == label) {
			target = f
			break
		}
	}
	if target == nil {
		what := "Continue"
		if brk {
			what = "Break"
		}
		info := what + " outside of a loop"
		if label != "" {
			info = what + ": no enclosing loop is labelled " + label
		}
		r.st().recordError(InternalError, info)
		return false
	}
	epoch := r.runEpoch
	l.stopThread(th)
	for f := top(th); f != target; f = top(th) {
		if f.Op.IsBase() { // leave the branch; its siblings go with the parallel
			f.Flags |= opcodes.FlagDone
			th = threadOf(at(f.Parent))
			l.stopThread(th)
			continue
		}
		if !l.cancelFrame(r, f) || r.runEpoch != epoch {
			return true
		}
		l.popFrame(r, th, f)
	}
	if brk {
		l.complete(r, th, target, nil)
	} else {
		l.schedule(r, th, nil)
	}
	return true
}

// finish ends the run of r: with args on success, with code on error, or
// canceled. The root stays usable (State, Add, Execute) until Release.
func (l *Loop) finish(r *root, args *argBuf, code string, canceled bool) {
	if l.cur == rootID(r) {
		l.inline = false
	}
	l.endEpoch(r)
	if r.spawned { // the release cancels a run the end hook restarts
		if r.reports(code) {
			l.report(r, args, code, canceled)
		}
		l.release(r)
		return
	}
	// report comes after the reset (its end hook may execute r again);
	// on the common path, nothing report needs is kept across the reset.
	if r.reports(code) {
		r.resetRun()
		l.report(r, args, code, canceled)
		return
	}
	r.resetRun()
}

// endEpoch ends the run of r: its step handles and queued tasks turn
// stale, and it no longer counts as running.
func (l *Loop) endEpoch(r *root) {
	r.status = rootReady // until resetRun: the root frame is still started
	r.runEpoch++
	l.running--
	r.a.SetMarkAgain(markLive) // a root's arena has its first chunk from newRoot on
}

// endRun is freeNode(n), then finish(r, nil, "", false), for a flow whose
// last step n has just completed in step's fast path (so r is l.cur), with
// root frame b. It takes the common case in line: a run that has no slot in
// use but n's and nothing to report. Its steps mirror freeNode's, finish's
// and resetRun's for that case: n's slot goes with the truncation of the
// tables, and resetRun has no queue to free and a ready root to make idle.
func (l *Loop) endRun(r *root, b, n *Node) {
	if n.Err != 0 || r.state != nil || len(r.slots) != len(r.freeSlots)+1 {
		r.freeNode(n)
		l.finish(r, nil, "", false)
		return
	}
	r.slots[n.Fn-1] = nil
	r.slots, r.freeSlots = r.slots[:0], r.freeSlots[:0]
	n.Seq = 0
	if n.Wide {
		r.a.Recycle(unsafe.Pointer(n), opcodes.WideSize)
	} else {
		r.a.Recycle(unsafe.Pointer(n), opcodes.NodeSize)
	}
	l.inline = false
	l.endEpoch(r)
	b.Seq = 0
	(*rootFrame)(unsafe.Pointer(b)).allocs.Reset()
	r.status = rootIdle
	if !r.a.Settled() {
		r.a.Reset()
	}
	if r.spawned {
		l.release(r) // which finds the run reset
	}
}

// reports tells whether a run that ends with code (or "") has a Future to
// resolve, or a foreign binding's hook to tell.
func (r *root) reports(code string) bool {
	return r.state != nil && (r.state.future != nil || r.state.native != nil) || code != ""
}

// report is finish's rarer part, kept out of its frame: it resolves the
// run's Future, if Promise made one, and tells the foreign binding's hook
// how the run ended.
func (l *Loop) report(r *root, args *argBuf, code string, canceled bool) {
	if st := r.state; st != nil && st.future != nil {
		f := st.future
		st.future = nil
		switch {
		case canceled:
			f.resolve(Args{}, ErrCanceled)
		case code != "":
			f.resolve(Args{}, &Error{Code: code, Info: r.st().errorInfo})
		default:
			f.resolve(Args{args}.detach(), nil)
		}
	}
	if r.state != nil {
		if canceled {
			code = ""
		}
		r.nativeEnded(code)
	}
}

// recordStack saves the entry PCs of the step functions on th's stack,
// innermost last, as the flow's async_stack.
func (l *Loop) recordStack(r *root, th *Node) {
	s := r.st().stack[:0]
	for f := top(th); f != nil; f = parent(f) {
		switch f.Op {
		case opcodes.OpExec:
			if fn, ok := r.slot(f.Fn).(ExecFunc); ok {
				s = append(s, funcPC(fn))
			}
		case opcodes.OpLoop, opcodes.OpRepeat:
			if v := r.slot(f.Fn); v != nil {
				s = append(s, funcPC(v))
			}
		}
	}
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	r.st().stack = s
}

// funcPC returns the entry PC of a func value (or of a func in an any):
// the first word of the closure the interface's data word points to.
func funcPC[F any](fn F) uintptr {
	a := any(fn) // of an any, the interface itself
	type eface struct{ typ, data unsafe.Pointer }
	data := (*eface)(unsafe.Pointer(&a)).data
	if data == nil {
		return 0
	}
	return **(**uintptr)(unsafe.Pointer(&data))
}

// destroyStack runs the destroy callbacks of frame n's Stack allocations,
// newest first, and frees them. Its callers hold frames of r across it (n,
// detached from its thread, and n's parent), so the callbacks must not end
// the run or unwind a thread: n is marked canceling, which makes calls
// through its handle do nothing, and r's teardown tearDestroy (see
// endLater and Error). The parent, which its callers have already told it
// has no child running, is marked as having one again meanwhile, so that
// its handle refuses to complete it (this keeps that cost off the callers'
// common path).
func (l *Loop) destroyStack(r *root, n *Node) {
	owner := stackOwner(n)
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
	for {
		p, d, ok := r.allocs().Take(owner)
		if !ok {
			break
		}
		if d != 0 {
			if fn, ok := r.slot(d).(func(unsafe.Pointer)); ok {
				if v := l.callDestroy(fn, p); v != nil {
					if _, ok := v.(*unwinding); !ok { // Error through n's handle
						r.st().recordPanic(v)
					}
				}
			}
			r.freeSlot(d)
		}
		r.allocs().Free(&r.a, p)
	}
	r.teardown = was
	if n.Parent != 0 {
		p := at(n.Parent)
		p.Flags = p.Flags&^opcodes.FlagChild | parentChild
	}
	n.Flags &^= opcodes.FlagStack
}

// stopTimer stops the timeout of frame record e, if armed.
func (l *Loop) stopTimer(e *callback) {
	if e.tm != (wheel.Timer{}) {
		l.wheel.Stop(e.tm)
		e.tm, e.r = wheel.Timer{}, nil
	}
}
