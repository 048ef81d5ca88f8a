package vm

import (
	"math/bits"
	"time"

	"github.com/stepvm/stepvm/opcodes"
)

// AsyncSteps is a handle on a flow: a root, a running step, or the
// accessor Parallel returns. It is a small value (think netip.Addr) that
// carries generations, so a copy kept past the life of its step or root is
// detected: Valid reports false, and calls through it end as InternalError
// of the calling flow without touching the flow that now uses the memory.
// (A step's generation is a 32-bit stamp of its run: a copy kept while
// the same run goes on for 2^32 more steps may find its stamp given again
// to a step in the same place, and name that step.) The zero value is
// invalid: Valid reports false, State and Tool return
// nil, and any other call panics with an *Error (InternalError), which
// fails the calling flow when made from a step.
//
// Which methods apply where follows FTN12 2.2: the common API anywhere,
// the execution API inside a step's function (Success and Error also in
// its error handler, and from outside while the step waits for an external
// event), the control API on roots only.
type AsyncSteps struct {
	r     *root
	n     *Node // nil: the root itself
	seq   uint32
	epoch uint32
}

// ExecFunc is a step: it receives the values the previous step succeeded
// with.
type ExecFunc func(as AsyncSteps, args Args)

// ErrorFunc handles an error raised by its step or the step's sub-steps.
type ErrorFunc func(as AsyncSteps, code string)

// CancelFunc cancels what a waiting step waits for.
type CancelFunc func(as AsyncSteps)

// ISync is a synchronization primitive steps can enter (FTN12 1.11): Sync
// adds to as the steps that run fn inside the critical section.
type ISync interface {
	Sync(as AsyncSteps, fn ExecFunc, onError ErrorFunc)
}

// frame resolves a handle on a running step.
func (as AsyncSteps) frame() (*Node, bool) {
	r := as.r
	if r == nil || as.n == nil || as.epoch != r.runEpoch || as.n.Seq != as.seq {
		return nil, false
	}
	return as.n, as.n.Flags&opcodes.FlagRunning != 0
}

// notRunning names what as is, a handle that frame refuses, for a misuse
// report.
func (as AsyncSteps) notRunning() string {
	switch {
	case as.r == nil:
		return "a zero handle"
	case as.n == nil:
		return "a root's handle"
	case as.epoch != as.r.runEpoch || as.n.Seq != as.seq:
		return "the handle of a step that has ended"
	}
	return "a parallel accessor"
}

// Valid reports whether the handle can be used (FTN12's boolean cast).
func (as AsyncSteps) Valid() bool {
	if as.nativeValid() {
		return true
	}
	if f := as.foreign(); f != nil { // a foreign stand-in's epochs never match
		return f.Valid()
	}
	return false
}

// nativeValid is Valid for a handle of a flow this VM runs: false for a
// foreign handle, whose stand-in root has no loop, arena or node.
func (as AsyncSteps) nativeValid() bool {
	r := as.r
	return r != nil && (as.n == nil && as.epoch == r.rootEpoch ||
		as.n != nil && as.epoch == r.runEpoch && as.n.Seq == as.seq)
}

// Tool returns the event loop running the flow (FTN12's AsyncTool).
func (as AsyncSteps) Tool() *Loop {
	if as.r == nil {
		return nil
	}
	return as.r.l
}

// State returns the flow's state, or nil for an invalid handle.
func (as AsyncSteps) State() *State {
	if f := as.foreign(); f != nil {
		return f.State()
	}
	if !as.Valid() {
		return nil
	}
	return as.r.st()
}

// misuse reports a violation of the API (FTN12 2.1). Called from a step's
// function or error handler, it raises InternalError in that step's flow by
// panicking into the VM's recovery; called from anywhere else (a loop
// callback, the driving goroutine), it fails root r if r is running, and
// r's next run if r is being set up (see misuseIdle); with no root (a stale
// handle) nothing is left to fail. In a cancel handler or a Stack destroy
// callback it is only recorded in r's state: the flow is already ending.
func (l *Loop) misuse(r *root, info string) { l.misuseIn(r, nil, info) }

// misuseAt is misuse through the handle of frame n, which is valid.
func (l *Loop) misuseAt(r *root, n *Node, info string) { l.misuseIn(r, threadOf(n), info) }

