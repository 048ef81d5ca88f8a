package vm_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/fuzzinput"
	"github.com/stepvm/stepvm/vm"
)

// FuzzSchedule holds the loop's own scheduling (Post, Immediate,
// Deferred, Cancel, IsValid, Iterate, RunUntilIdle and Close, on a
// ManualClock) to a model of the rules the package documents:
//
//   - a pass runs the posts received, then the callbacks queued when it
//     starts (the posts' included), in order, then fires the due timers
//     in deadline order, ties in the order they were armed; a post made
//     by a posted callback runs in that pass or in the next, in order;
//   - a timer set outside a pass counts from then, one set by a queued
//     callback from the pass's reading of the clock, and one set by a
//     timer callback from the next pass's;
//   - a callback canceled before it runs never runs, and a handle is valid
//     until its callback runs or is canceled;
//   - Iterate reports work while a pass has more to do, else the time to
//     the next timer, and RunUntilIdle runs passes until none has;
//   - a clock moved back leaves the loop's time standing until it moves
//     forward again;
//   - after Close, Post refuses, and the rest goes on as before.
//
// The input says what the test does between passes and what every
// callback does (schedule, cancel, ask, move the clock either way, close);
// the callbacks run, their order, every IsValid, Post and Iterate result
// must be the model's. The model reads the clock where Clock's
// documentation says the loop does, since a clock that moved back and
// forth between two readings is not seen to have moved.
//
//	go test -run '^$' -fuzz '^FuzzSchedule$' -fuzztime 10m -parallel 1 ./vm
func FuzzSchedule(f *testing.F) {
	f.Add([]byte{0, 1, 1, 3, 4, 2, 5, 5, 0, 1, 4, 4, 4, 1, 0, 2})
	f.Add([]byte{1, 0, 1, 2, 1, 1, 4, 1, 0, 0, 4, 4, 3, 2, 2, 4, 4})
	f.Add([]byte{0, 1, 0, 1, 2, 1, 1, 0, 1, 0, 1, 2, 4, 1, 1, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &schedRun{t: t, in: fuzzinput.NewBytes(in)}
		s.clk = vm.NewManualClock(time.Unix(1_700_000_000, 0))
		s.l = vm.NewLoop(vm.WithClock(s.clk))
		s.m.state = map[int]bool{}
		for s.in.Left() {
			switch s.next() % 4 {
			case 0:
				s.act(s.next(), s.m.apply) // between passes: the model follows at once
			case 1:
				s.runUntilIdle()
			default:
				s.iterate()
			}
		}
		for rounds := 0; ; rounds++ {
			if rounds > 10_000 {
				t.Fatal("the loop never goes idle")
			}
			work, delay := s.iterate()
			if !work {
				break
			}
			s.advance(delay)
			s.m.reading += int64(delay / time.Millisecond)
		}
		if st := s.l.Stats(); st.Timers != 0 || st.Queued != 0 {
			t.Fatalf("idle with %+v", st)
		}
	})
}

// schedRun is one run of FuzzSchedule: the loop, and the model that replays
// what the loop's callbacks did.
type schedRun struct {
	t       *testing.T
	in      *fuzzinput.Bytes
	l       *vm.Loop
	clk     *vm.ManualClock
	handles []vm.Handle  // by callback id (a Post's is the zero Handle)
	elapsed int64        // ms the clock has moved forward
	log     []schedEvent // what the loop's callbacks did, in the pass under way
	m       schedModel
}

// schedEvent is a callback run (op < 0: callback id arg ran, after reads
// readings of the clock) or one of its actions (an op of act, its
// argument, and IsValid's or Post's answer).
type schedEvent struct {
	op, arg int
	valid   bool
	reads   uint64
}

const opRun = -1

func (s *schedRun) next() int { return s.in.Next() }

// act does one thing on the loop and hands it to record: the model's apply
// between passes, the pass's log inside callbacks.
func (s *schedRun) act(op int, record func(schedEvent)) {
	e := schedEvent{op: op % 7}
	switch e.op {
	case 0:
		e.arg = len(s.handles)
		s.handles = append(s.handles, s.l.Immediate(s.callback(e.arg)))
	case 1:
		e.arg = s.next() % 8
		s.handles = append(s.handles, s.l.Deferred(time.Duration(e.arg)*time.Millisecond, s.callback(len(s.handles))))
	case 2, 3:
		if len(s.handles) == 0 {
			return
		}
		e.arg = s.next() % len(s.handles)
		if e.op == 2 {
			s.l.Cancel(s.handles[e.arg])
		} else {
			e.valid = s.l.IsValid(s.handles[e.arg])
		}
	case 4:
		// Every timer stays within 256 ms of the loop's start, on the
		// wheel's first level, where its deadline is exact.
		if s.elapsed >= 200 {
			return
		}
		e.arg = s.next()%7 - 3 // back too: the loop's time stands still
		s.advance(time.Duration(e.arg) * time.Millisecond)
	case 5:
		e.arg = len(s.handles)
		s.handles = append(s.handles, vm.Handle{})
		e.valid = s.l.Post(s.callback(e.arg))
	case 6:
		s.l.Close() // Posts fail from now on; the rest goes on as before
	}
	record(e)
}

