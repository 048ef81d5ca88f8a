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
		v = RaisedError(v)
		r.st().recordError(v.Code, v.Info)
		r.st().recordPanic(v)
		return outError, v.Code
	}
	r.st().recordError(InternalError, fmt.Sprint(p))
	r.st().recordPanic(p)
	return outError, InternalError
}

// runThread runs the next step of the thread task t names, then, while the
// run queue is empty and the budget lasts, the steps the thread schedules
// for itself. The budget counts steps and loop iterations alike: a loop's
// iterations that end at once run back to back on the same budget. A Sync
// section entered at once runs whatever is queued and however much budget
// is left: it is part of its OpSync step's round. The thread stays the
// loop's current one (cur, curTh) after the turn: pass restores them
// before it runs anything else.
//
// Its loop is the interpreter's dispatch: each round executes the next
// instruction of th. It is written out here rather than called, a call
// less per step.
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
		l.cont = contNone
		// The links of f and n are at hand: stored as they are, not
		// converted back from pointers.
		fk := th.Ops().Top()
		f := at(fk)
		nk := f.Head
	dispatch:
		switch {
		case f.Op.IsLoop():
			budget = l.iterate(r, th, f, budget)
		case nk == 0:
			l.complete(r, th, f, l.argsCur)
		default:
			n := pop(f)
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
				p := l.callExec(fn, as, l.argsCur)
				l.leave(prev)
				if returnedLive(r, th, as, p) && n.Head == 0 {
					if n.Next == 0 && n.Flags == opcodes.FlagRunning && l.raised == nil {
						// The common case in line: a plain step (no
						// sub-steps, timer, cancel handler, wait or Stack
						// memory) ended by implicit success (FTN12 1.6):
						// complete's first round, with endFrame reduced to
						// what such a frame holds. The enclosing frame (f)
						// is found again through n: keeping f across the
						// call costs more, in spills.
						pk := n.Parent
						th.Ops().SetTop(pk)
						pf := at(pk)
						pf.Flags &^= opcodes.FlagChild
						switch {
						case pf.Head != 0 || pf.Op.IsLoop():
							r.freeNode(n)
							l.schedule(r, th, nil)
						case pf.Op == opcodes.OpRoot:
							// complete's end of a flow, a call less: a step
							// runs at depth 0, so its flow ends in this turn.
							l.endRun(r, pf, n)
						default:
							r.freeNode(n)
							l.complete(r, th, pf, nil)
						}
						break dispatch
					}
					if n.Flags&opcodes.FlagWait != 0 && l.raised == nil {
						break dispatch // the next common case: the step waits (as in after)
					}
				}
				l.after(r, th, thSeq, as, p)
			case opcodes.OpSuccess:
				vals, _ := r.slot(n.Fn).(*argBuf)
				l.complete(r, th, n, vals) // which copies the values it passes on
				if vals != nil {
					l.giveSuccessBuf(vals)
				}
			case opcodes.OpParallel:
				l.startParallel(r, th, n)
			case opcodes.OpLoop:
				budget = l.iterate(r, th, n, budget)
			case opcodes.OpRepeat:
				n.Ops().A = 0
				budget = l.iterate(r, th, n, budget)
			case opcodes.OpSync:
				l.stepSync(r, th, n)
			default:
				r.st().recordError(InternalError, "corrupt instruction "+n.Op.String())
				l.raise(r, th, InternalError)
			}
		}
		switch l.cont {
		case contNone:
		case contNext:
			if budget > 0 && l.runq.len() == 0 {
				l.argsCur, l.argsNxt = l.argsNxt, l.argsCur
				continue
			}
			l.cont = contNone
			l.pushFlow(r, th, l.argsNxt)
		case contSame:
			// stepSync's section, now, with the values its step received:
			// part of the OpSync step's round, so it takes no budget.
			budget++
			continue
		}
		break
	}
	l.argsCur.clear()
	l.argsNxt.clear() // values a queued continuation took, or one stopped
}

// How the thread being run goes on after its step (Loop.cont).
const (
	contNone uint8 = iota // its turn ends
	contNext              // schedule continued it in line: argsNxt holds its values
	contSame              // stepSync entered a section at once: run it with argsCur
)

// schedule makes thread th runnable with args (nil: no values). The thread
// being run continues inline; any other thread is queued.
func (l *Loop) schedule(r *root, th *Node, args *argBuf) {
	*tok(th)++
	if frameID(th) == l.curTh && rootID(r) == l.cur {
		l.cont = contNext
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
		l.cont = contNone
	}
}