// misuseIn is misuse through the handle of a step of thread th (nil: the
// root's handle, or a parallel accessor not started): from outside a
// call, the error is raised in that thread, where the step's own error
// handlers see it, as a Resumer's misuse is.
func (l *Loop) misuseIn(r *root, th *Node, info string) {
	if l.inCall != 0 { // a step's function or error handler is the caller
		l.raiseMisuse(info)
	}
	if l.teardown > 0 {
		// A cancel handler or destroy callback: the flow is already being
		// canceled or unwound, which must not turn into running error
		// handlers. Record the misuse only, as a panic there is.
		if r != nil {
			r.st().recordLast(InternalError, info)
		}
		return
	}
	switch {
	case r == nil:
	case r.status == rootRunning:
		if th == nil {
			th = r.base()
		}
		r.st().recordError(InternalError, info)
		l.raise(r, th, InternalError)
	default:
		r.misuseIdle(info)
	}
}

// misuseIdle reports misuse in setting up root r, which does not run: no
// flow runs to fail yet, so r's next run fails, before any step it has
// runs, with InternalError and info, as if its first step raised it. The
// first report of a set-up wins: the step that raises it is queued once.
func (r *root) misuseIdle(info string) {
	st := r.st()
	if st.misused {
		return
	}
	st.misused = true
	b := r.base()
	if b.Seq == 0 {
		b = r.newBase()
	}
	n := r.newNode(opcodes.OpExec)
	n.Fn = r.put(ExecFunc(func(as AsyncSteps, _ Args) {
		as.r.st().misused = false // run: a new report may queue another
		as.Error(InternalError, info)
	}))
	k := link(n) // first in the root's queue, ahead of the steps added
	n.Next = b.Head
	b.Head = k
	if b.Tail == 0 {
		b.Tail = k
	}
}

// raiseMisuse panics with an InternalError carrying info (see raiseInCall).
func (l *Loop) raiseMisuse(info string) {
	l.raiseInCall(&Error{Code: InternalError, Info: info})
}

// raiseInCall panics with p, which the VM acts on, out of the function
// being called. Inside the call of a frame's function or error handler it
// also keeps p until that call returns (takeRaised), so that the call's
// flow fails even if the function recovers the panic and returns. An
// Error, Break or Continue after what the same call raised before has not
// let that reach the VM either: the first misuse report, or InternalError
// for a swallowed unwinding, stays what the flow fails with, not the new
// code or a loop's Break.
func (l *Loop) raiseInCall(p any) {
	if l.inCall != 0 {
		if isUnwinding(p) && l.raisedIn == l.inCall {
			p = l.raised
			if isUnwinding(p) {
				p = &Error{Code: InternalError, Info: "Error, Break or Continue after Error, Break or Continue: " + swallowedInfo}
			}
		}
		l.raised, l.raisedIn = p, l.inCall
	}
	panic(p)
}

// takeRaised returns what the call of frame n that has just returned
// raised: p, or, if the function recovered what it raised for the VM and
// went on, an InternalError saying so. What a call nested in n's raised
// (another flow's error handler, say) waits for that call's return. Its
// callers call it whenever the call panicked: an unwinding sentinel that
// the loop did not raise in that call is another loop's (see strayInfo).
func (l *Loop) takeRaised(p any, n *Node) any {
	if l.raisedIn != frameID(n) {
		return stray(p)
	}
	q := l.raised
	l.raised, l.raisedIn = nil, 0
	if p != nil {
		if !isUnwinding(q) && p != q {
			// A misuse report that the function recovered while it
			// panicked or unwound for another reason (a deferred function
			// of a step that is unwinding with its Error): the report
			// stands, as it does for a function that returns.
			return q
		}
		return p
	}
	if isUnwinding(q) {
		return &Error{Code: InternalError, Info: "the step's function returned after Error, Break or Continue: " + swallowedInfo}
	}
	return q // a misuse report
}

// stray returns p, what a call panicked with that the loop did not raise
// in it, or, for an unwinding sentinel, an InternalError saying strayInfo.
func stray(p any) any {
	if isUnwinding(p) {
		return &Error{Code: InternalError, Info: strayInfo}
	}
	return p
}

