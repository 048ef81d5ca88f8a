package vm

import "unsafe"

// Protected calls into user code. Each recovers whatever the callee panics
// with (the VM's own unwinding sentinels included) and returns it, so that
// neither a user panic nor an Error escapes into the loop. They are
// separate functions so that the deferred recover is open-coded and costs
// a few nanoseconds when nothing panics; the step calls skip even the
// runtime call of recover when the callee returned.

// callExec and callError leave entering and leaving the frame to their
// caller, which they always return to: a deferred closure that captures
// less costs less (4 instructions a step). callExec hands fn a copy of
// args, which the loop reuses once fn has returned. A full copy costs a
// step some 50 instructions (callgrind), so the common cases, no value and
// one, build theirs (about 12 and 28).
func (l *Loop) callExec(fn ExecFunc, as AsyncSteps, args *argBuf) (p any) {
	returned := false
	defer func() {
		if !returned { // recover costs a runtime call: skip it when fn returned
			if p = recover(); p == nil && goexits {
				p = l.noteGoexit(exitStep, nil)
			}
		}
	}()
	switch args.n {
	case 0:
		fn(as, Args{})
	case 1:
		fn(as, Args{argBuf{v: [MaxArgs]Value{args.v[0]}, n: 1}})
	default:
		fn(as, *(*Args)(unsafe.Pointer(args)))
	}
	returned = true
	return nil
}

func (l *Loop) callError(fn ErrorFunc, as AsyncSteps, code string) (p any) {
	returned := false
	defer func() {
		if !returned {
			if p = recover(); p == nil && goexits {
				p = l.noteGoexit(exitHandler, nil)
			}
		}
	}()
	fn(as, code)
	returned = true
	return nil
}

// callCancel runs a cancel handler; the frame is not "in call": the only
// thing a cancel handler may do with its handle is read state.
func (l *Loop) callCancel(fn CancelFunc, as AsyncSteps) any {
	return l.callTeardown(as.r, func() { fn(as) })
}

// callDestroy runs a Stack destroy callback of r's run.
func (l *Loop) callDestroy(r *root, fn func(unsafe.Pointer), ptr unsafe.Pointer) any {
	return l.callTeardown(r, func() { fn(ptr) })
}

// callTeardown runs fn as code that tears a frame of r's run down: calls
// through handles are recorded, not carried out (see AsyncSteps' misuse
// rules). fn does not escape, so the closures above stay on the stack.
func (l *Loop) callTeardown(r *root, fn func()) (p any) {
	prev := l.enter(0)
	pend := l.pend // fn's unwinding is dropped: it must not replace one in flight (see handleError)
	l.teardown++
	returned := false
	defer func() {
		if p = recover(); p == nil && !returned && goexits {
			// depth stays raised for the next pass to recover.
			p = l.noteGoexit(exitTeardown, r)
			return
		}
		l.pend = pend
		l.teardown--
		l.leave(prev)
	}()
	fn()
	returned = true
	return nil
}

// callFunc runs an Immediate, Deferred or Post callback. Its panic belongs
// to no flow: it goes to the loop's panic handler.
func (l *Loop) callFunc(fn func()) {
	if p := l.callNoFrame(fn); p != nil {
		l.reportPanic(p)
	}
}

// callNoFrame runs fn as no frame's code and returns what it panicked with:
// nil when it returned, or when what it raised was the VM's unwinding
// (Error through a handle of a step not in its call, which that step's
// flow hears of).
func (l *Loop) callNoFrame(fn func()) (p any) {
	prev := l.enter(0)
	returned := false
	defer func() {
		if !returned { // recover costs a runtime call: skip it when fn returned
			switch p = recover(); {
			case p == nil && goexits:
				// A Goexit: depth stays raised for the next pass, which
				// tells the panic handler (see goexit.go).
				p = l.noteGoexit(exitCallback, nil)
				return
			case isUnwinding(p):
				p = nil
			}
		}
		l.leave(prev)
	}()
	fn()
	returned = true
	return nil
}

// isUnwinding reports whether p is the VM's own unwinding (Error, Break or
// Continue), which is no callback's panic.
func isUnwinding(p any) bool {
	_, ok := p.(*unwinding)
	return ok
}

// reportPanic counts p, a callback's panic that belongs to no flow, and
// hands it to the loop's panic handler, if any.
func (l *Loop) reportPanic(p any) {
	l.panics++
	if l.onPanic != nil {
		l.panicHandler(p)
	}
}

// panicHandler hands p to the loop's panic handler, which runs inside the
// pass as the callback did: depth stays raised, so that a pass the handler
// starts is rejected (nestedPass) instead of running the outer pass's work
// and leaving it to pop an empty run queue. A panic out of the handler
// leaves the pass when the callback ran at its top level: inPass goes
// down with it, or timers set between passes would wait for the next pass
// to start counting, and the timers the pass staged are sealed, as its end
// would have, or they would start counting only when the next pass began.
// A root hook may run inside other user code (a step that releases a root),
// whose protected call recovers the panic: the pass goes on, and must go on
// staging the timers its callbacks set. At the pass's level, a hook may run
// in the dispatch (the end of a flow in its turn): the registers of that
// turn go back to none, or the next flow's step that is passed no values
// would get the ones left. Inside a step, the handler is not that step's
// code: a misuse it makes is not charged to the step's flow.
func (l *Loop) panicHandler(p any) {
	top := l.depth == 0
	prev := l.enter(0) // the handler is no frame's code, even inside a step
	returned := false
	defer func() {
		l.leave(prev)
		if !returned && top {
			l.inPass = false
			l.cur, l.curTh, l.cont = 0, 0, contNone
			l.argsCur.clear()
			l.argsNxt.clear()
			if l.wheel.Unsealed() {
				l.wheel.Seal(l.now())
			}
		}
	}()
	l.onPanic(p)
	returned = true
}

// enter marks the frame with id n (0 for none) as the one whose code is
// running.
func (l *Loop) enter(n uintptr) uintptr {
	prev := l.inCall
	l.inCall = n
	l.depth++
	return prev
}

func (l *Loop) leave(prev uintptr) {
	l.inCall = prev
	l.depth--
}