func (s *schedRun) advance(d time.Duration) {
	s.clk.Advance(d)
	s.elapsed += max(int64(d/time.Millisecond), 0)
}

// callback returns callback id, which does up to two things.
func (s *schedRun) callback(id int) func() {
	return func() {
		s.log = append(s.log, schedEvent{op: opRun, arg: id, reads: vm.ClockReads(s.clk)})
		record := func(e schedEvent) { s.log = append(s.log, e) }
		for n := s.next() % 3; n > 0; n-- {
			s.act(s.next(), record)
		}
	}
}

// iterate runs a pass of the loop, replays it on the model, and compares.
func (s *schedRun) iterate() (bool, time.Duration) {
	s.log = s.log[:0]
	work, delay := s.l.Iterate()
	mwork, mdelay := s.m.iterate(s.log)
	if s.m.problem != "" {
		s.t.Fatalf("%s\npass: %v", s.m.problem, s.log)
	}
	if work != mwork || delay != time.Duration(mdelay)*time.Millisecond {
		s.t.Fatalf("Iterate = %v, %v; model %v, %vms\npass: %v", work, delay, mwork, mdelay, s.log)
	}
	return work, delay
}

// runUntilIdle runs RunUntilIdle, replays it on the model, and compares.
func (s *schedRun) runUntilIdle() {
	s.log = s.log[:0]
	s.l.RunUntilIdle()
	s.m.log = s.log
	for s.m.problem == "" && s.m.pass() {
	}
	s.m.done()
	if s.m.problem != "" {
		s.t.Fatalf("RunUntilIdle: %s\npasses: %v", s.m.problem, s.log)
	}
}

// schedModel is the documented schedule, in whole milliseconds since the
// loop was made.
type schedModel struct {
	reading int64 // the clock, in ms from its reading when the loop was made
	start   int64 // the reading the loop's time counts from
	last    int64 // the loop's time at its last reading
	nextID  int
	state   map[int]bool // callback id: still scheduled
	posts   []int        // posted callbacks, run first in the next pass
	posted  bool         // a Post since the last drain began: the loop has more to do
	runq    []int        // queued Immediates, canceled ones included
	armed   []schedTimer // by due time, then in the order armed
	staged  []schedTimer // set by queued callbacks: armed at the pass's timer stage (due holds the delay)
	later   []schedTimer // set by timer callbacks: armed at the next pass's
	closed  bool         // Close was called: Post refuses
	inPass  bool         // callbacks run
	firing  bool         // timer callbacks run
	log     []schedEvent // the pass being replayed
	problem string       // the first difference from the loop
}

type schedTimer struct {
	id  int
	due int64
}

func (m *schedModel) fail(format string, args ...any) {
	if m.problem == "" {
		m.problem = fmt.Sprintf(format, args...)
	}
}

// apply does what the loop did for event e.
func (m *schedModel) apply(e schedEvent) {
	switch e.op {
	case 0:
		m.schedule(e.arg)
		m.runq = append(m.runq, e.arg)
	case 1:
		id := m.schedule(-1)
		t := schedTimer{id, int64(e.arg)}
		switch {
		case !m.inPass:
			m.arm(schedTimer{id, m.now() + t.due})
		case m.firing:
			m.later = append(m.later, t)
		default:
			m.staged = append(m.staged, t)
		}
	case 2:
		m.state[e.arg] = false
	case 3:
		if e.valid != m.state[e.arg] {
			m.fail("IsValid(%d) = %v, model %v", e.arg, e.valid, m.state[e.arg])
		}
	case 4:
		m.reading += int64(e.arg)
	case 5:
		m.schedule(e.arg)
		m.state[e.arg] = false // no Handle names it
		if e.valid != !m.closed {
			m.fail("Post = %v on a loop closed: %v", e.valid, m.closed)
		}
		if e.valid {
			m.posts = append(m.posts, e.arg)
			m.posted = true
		}
	case 6:
		m.closed = true
	}
}

// schedule makes the next callback id (want: the id the loop gave, or -1).
func (m *schedModel) schedule(want int) int {
	id := m.nextID
	if want >= 0 && want != id {
		m.fail("the loop made callback %d, model %d", want, id)
	}
	m.nextID++
	m.state[id] = true
	return id
}