// strayInfo fails a call that an unwinding of another loop passed through:
// Error, Break or Continue through the handle of a step of another loop,
// whose call is further down the Go stack, from code this call ran (a step
// of that loop completes a waiting step of this one, whose error handler
// raises through the first step's handle). Its code or label is in the
// other loop's registers, not in this one's pend, which holds a stale one;
// the other flow fails as one whose function swallowed its Error.
const strayInfo = "Error, Break or Continue of a step of another loop, whose call is further down the stack, unwound this call"

// swallowedInfo says what a function that swallows the VM's unwinding did
// wrong. (A C function that Go calls directly, not through ffi's step
// calls, does the same with handle_error, breakLoop or continueLoop: no
// panic crosses C.)
const swallowedInfo = "their panic did not reach the VM (a recover must re-panic what IsUnwinding reports)"

// misuse reports misuse through a handle that may be invalid.
func (as AsyncSteps) misuse(info string) {
	if f := as.foreign(); f != nil {
		f.Misuse(info)
		return
	}
	r := as.r
	if r == nil {
		zeroHandle(info)
	}
	if as.n == nil && as.epoch == r.rootEpoch {
		r.l.misuse(r, info)
		return
	}
	if as.n != nil && as.epoch == r.runEpoch && as.n.Seq == as.seq {
		r.l.misuseIn(r, handleThread(as.n), info)
		return
	}
	r.l.misuse(nil, info) // stale: only the calling flow may be failed
}

// handleThread returns the thread of the valid handle's node n, or nil
// for a parallel accessor whose step has not started: n has no parent
// yet (threadOf would not end), and no thread of its own.
func handleThread(n *Node) *Node {
	if n.Flags&opcodes.FlagRunning == 0 {
		return nil
	}
	return threadOf(n)
}

// zeroHandle reports a call through the zero AsyncSteps, which names no
// loop to report to: it panics with InternalError. Inside a step's function
// or handler the VM recovers that and fails the calling flow; elsewhere it
// is a programming error, like calling a method through a nil pointer.
func zeroHandle(what string) {
	panic(&Error{Code: InternalError, Info: what + " through the zero AsyncSteps"})
}

// target returns the node whose queue steps added through as go to.
func (as AsyncSteps) target(what string) *Node {
	r := as.r
	if r == nil {
		zeroHandle(what)
	}
	if as.n == nil {
		if as.epoch != r.rootEpoch {
			if f := as.foreign(); f != nil { // a foreign stand-in's epochs never match
				foreignTarget(f, what)
				return nil
			}
			r.l.misuse(nil, what+" on a released root")
			return nil
		}
		if r.status == rootRunning {
			r.l.misuse(r, what+" on a running root: add sub-steps inside a step")
			return nil
		}
		if b := r.base(); b.Seq != 0 {
			return b
		}
		return r.newBase()
	}
	n := as.n
	if as.epoch != r.runEpoch || n.Seq != as.seq {
		r.l.misuse(nil, what+" through the handle of a step that has ended")
		return nil
	}
	switch {
	case n.Flags&opcodes.FlagRunning == 0: // a parallel accessor
		return n
	case n.Flags&opcodes.FlagCanceling != 0:
		return nil
	case frameID(n) == r.l.inCall:
		return n
	case n.Op == opcodes.OpParallel:
		r.l.misuseAt(r, n, what+" on a parallel step that has already started")
	default:
		r.l.misuseAt(r, n, what+" outside of the step's execution")
	}
	return nil
}

// quickTarget is target's two common cases, inlined: the base of a live,
// ready root (one that has a root frame since steps were added or it left
// the pool), and the step that is being called. It returns nil where
// target must decide. It is small enough to inline (cost 77 of 80).
func (as AsyncSteps) quickTarget() *Node {
	r, n := as.r, as.n
	switch {
	case r == nil:
	case n == nil:
		if as.epoch == r.rootEpoch && r.status == rootReady {
			return r.base()
		}
	case frameID(n) == r.l.inCall && as.epoch == r.runEpoch && n.Seq == as.seq && n.Flags&opcodes.FlagCanceling == 0:
		return n
	}
	return nil
}

