package vm

import "github.com/stepvm/stepvm/opcodes"

// Errors and cancellation (FTN12 1.2, 1.3). An error unwinds its thread
// from the innermost frame down: each frame on the way stops its timeout,
// runs its cancel handler, then its error handler if it has one that has
// not run. Canceling a root cancels every thread it runs the same way,
// error handlers aside.

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
	f.Flags |= opcodes.FlagInError
	prevTh, prevRoot := l.errTh, l.errRoot
	l.errTh, l.errRoot = th, rootID(r)
	// The handler's unwinding must not replace what an unwinding in flight
	// carries: Error through a waiting step's handle from a deferred
	// function of a step that is unwinding with an Error of its own runs
	// this handler nested in that unwinding. That step may be f itself, so
	// what its function raised waits aside while f's handler runs.
	outer, outerRaised, outerIn := l.pend, l.raised, l.raisedIn
	l.raised, l.raisedIn = nil, 0
	prev := l.enter(frameID(f))
	p := l.callError(h, AsyncSteps{r: r, n: f, seq: seq, epoch: epoch}, code)
	l.leave(prev)
	if l.raised != nil || p != nil {
		p = l.takeRaised(p, f)
	}
	pd := l.pend
	l.pend, l.raised, l.raisedIn = outer, outerRaised, outerIn
	l.errTh, l.errRoot = prevTh, prevRoot
	if r.runEpoch != epoch {
		recordLate(r, epoch, p)
		return "", true
	}
	if f.Seq != seq {
		// Success, then a panic: raised in th if th goes on. A branch its
		// Success ended is freed, and its memory may serve another node
		// already (a Stack destroy callback run on the way allocates).
		if th.Seq != thSeq {
			recordLate(r, epoch, p)
		} else if p != nil {
			if out, c := l.classify(r, p, &pd); out == outError {
				l.raise(r, th, c)
			}
		}
		return "", true // Success: the flow goes on after f
	}
	f.Flags &^= opcodes.FlagInError
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
			recordLate(r, epoch, p)
			if r.runEpoch != epoch {
				return false
			}
			if f.Seq == seq {
				f.Flags &^= opcodes.FlagCanceling
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
