package model

import (
	"github.com/stepvm/stepvm/fuzz/prog"
)

// Errors, cancels, Break and Continue.

// raise unwinds thread th with error code from its innermost frame. A
// cancel or error handler that cancels th's root ends the unwinding: the
// root's cancel has unwound th.
func (m *machine) raise(th *thread, code string) {
	m.stop(th)
	for {
		f := th.top
		if f.kind == fBase {
			break
		}
		if m.cancelFrame(f); !f.alive {
			return
		}
		if f.catch != nil && !f.handled && (f.kind == fStep || f.kind == fParallel) {
			var done bool
			if code, done = m.handle(th, f, code); done {
				return
			}
		}
		m.popFrame(f)
	}
	if th.base.parent == nil {
		m.finish(th.flow, prog.DoneError(code, th.flow.info))
		return
	}
	th.done = true
	m.raise(th.base.parent.th, code)
}

// handle runs the error handler of frame f for code. done reports that
// the handler settled the error; otherwise unwinding goes on with the
// returned code.
func (m *machine) handle(th *thread, f *frame, code string) (string, bool) {
	f.queue = nil
	f.handled = true
	f.waiting = false
	fl := th.flow
	m.emit(fl, "catch "+f.id+" "+code)
	out := m.exec(f, f.catch.Stmts, prog.Scope{Code: code}, true)
	if !f.alive {
		return "", true
	}
	switch out.kind {
	case outSuccess:
		m.completeIn(f, out.values, true)
		return "", true
	case outReturn:
		if len(f.queue) > 0 { // steps in the handler's place (FTN12 1.2.1)
			m.schedule(th, nil)
			return "", true
		}
		return code, false
	case outError:
		f.queue = nil
		fl.info = out.info
		return out.code, false
	}
	f.queue = nil
	m.loopControl(th, out.kind == outBreak, out.label)
	return "", true
}

// cancelFrame cancels what frame f waits on: the running branches of a
// parallel step, or the timeout and cancel handler of a step.
func (m *machine) cancelFrame(f *frame) {
	switch f.kind {
	case fParallel:
		for _, b := range f.branches {
			if !b.done {
				m.cancelThread(b)
			}
		}
		f.branches = nil
	case fStep, fIter:
		stopTimer(f)
		f.resumer = resumerNone
		if h := f.onCancel; h != nil {
			f.onCancel = nil
			fl := f.th.flow
			m.emit(fl, "cancel "+f.id)
			m.inCancel++
			m.exec(f, h.Stmts, prog.Scope{Args: f.args}, true)
			m.inCancel--
		}
	}
}

// cancelThread unwinds every frame of th, running cancel handlers only.
func (m *machine) cancelThread(th *thread) {
	m.stop(th)
	for f := th.top; f.kind != fBase; f = th.top {
		m.cancelFrame(f)
		if th.top == f {
			m.popFrame(f)
		}
	}
	th.done = true
}

// cancelFlow is the root's Cancel.
func (m *machine) cancelFlow(fl *flow) {
	if !fl.running {
		return
	}
	m.cancelThread(fl.main)
	if fl.running {
		m.finish(fl, prog.DoneCanceled)
	}
}

// loopControl carries out Break (brk) or Continue from the innermost frame
// of th, to the innermost loop or the one labelled label.
func (m *machine) loopControl(th *thread, brk bool, label string) {
	var target *frame
	for f := th.top; f != nil; f = f.parent {
		if f.kind == fLoop && (label == "" || f.label == label) {
			target = f
			break
		}
	}
	if target == nil { // Parse rejects such programs.
		th.flow.info = "no enclosing loop"
		m.raise(th, "InternalError")
		return
	}
	m.stop(th)
	for f := th.top; f != target; f = th.top {
		if f.kind == fBase { // leave the branch; the parallel step goes next
			th.done = true
			th = f.parent.th
			m.stop(th)
			continue
		}
		if m.cancelFrame(f); !f.alive {
			return
		}
		m.popFrame(f)
	}
	if brk {
		m.complete(target, nil)
	} else {
		m.schedule(th, nil)
	}
}