// Add adds a step with an optional error handler: on a root, to level 0;
// inside a step, as a sub-step; on a parallel accessor, as a branch.
func (as AsyncSteps) Add(fn ExecFunc, onError ...ErrorFunc) AsyncSteps {
	var eh ErrorFunc
	if len(onError) > 0 {
		eh = onError[0]
	}
	return as.addExec(fn, eh, 0, 0)
}

// addExec queues an OpExec step; a and b are operands for AddNative.
func (as AsyncSteps) addExec(fn ExecFunc, eh ErrorFunc, a, b uint64) AsyncSteps {
	if fn == nil {
		as.misuse("Add with a nil step function")
		return as
	}
	q := as.quickTarget()
	if q == nil {
		if q = as.target("Add"); q == nil {
			if f := as.foreign(); f != nil { // Add's dispatch, off its path
				foreignAdd(f, fn, eh, a|b != 0)
			}
			return as
		}
	}
	r := as.r
	var n *Node
	if a|b == 0 {
		// newNode, spelled out (allocNode is too large to inline): a
		// call less per Add. Reuse and Alloc return zeroed blocks, so
		// the node is narrow.
		p := r.a.Reuse(opcodes.NodeSize)
		if p == nil {
			p = r.carve(false)
		}
		n = (*Node)(p)
		n.Op = opcodes.OpExec
		n.Seq = r.nextSeq()
	} else {
		n = r.allocNode(opcodes.OpExec, true)
		o := n.Ops()
		o.A, o.B = a, b
	}
	// put, spelled out for its common case (put is too large to inline).
	if i := bits.TrailingZeros64(^r.used); i < inlineSlots {
		r.used |= 1 << i
		r.slotBuf[i] = fn
		n.Fn = uint32(i + 1)
	} else {
		n.Fn = r.putMore(fn)
	}
	if eh != nil {
		n.Err = r.put(eh)
	}
	push(q, n)
	return as
}

// Parallel adds a step whose branches run concurrently, and returns the
// accessor that adds branches (with Add, Loop, Repeat, ForEach). The step
// succeeds, with no values, once every branch has; the first error cancels
// the other branches and goes to onError.
func (as AsyncSteps) Parallel(onError ...ErrorFunc) AsyncSteps {
	if f := as.foreign(); f != nil {
		return f.Parallel(firstErrorFunc(onError))
	}
	q := as.target("Parallel")
	if q == nil {
		return AsyncSteps{}
	}
	r := as.r
	n := r.newNode(opcodes.OpParallel)
	if len(onError) > 0 && onError[0] != nil {
		n.Err = r.put(onError[0])
	}
	push(q, n)
	return AsyncSteps{r: r, n: n, seq: n.Seq, epoch: r.runEpoch}
}

// SuccessStep adds a step that succeeds with vals (FTN12 1.12).
func (as AsyncSteps) SuccessStep(vals ...Value) AsyncSteps {
	if f := as.foreign(); f != nil {
		foreignSuccessStep(f, vals)
		return as
	}
	if len(vals) > MaxArgs {
		as.misuse("SuccessStep with more than 4 values")
		return as
	}
	q := as.target("SuccessStep")
	if q == nil {
		return as
	}
	r := as.r
	n := r.newNode(opcodes.OpSuccess)
	b := r.l.takeSuccessBuf()
	b.set(vals)
	n.Fn = r.put(b)
	push(q, n)
	return as
}

// maxSuccessBufs bounds the value buffers a loop keeps for SuccessStep.
const maxSuccessBufs = 256

// takeSuccessBuf returns an empty buffer for the values of a SuccessStep
// step: one a step that ran gave back, or a new one. A step's buffer is
// its own (copyQueue copies a model's), so the step gives it back once it
// has run (giveSuccessBuf); one whose step never runs goes with the step.
func (l *Loop) takeSuccessBuf() *argBuf {
	if k := len(l.succBufs); k > 0 {
		b := l.succBufs[k-1]
		l.succBufs[k-1] = nil
		l.succBufs = l.succBufs[:k-1]
		return b
	}
	return new(argBuf)
}

// giveSuccessBuf takes back the buffer of a SuccessStep step that has run.
func (l *Loop) giveSuccessBuf(b *argBuf) {
	b.clear()
	if len(l.succBufs) < maxSuccessBufs {
		l.succBufs = append(l.succBufs, b)
	}
}

