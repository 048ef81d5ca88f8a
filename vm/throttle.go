package vm

import "time"

// Throttle admits at most max entries into its critical sections per
// period (FTN12 1.11.2, 2.4); the others wait in FIFO order and are
// admitted, up to max at a time, as periods pass. An entry while the
// Throttle is idle starts a period. A period that ends with flows waiting
// admits the first max of them and starts the next at once; one that ends
// with nobody waiting leaves the Throttle idle. This is the interval timer
// of the reference implementations. Every entry counts, a flow's nested
// ones too.
//
// Nothing is held inside the section: a Throttle limits how often flows
// enter, not how many are inside (see Mutex and Limiter for that). A flow
// canceled or timed out while it waits leaves the queue.
//
// A Throttle runs its periods on the timers of its loop, and is used from
// that loop's goroutine only; a flow of another loop that syncs on it
// fails with InternalError. Make it with NewThrottle: a flow that syncs on
// a zero Throttle fails with InternalError too.
type Throttle struct {
	l        *Loop
	max      int
	maxQueue int
	period   time.Duration
	count    int  // entries in the current period
	ticking  bool // a period runs: its end is scheduled
	q        waitQueue
	endFn    func() // endPeriod, bound once
	entered  uint64
	rejected uint64
}

// NewThrottle returns a Throttle of loop l admitting at most max entries
// (at least 1) per period (positive), with up to maxQueue flows waiting:
// Unbounded for no limit, 0 to refuse any flow that cannot enter at once.
// A flow that finds the queue full fails with DefenseRejected and the
// ErrorInfo "Throttle queue limit".
func NewThrottle(l *Loop, max int, period time.Duration, maxQueue int) *Throttle {
	switch {
	case l == nil:
		panic("vm: NewThrottle: nil loop")
	case max < 1:
		panic("vm: NewThrottle: max must be at least 1")
	case period <= 0:
		panic("vm: NewThrottle: period must be positive")
	case maxQueue < Unbounded:
		panic("vm: NewThrottle: maxQueue must be Unbounded or at least 0")
	}
	t := &Throttle{l: l, max: max, maxQueue: maxQueue, period: period}
	t.endFn = t.endPeriod
	return t
}

// Sync adds to as a step that runs fn once the Throttle admits the flow
// (ISync). Use it through AsyncSteps.Sync.
func (t *Throttle) Sync(as AsyncSteps, fn ExecFunc, onError ErrorFunc) {
	switch {
	case t == nil:
		as.misuse("Sync on a nil *Throttle")
	case t.l == nil:
		as.misuse("Sync on a zero Throttle: make it with NewThrottle")
	default:
		as.addSync(t, nil, fn, onError)
	}
}

// Stats returns the Throttle's counters; Inside is the number of entries
// in the current period. Loop goroutine only.
func (t *Throttle) Stats() SyncStats {
	return SyncStats{Inside: t.count, Queued: t.q.len(), Entered: t.entered, Rejected: t.rejected}
}

// enter admits thread th, whose OpSync frame n was just pushed (n.Ops().B
// becomes syncPassed), queues it (syncQueued), or refuses it.
func (t *Throttle) enter(l *Loop, r *root, th, n *Node) refusal {
	if l != t.l {
		return refusedThrottleLoop
	}
	if !t.ticking {
		t.startPeriod()
	}
	if t.count < t.max && t.q.n == 0 {
		t.count++
		t.entered++
		n.Ops().B = syncPassed
		return accepted
	}
	if t.maxQueue != Unbounded && t.q.n >= t.maxQueue {
		t.rejected++
		return refusedThrottleFull
	}
	n.Ops().A = t.q.push(r, th, n, l.argsCur)
	n.Ops().B = syncQueued
	return accepted
}

// exit takes frame n out of the queue if it still waits.
func (t *Throttle) exit(n *Node) {
	if n.Ops().B == syncQueued {
		t.q.remove(n.Ops().A)
	}
}

// startPeriod schedules the end of the period that starts now.
func (t *Throttle) startPeriod() {
	t.ticking = true
	t.l.Deferred(t.period, t.endFn)
}

// endPeriod starts the next period with the first max waiters admitted,
// or lets the Throttle go idle when nobody waits.
func (t *Throttle) endPeriod() {
	t.ticking = false
	t.count = 0
	if t.q.len() == 0 {
		return
	}
	for t.count < t.max {
		i, w := t.q.pop()
		if w == nil {
			break
		}
		if w.alive() {
			t.count++
			t.entered++
			t.l.admit(w, 0, syncPassed)
		}
		t.q.release(i)
	}
	t.startPeriod()
}