// threadOf returns the base of the thread frame n belongs to.
func threadOf(n *Node) *Node {
	for !n.Op.IsBase() {
		n = at(n.Parent)
	}
	return n
}

// returnedLive reports whether the call that ran the step of handle as on
// thread th returned, leaving the flow, the thread and the step's frame
// running, that frame innermost: the case of after that the dispatch
// (runThread) takes in line (callIterations makes the same test for
// iterate). Within a run, a thread outlives its frames (a branch is freed
// only after they are all popped, and freeing one clears its Seq), so the
// frame's Seq vouches for the thread's: after's test of th.Seq is implied
// here.
func returnedLive(r *root, th *Node, as AsyncSteps, p any) bool {
	return p == nil && r.runEpoch == as.epoch && as.n.Seq == as.seq && top(th) == as.n
}

// after finishes a step call: it raises what the call raised, schedules
// the sub-steps it added, or completes it implicitly (FTN12 1.6) unless it
// waits for an external event.
func (l *Loop) after(r *root, th *Node, thSeq uint32, as AsyncSteps, p any) {
	if l.raised != nil || p != nil {
		p = l.takeRaised(p, as.n)
	}
	if r.runEpoch != as.epoch || th.Seq != thSeq {
		recordLate(r, as.epoch, p) // the flow or this branch ended during the call
		return
	}
	n := as.n
	alive := n.Seq == as.seq
	if p != nil {
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
	if n.Head != 0 {
		l.schedule(r, th, nil)
		return
	}
	if n.Flags&opcodes.FlagWait != 0 {
		return // waits: WaitExternal, a cancel handler or a timeout
	}
	l.complete(r, th, n, nil)
}

// recordLate records p, what user code of run epoch panicked with where
// there is no thread for it to fail (a cancel handler or destroy callback,
// run as frames are torn down, or a call whose thread or run ended during
// it), as LastException only. Once the root has moved past the end of
// that run (released, perhaps reused), its state is no longer the run's:
// p is dropped. An unwinding (Error through the caller's own handle) is no
// panic of the call's own.
func recordLate(r *root, epoch uint32, p any) {
	if p != nil && !isUnwinding(p) && r.runEpoch-epoch <= 1 {
		r.st().recordPanic(p)
	}
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
			if p.Op == opcodes.OpRoot && p.Head == 0 && r.state == nil && l.depth == 0 && n.Op == opcodes.OpExec && n.Flags&opcodes.FlagStack == 0 {
				// The flow's last step ended outside the loop's calls (a
				// reply that a waiting step had a timeout for, say), and
				// nothing hears of its values (no state, so no Future):
				// the end of the run, taken in line as the dispatch's fast
				// path takes it. What the step waited with goes first, as in
				// endFrame, and its error handler's slot, so that endRun
				// finds only n's in use when the run used no other.
				th.Ops().SetTop(n.Parent)
				p.Flags &^= opcodes.FlagChild
				if e := l.ext(n); e != nil {
					l.endExt(r, n, e)
				}
				if n.Err != 0 {
					r.freeSlot(n.Err)
					n.Err = 0
				}
				l.endRun(r, p, n)
				return
			}
			th.Ops().SetTop(n.Parent) // popFrame, in line
			p.Flags &^= opcodes.FlagChild
			l.endFrame(r, th, n)
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
	l.endFrame(r, th, n)
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
		l.destroyStack(r, th, it)
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
			r.handle().Release()
		case r.runEpoch == runEpoch:
			l.cancelRoot(r)
		}
	})
}

// endFrame releases what frame n of thread th holds, then n itself.
func (l *Loop) endFrame(r *root, th, n *Node) {
	if n.Op == opcodes.OpSync {
		l.exitSync(r, n)
	}
	if n.Op == opcodes.OpExec || n.Op == opcodes.OpIter {
		if e := l.ext(n); e != nil {
			l.endExt(r, n, e)
		}
	}
	if n.Flags&opcodes.FlagStack != 0 {
		l.destroyStack(r, th, n)
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

// stopTimer stops the timeout of frame record e, if armed.
func (l *Loop) stopTimer(e *callback) {
	if e.tm != (wheel.Timer{}) {
		l.wheel.Stop(e.tm)
		e.tm, e.r = wheel.Timer{}, nil
	}
}