// Sync adds a step that runs fn inside obj's critical section (FTN12
// 1.11.3).
func (as AsyncSteps) Sync(obj ISync, fn ExecFunc, onError ...ErrorFunc) AsyncSteps {
	if f := as.foreign(); f != nil {
		f.Sync(obj, fn, firstErrorFunc(onError))
		return as
	}
	if obj == nil || fn == nil {
		as.misuse("Sync with a nil object or step function")
		return as
	}
	var eh ErrorFunc
	if len(onError) > 0 {
		eh = onError[0]
	}
	obj.Sync(as, fn, eh)
	return as
}

// Success completes the step with up to four values for the next step.
// A step that added sub-steps completes when they do; calling Success on it
// is an InternalError.
func (as AsyncSteps) Success(vals ...Value) {
	n, ok := as.frame()
	if !ok {
		if f := as.foreign(); f != nil { // a foreign stand-in has no frame
			foreignSuccess(f, vals)
			return
		}
		as.misuse("Success through " + as.notRunning() + ": only a running step can succeed")
		return
	}
	r := as.r
	if n.Flags&opcodes.FlagCanceling != 0 {
		return
	}
	if n.Head != 0 || n.Flags&opcodes.FlagChild != 0 {
		r.l.misuseAt(r, n, "Success after sub-steps were added: the step completes when they do")
		return
	}
	if r.l.raisedIn == frameID(n) && r.l.inCall == frameID(n) { // else an external completion while n unwinds
		r.l.misuseAt(r, n, "Success after Error, Break, Continue or a misuse report: "+swallowedInfo)
		return
	}
	if n.Op == opcodes.OpParallel && n.Flags&opcodes.FlagInError == 0 {
		r.l.misuseAt(r, n, "Success on a parallel step")
		return
	}
	if len(vals) > MaxArgs {
		r.l.misuseAt(r, n, "Success with more than 4 values")
		return
	}
	var args *argBuf // nil: no values, and no buffer to clear
	if len(vals) > 0 {
		var b argBuf
		b.set(vals)
		args = &b
	}
	r.l.complete(r, threadOf(n), n, args)
}

// Error completes the step with an error: code goes to the error handlers
// (FTN12 1.2) and info becomes the state's ErrorInfo. Inside the step's
// function or error handler it does not return: it unwinds to the VM with
// a panic the function must let pass (IsUnwinding reports it); a function
// that recovers it and goes on fails its flow with InternalError.
// Called from elsewhere on the loop (say, a timer callback while the step
// waits for an external event) it delivers the error and returns; from
// the step's own cancel handler or Stack destroy callback, it returns and
// does nothing, as the step is ending already.
func (as AsyncSteps) Error(code string, info ...string) {
	n, ok := as.frame()
	if !ok {
		if as.foreignError(code, info) { // a foreign stand-in has no frame
			return
		}
		as.misuse("Error through " + as.notRunning() + ": only a running step can fail")
		return
	}
	r := as.r
	l := r.l
	var inf string
	if len(info) > 0 {
		inf = info[0]
	}
	if code == "" {
		code = InternalError
	}
	if frameID(n) == l.inCall && n.Head != 0 && n.Flags&opcodes.FlagInError == 0 {
		// FTN12 2.1: a step that added sub-steps must not call error(). (An
		// error handler may: its Error changes the code, FTN12 2.1.)
		inf = "Error(" + code + ") after sub-steps were added: a step with sub-steps completes when they do"
		code = InternalError
	}
	if n.Flags&opcodes.FlagCanceling != 0 {
		if l.inCall == 0 {
			// From a cancel handler or destroy callback, which runs in
			// no step's call: calls through the handle of a step being
			// torn down do nothing.
			return
		}
		l.pend.code = code
		l.raiseInCall(unwindError) // recorded, when called from an error handler, as its own
	}
	if frameID(n) == l.inCall {
		l.pend.code = code
		r.st().recordError(code, inf)
		l.raiseInCall(unwindError)
	}
	if n.Flags&opcodes.FlagChild != 0 && n.Flags&opcodes.FlagInError == 0 {
		l.misuseAt(r, n, "Error through the handle of a step whose sub-steps are running")
		return
	}
	if r.teardown != 0 {
		// A cancel handler or destroy callback of the same flow: the VM
		// is unwinding frames it holds (a parallel step's branches, say),
		// which a second unwinding would free under it.
		l.misuseAt(r, n, "Error from a cancel handler or Stack destroy callback of the same flow")
		return
	}
	// Recorded only once it is raised: a refused Error must not replace
	// the ErrorInfo of the error a cancel handler's unwinding carries.
	r.st().recordError(code, inf)
	l.raise(r, threadOf(n), code)
}

