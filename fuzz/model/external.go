package model

import (
	"github.com/stepvm/stepvm/fuzz/prog"
)

// Timeouts and the completions of waiting steps.

func (m *machine) setTimeout(f *frame, ms int64) {
	stopTimer(f)
	f.timer = m.addTimer(m.now+ms, func() {
		f.timer = nil
		if !f.alive {
			return
		}
		f.th.flow.info = ""
		m.raise(f.th, "Timeout")
	})
}

// completeLater is the harness's external completion of a waiting step,
// if the step still waits for it then.
func (m *machine) completeLater(f *frame, w *prog.Wait) {
	m.later(w, func() {
		if !f.alive || !f.waiting {
			return
		}
		f.waiting = false
		m.emit(f.th.flow, "resume "+f.id)
		m.completeWith(f, w)
	})
}

// completeWith completes waiting frame f as w says: with success and
// values, or with an error and its info.
func (m *machine) completeWith(f *frame, w *prog.Wait) {
	switch t := w.Then.(type) {
	case *prog.Success:
		m.complete(f, t.Values)
	case *prog.Error:
		f.th.flow.info = t.Info
		m.raise(f.th, t.Code)
	}
}

// later runs fn w.Turns Immediates later, or from a timer w.MS
// milliseconds later.
func (m *machine) later(w *prog.Wait, fn func()) {
	if w.MS > 0 {
		m.addTimer(m.now+w.MS, fn)
		return
	}
	k := w.Turns
	var tick func()
	tick = func() {
		if k--; k > 0 {
			m.queue = append(m.queue, &task{fn: tick})
			return
		}
		fn()
	}
	m.queue = append(m.queue, &task{fn: tick})
}

// resumeLater is the harness's completion of a waiting step through its
// Resumer: when it comes (later) the Resumer accepts it if it is live,
// and the completion reaches the step when the next pass starts, if the
// Resumer was not released meanwhile.
func (m *machine) resumeLater(f *frame, w *prog.Wait) {
	m.later(w, func() {
		if f.resumer != resumerLive {
			return
		}
		f.resumer = resumerClaimed
		m.emit(f.th.flow, "resume "+f.id)
		m.inbox = append(m.inbox, func() {
			if f.resumer != resumerClaimed {
				return
			}
			f.resumer = resumerNone
			m.completeWith(f, w)
		})
	})
}
