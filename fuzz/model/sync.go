package model

import (
	"slices"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// enterSync asks the mutex of sync frame f, just pushed, to admit its
// thread: admitted, the section runs at once in this turn with args;
// queued, the thread waits (with args) to be scheduled by exitSync;
// refused, DefenseRejected is raised from f.
func (m *machine) enterSync(f *frame, args []prog.Value) {
	mx := f.mutex
	if mx.period > 0 {
		m.enterThrottle(f, args)
		return
	}
	switch {
	case mx.inside > 0 && heldBy(f.parent, mx):
		f.sync = syncPassed
		m.step(f.th, args)
	case mx.inside < mx.max:
		mx.inside++
		f.sync = syncHeld
		m.step(f.th, args)
	default:
		m.queueSync(f, args, "Mutex queue limit")
	}
}

// queueSync queues sync frame f with args, or refuses it with DefenseRejected
// and info when its primitive's queue is full.
func (m *machine) queueSync(f *frame, args []prog.Value, info string) {
	mx := f.mutex
	if mx.maxQueue >= 0 && len(mx.queue) >= mx.maxQueue {
		f.th.flow.info = info
		m.raise(f.th, "DefenseRejected")
		return
	}
	f.sync = syncQueued
	f.waitArgs = args
	mx.queue = append(mx.queue, f)
}

// heldBy reports whether a frame from f down to its thread's base holds
// mx.
func heldBy(f *frame, mx *mutex) bool {
	for ; f.kind != fBase; f = f.parent {
		if f.kind == fSync && f.sync == syncHeld && f.mutex == mx {
			return true
		}
	}
	return false
}

// exitSync gives back what sync frame f holds as it ends: its place
// inside, handed to the first waiter, or its place in the queue.
func (m *machine) exitSync(f *frame) {
	mx := f.mutex
	switch f.sync {
	case syncHeld:
		if len(mx.queue) == 0 {
			mx.inside--
			break
		}
		w := mx.queue[0]
		mx.queue = mx.queue[1:]
		w.sync = syncHeld
		m.schedule(w.th, w.waitArgs)
	case syncQueued:
		mx.queue = slices.DeleteFunc(mx.queue, func(w *frame) bool { return w == f })
	}
	f.sync = syncIdle
}

// enterThrottle is enterSync for a Throttle: an entry while it is idle
// starts a period; up to max entries a period are admitted, while nobody
// waits, and hold nothing; the others wait for the ends of periods
// (vm.Throttle).
func (m *machine) enterThrottle(f *frame, args []prog.Value) {
	mx := f.mutex
	if !mx.ticking {
		m.startPeriod(mx)
	}
	switch {
	case mx.inside < mx.max && len(mx.queue) == 0:
		mx.inside++
		f.sync = syncPassed
		m.step(f.th, args)
	default:
		m.queueSync(f, args, "Throttle queue limit")
	}
}

func (m *machine) startPeriod(mx *mutex) {
	mx.ticking = true
	m.addTimer(m.now+mx.period, func() { m.endPeriod(mx) })
}

// endPeriod admits the first max waiters and starts the next period, or
// leaves the Throttle idle when nobody waits.
func (m *machine) endPeriod(mx *mutex) {
	mx.ticking = false
	mx.inside = 0
	if len(mx.queue) == 0 {
		return
	}
	for mx.inside < mx.max && len(mx.queue) > 0 {
		w := mx.queue[0]
		mx.queue = mx.queue[1:]
		mx.inside++
		w.sync = syncPassed
		m.schedule(w.th, w.waitArgs)
	}
	m.startPeriod(mx)
}