// running returns the frame of a step that may configure itself: one that
// runs, is not being canceled and has no running sub-step.
func (as AsyncSteps) running(what string) (*Node, bool) {
	n, ok := as.frame()
	if !ok || n.Op.IsLoop() || n.Op == opcodes.OpParallel {
		if f := as.foreign(); f != nil {
			foreignRunning(f, what)
			return nil, false
		}
		as.misuse(what + " outside of a running step")
		return nil, false
	}
	if n.Flags&opcodes.FlagCanceling != 0 {
		return nil, false
	}
	if n.Flags&(opcodes.FlagChild|opcodes.FlagInError) != 0 {
		if n.Flags&opcodes.FlagInError != 0 {
			// FTN12 2.2.2: the Execution API but Success and Error is for
			// the step's function. From its error handler it would set up
			// a wait that the handler's return, Success or Error drops.
			as.r.l.misuseAt(as.r, n, what+" in an error handler: only a step's function may wait")
			return nil, false
		}
		as.r.l.misuseAt(as.r, n, what+" on a step whose sub-steps are running")
		return nil, false
	}
	return n, true
}

// configurable is running's test, without its reports: it inlines.
func (as AsyncSteps) configurable() (*Node, bool) {
	n, ok := as.frame()
	return n, ok && n.Flags&(opcodes.FlagCanceling|opcodes.FlagChild|opcodes.FlagInError) == 0 &&
		!n.Op.IsLoop() && n.Op != opcodes.OpParallel
}

// unconfigurable is the way out of SetTimeout and SetCancel when
// configurable fails: it returns the Foreign a stand-in dispatches to (it
// has no frame), or reports why the step cannot be configured and returns
// nil. It stays apart so that the callers' common path holds no call.
func (as AsyncSteps) unconfigurable(what string) Foreign {
	f := as.foreign()
	if f == nil {
		as.running(what)
	}
	return f
}

// SetTimeout makes the step fail with Timeout unless it completes within
// d; a second call replaces the first. It disables implicit success: a
// step that adds no sub-steps then waits for Success or Error. One that
// adds sub-steps (before or after the call, in its function) completes
// when they do, as any step, and the time covers them: a step that sets a
// timeout and adds the work, a Parallel say, bounds the whole of it.
// From the step's error handler, on a step whose sub-steps run, or through
// a handle that is not a running step's, it is misuse (InternalError).
func (as AsyncSteps) SetTimeout(d time.Duration) {
	n, ok := as.configurable()
	if !ok {
		if f := as.unconfigurable("SetTimeout"); f != nil {
			f.SetTimeout(d)
		}
		return
	}
	r := as.r
	l := r.l
	n.Flags |= opcodes.FlagWait
	var e *callback
	if n.Next != 0 { // extOf, spelled out: only an existing record has a timer to stop
		e = &l.cbs[n.Next]
		l.stopTimer(e)
	} else {
		e = r.newExt(n)
	}
	// arm, its common case in line
	if l.inPass {
		e.tm = l.wheel.AddAfter(int64(max(d, 0)), timerData(uint32(n.Next), e))
		e.r = r // kept alive until the timeout fires or stops
		return
	}
	// Between passes: a clock that panics leaves the step waiting with e
	// but no timer, and nothing that keeps its root from being collected.
	l.arm(uint32(n.Next), e, d, l.now())
	e.r = r
}

// SetCancel sets the function that cancels what the step waits for; it runs
// when the flow is canceled, times out, or fails past this step. It
// disables implicit success. Where it may be called is as for SetTimeout.
func (as AsyncSteps) SetCancel(fn CancelFunc) {
	n, ok := as.configurable()
	if !ok {
		if f := as.unconfigurable("SetCancel"); f != nil {
			f.SetCancel(fn)
		}
		return
	}
	if fn == nil {
		return
	}
	r := as.r
	n.Flags |= opcodes.FlagWait
	e := r.extOf(n)
	if e.cancel != 0 {
		r.setSlot(e.cancel, fn)
		return
	}
	e.cancel = r.put(fn)
}

