package model

import (
	"fmt"
	"slices"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// The event loop: passes, turns, timers, and the trace.

// run drives the loop until every flow has completed (canceling the ones
// that can no longer progress) or the trace is full.
func (m *machine) run() error {
	passes := 0
	for !m.out.Truncated {
		if len(m.inbox) == 0 && len(m.queue) == 0 && m.nextTimer() == nil {
			if !m.sweep() {
				break
			}
			continue
		}
		if passes++; passes > m.lim.MaxPasses {
			return fmt.Errorf("model: no end after %d passes", m.lim.MaxPasses)
		}
		inbox := m.inbox
		m.inbox = nil
		for _, fn := range inbox {
			fn()
		}
		for n := len(m.queue); n > 0; n-- {
			t := m.queue[0]
			m.queue = m.queue[1:]
			m.runTask(t)
		}
		for {
			t := m.nextTimer()
			if t == nil || t.at > m.now {
				break
			}
			t.dead = true
			t.fn()
		}
		if len(m.inbox) == 0 && len(m.queue) == 0 {
			if t := m.nextTimer(); t != nil {
				m.now = t.at
			}
		}
	}
	m.flushDone()
	return nil
}

// sweep cancels, in order, the flows still running once nothing is left
// to run, and reports whether there were any.
func (m *machine) sweep() bool {
	found := false
	for _, fl := range m.flows {
		if fl.running {
			found = true
			m.emit(fl, "stalled")
			m.cancelFlow(fl)
		}
	}
	return found
}

// Trace output. A flow's completion is reported before the next event, in
// the order of the roots: that is when the harness of the VM sees it.

func (m *machine) emit(fl *flow, event string) {
	m.flushDone()
	m.line(fl.name + ": " + event)
}

func (m *machine) line(s string) {
	if len(m.out.Lines) >= m.lim.MaxTrace {
		m.out.Truncated = true
		return
	}
	m.out.Lines = append(m.out.Lines, s)
}

func (m *machine) flushDone() {
	for _, fl := range m.flows {
		if fl.done != "" && !fl.reported {
			fl.reported = true
			m.line(fl.name + ": " + fl.done)
		}
	}
}

// Timers.

func (m *machine) addTimer(at int64, fn func()) *timer {
	m.tseq++
	t := &timer{at: at, seq: m.tseq, fn: fn}
	m.timers = append(m.timers, t)
	return t
}

// nextTimer returns the live timer that fires first.
func (m *machine) nextTimer() *timer {
	m.timers = slices.DeleteFunc(m.timers, func(t *timer) bool { return t.dead })
	var first *timer
	for _, t := range m.timers {
		if first == nil || t.at < first.at || t.at == first.at && t.seq < first.seq {
			first = t
		}
	}
	return first
}

func stopTimer(f *frame) {
	if f.timer != nil {
		f.timer.dead = true
		f.timer = nil
	}
}

// Scheduling.

func (m *machine) push(th *thread, args []prog.Value) {
	m.queue = append(m.queue, &task{th: th, token: th.token, args: args})
}

// schedule makes th continue with args: at the end of the current turn if
// th is the thread whose turn it is, else through the queue.
func (m *machine) schedule(th *thread, args []prog.Value) {
	th.token++
	if th == m.cur {
		m.cont, m.contArgs = true, args
		return
	}
	m.push(th, args)
}

// stop drops any continuation of th.
func (m *machine) stop(th *thread) {
	th.token++
	if th == m.cur {
		m.cont = false
	}
}

func (m *machine) runTask(t *task) {
	if t.fn != nil {
		t.fn()
		return
	}
	th := t.th
	if !th.flow.running || th.token != t.token {
		return
	}
	m.cur = th
	args := t.args
	for m.budget = inlineBudget; ; m.budget-- {
		m.cont = false
		m.step(th, args)
		if !m.cont {
			break
		}
		m.cont = false
		if m.budget <= 0 || len(m.queue) > 0 {
			m.push(th, m.contArgs)
			break
		}
		args = m.contArgs
	}
	m.cur = nil
}