// arm files t after the armed timers due no later.
func (m *schedModel) arm(t schedTimer) {
	i := len(m.armed)
	for i > 0 && m.armed[i-1].due > t.due {
		i--
	}
	m.armed = slices.Insert(m.armed, i, t)
}

// run runs callback id, which a Handle names.
func (m *schedModel) run(id int) {
	m.state[id] = false
	m.replay(id)
}

// replay runs callback id on the model: the next event of the pass must
// be its run, and the events after it, up to the next run, are what it
// did.
func (m *schedModel) replay(id int) {
	if len(m.log) == 0 || m.log[0].op != opRun {
		m.fail("callback %d did not run", id)
		return
	}
	if got := m.log[0].arg; got != id {
		m.fail("callback %d ran, model %d", got, id)
		return
	}
	m.log = m.log[1:]
	for len(m.log) > 0 && m.log[0].op != opRun && m.problem == "" {
		e := m.log[0]
		m.log = m.log[1:]
		m.apply(e)
	}
}

// pass is a pass of the loop; it reports whether another is due at once.
func (m *schedModel) pass() bool {
	m.inPass = true
	defer func() { m.inPass = false }()
	// The posts received run in order. A post made by one of them may run
	// in the same drain or wait for the next pass (ringbuf.Queue.Drain):
	// the loop's log says which, and a post left waits with those after
	// it, since posts arrive in order. Either way the post tells the loop
	// it has more to do: the drain cannot know it delivered every post
	// made since it began. A post that ran after the clock was read again
	// ran in a later pass, even when nothing else ran in between: the pass
	// that read it had timers, and those set before the reading count from
	// it. (The loop reads the clock in no callback of a pass.)
	m.posted = false
	var reads uint64
	if len(m.log) > 0 {
		reads = m.log[0].reads
	}
	for received := len(m.posts); len(m.posts) > 0 && m.problem == ""; received-- {
		id := m.posts[0]
		if received <= 0 && (len(m.log) == 0 || m.log[0] != (schedEvent{op: opRun, arg: id, reads: reads})) {
			break
		}
		m.posts = m.posts[1:]
		m.replay(id)
	}
	queued := m.runq
	m.runq = nil
	for _, id := range queued {
		if m.state[id] && m.problem == "" {
			m.run(id)
		}
	}
	if !m.timers() {
		return len(m.runq) > 0 || m.posted
	}
	now := m.now()
	for _, t := range slices.Concat(m.later, m.staged) {
		if m.state[t.id] {
			m.arm(schedTimer{t.id, now + t.due})
		}
	}
	m.later, m.staged = nil, nil
	m.firing = true
	fired := false
	for m.problem == "" {
		i := slices.IndexFunc(m.armed, func(t schedTimer) bool { return m.state[t.id] })
		if i < 0 || m.armed[i].due > now {
			break
		}
		id := m.armed[i].id
		m.armed = slices.Delete(m.armed, 0, i+1) // the canceled before it too
		fired = true
		m.run(id)
	}
	m.firing = false
	if fired {
		if t := m.now(); t > now {
			if at, ok := m.nextDue(); ok && at <= t {
				return true
			}
		}
	}
	return len(m.runq) > 0 || m.posted || slices.ContainsFunc(m.later, func(t schedTimer) bool { return m.state[t.id] })
}

// now reads the clock: the loop's time, which stands still while the
// clock is behind its last reading and counts on from the clock's new
// readings once it moves forward again.
func (m *schedModel) now() int64 {
	t := m.reading - m.start
	if t < m.last {
		m.start = m.reading - m.last
		return m.last
	}
	m.last = t
	return t
}

// timers reports whether any timer is scheduled, armed or not: the loop
// reads the clock in a pass only then.
func (m *schedModel) timers() bool {
	live := func(t schedTimer) bool { return m.state[t.id] }
	return slices.ContainsFunc(m.armed, live) || slices.ContainsFunc(m.staged, live) || slices.ContainsFunc(m.later, live)
}

// nextDue returns the due time of the first timer armed and scheduled.
func (m *schedModel) nextDue() (int64, bool) {
	for _, t := range m.armed {
		if m.state[t.id] {
			return t.due, true
		}
	}
	return 0, false
}

// done checks that the loop ran no more than the model's passes did.
func (m *schedModel) done() {
	if len(m.log) > 0 {
		m.fail("the loop ran more: %v", m.log)
	}
}

// iterate is Iterate, replaying log, what the loop's pass did.
func (m *schedModel) iterate(log []schedEvent) (bool, int64) {
	m.log = log
	more := m.pass()
	m.done()
	if more {
		return true, 0
	}
	if at, ok := m.nextDue(); ok {
		return true, max(at-m.now(), 1)
	}
	return false, 0
}