// WaitExternal disables implicit success: the step waits until Success or
// Error is called on it (FTN12 1.6). Where it may be called is as for
// SetTimeout.
func (as AsyncSteps) WaitExternal() {
	n, ok := as.configurable()
	if !ok {
		if f := as.unconfigurable("WaitExternal"); f != nil {
			f.WaitExternal()
		}
		return
	}
	n.Flags |= opcodes.FlagWait
}

// Execute starts a root (FTN12 2.2.3). The first step runs in a later turn
// of the loop. Executing a root that is still running is an InternalError
// of that flow.
func (as AsyncSteps) Execute() {
	r := as.r
	if r == nil || as.n != nil || as.epoch != r.rootEpoch {
		if f := as.foreign(); f != nil { // a foreign stand-in's epochs never match
			f.Execute()
			return
		}
		as.misuse("Execute on a handle that is not a live root")
		return
	}
	l := r.l
	if r.status == rootRunning || r.teardown&tearRelease != 0 {
		r.refuseStart("Execute")
		return
	}
	b := r.base()
	if b.Seq == 0 { // a root run before and executed again with no step added
		b = r.newBase() // which makes it ready: first, then running
	}
	r.status = rootRunning
	l.running++
	r.a.SetMarkAgain(markLive | markRunning) // newRoot's SetMark took the first chunk
	// pushFlow(r, b, nil), without the call: each piece inlines.
	l.runq.room()
	t := l.runq.next()
	t.setThread(r, b)
	t.n = 0
}

// refuseStart reports the misuse of starting r (what: Execute or Promise)
// while it runs, or while Release cancels it: a cancel handler that
// restarted its root then would leave a released root running.
func (r *root) refuseStart(what string) {
	if r.teardown&tearRelease != 0 {
		r.l.misuse(r, what+" on a root that is being released")
		return
	}
	r.l.misuse(r, what+" on a root that is still running")
}

// Cancel cancels a running root: cancel handlers run innermost first, and
// no further step runs. The flow's Future reports ErrCanceled. Cancel of a
// root that is not running does nothing.
func (as AsyncSteps) Cancel() {
	r := as.r
	if r == nil || as.n != nil || as.epoch != r.rootEpoch {
		if f := as.foreign(); f != nil { // a foreign stand-in's epochs never match
			f.Cancel()
			return
		}
		as.misuse("Cancel on a handle that is not a live root")
		return
	}
	r.l.cancelRoot(r)
}

// Release returns a root to the loop's pool; every handle on it turns
// invalid. A running root is canceled first. (The VM releases roots, a
// spawned one as its flow ends, through their handle: the release is
// written out here, a call less on Release's path.)
func (as AsyncSteps) Release() {
	r := as.r
	if r == nil || as.n != nil || as.epoch != r.rootEpoch {
		if f := as.foreign(); f != nil { // a foreign stand-in's epochs never match
			f.Release()
			return
		}
		as.misuse("Release on a handle that is not a live root")
		return
	}
	l := r.l
	if r.teardown&(tearRelease|tearDestroy) != 0 { // one test on the common path
		if r.teardown&tearRelease == 0 {
			l.endLater(r, true)
		}
		return // else again, from a handler the cancel below runs: the first call releases r
	}
	if r.status == rootRunning {
		r.teardown |= tearRelease
		l.cancelRoot(r)
		r.teardown &^= tearRelease
	}
	r.nativeReleased()
	r.rootEpoch++
	r.runEpoch++
	if r.base().Seq != 0 { // else the run's end has reset it, and nothing was added since
		r.resetRun()
	}
	if r.state != nil {
		r.state.reset()
		r.state.future = nil
	}
	r.spawned = false
	l.roots--
	if len(l.pool) < l.poolMax {
		// A pooled root keeps markLive (newRoot's, or its run's end's) for
		// newRoot: the pool keeps it reachable, so its cleanup, the mark's
		// only reader, cannot run while the loop is alive and open.
		l.pool = append(l.pool, r)
		return
	}
	// The root is dropped: its cleanup returns the arena (kept whole until
	// then, since stale handles may still reach the root) once it is
	// collected. resetRun has trimmed it to at most arena.KeepBytes.
	r.a.SetMark(markReleased)
}

// Spawn runs fn as a new root from the loop's pool, released when it
// completes: the one-flow-per-request pattern. Nothing reports how the
// flow ended: an error that onError does not settle ends it unheard (a
// flow whose outcome matters takes a root of its own, with Promise). A nil
// fn spawns nothing and, called from a step, fails that step's flow.
func (l *Loop) Spawn(fn ExecFunc, onError ...ErrorFunc) {
	if fn == nil {
		// Refused before the root is drawn: Add's refusal, made from a
		// step, would unwind past the Execute that releases the root.
		l.misuse(nil, "Spawn with a nil step function")
		return
	}
	r := l.newRoot()
	r.spawned = true
	as := r.handle()
	as.Add(fn, onError...)
	as.Execute()
}

// NewInstance returns a new root on the same loop.
func (as AsyncSteps) NewInstance() AsyncSteps {
	if f := as.foreign(); f != nil {
		return f.NewInstance()
	}
	if !as.Valid() {
		// Misuse as through any other stale handle: its root may serve
		// another flow now, and the zero handle names no loop at all.
		as.misuse("NewInstance through a handle that is no longer valid")
		return AsyncSteps{}
	}
	return as.r.l.NewSteps()
}

// CopyFrom copies the steps queued on model's level 0 to as, and the state
// variables as lacks (FTN12 1.5). The model is not executed; its closures
// are shared, not recreated. (Of a running root, what is copied is what is
// still queued at level 0.) A model of another loop may be copied when
// both loops are driven by the calling goroutine: CopyFrom reads the
// model's memory, which belongs to its loop's goroutine.
func (as AsyncSteps) CopyFrom(model AsyncSteps) AsyncSteps {
	if f := as.foreign(); f != nil {
		f.Misuse("CopyFrom on a foreign flow")
		return as
	}
	m := model.r
	if m == nil || model.n != nil || model.epoch != m.rootEpoch {
		as.misuse("CopyFrom of a model that is not a live root")
		return as
	}
	q := as.target("CopyFrom")
	if q == nil {
		return as
	}
	r := as.r
	if b := m.base(); b.Seq != 0 {
		r.copyQueue(q, m, b)
	}
	r.st().copyMissing(m.state)
	return as
}

// Clone returns a new root with the steps and state of this one.
func (as AsyncSteps) Clone() AsyncSteps {
	if f := as.foreign(); f != nil {
		f.Misuse("Clone of a foreign flow")
		return AsyncSteps{}
	}
	if as.r == nil || as.n != nil || as.epoch != as.r.rootEpoch {
		as.misuse("Clone of a handle that is not a live root")
		return AsyncSteps{}
	}
	c := as.r.l.NewSteps()
	return c.CopyFrom(as)
}

// copyQueue appends copies of the nodes queued on from (of root m) to q.
func (r *root) copyQueue(q *Node, m *root, from *Node) {
	last := from.Tail
	for k := from.Head; k != 0; {
		s := at(k)
		c := r.allocNode(s.Op, s.Wide)
		if s.Op == opcodes.OpSuccess {
			// A buffer of its own: a step gives its buffer back once it has
			// run, and the model (or its own run) may still use this one.
			own := r.l.takeSuccessBuf()
			if b, ok := m.slot(s.Fn).(*argBuf); ok {
				own.copyFrom(b)
			}
			c.Fn = r.put(own)
		} else {
			c.Fn = r.copySlot(m, s.Fn)
		}
		c.Err = r.copySlot(m, s.Err)
		if s.Wide {
			*c.Ops() = *s.Ops()
		}
		if s.Head != 0 {
			r.copyQueue(c, m, s)
		}
		push(q, c)
		if k == last {
			break
		}
		k = s.Next
	}
}

func (r *root) copySlot(m *root, i uint32) uint32 {
	if i == 0 {
		return 0
	}
	j := r.put(m.slot(i))
	if l := m.label(i); l != "" {
		r.setLabel(j, l)
	}
	return j
}
