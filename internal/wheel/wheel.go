package wheel

import (
	"math"
	"slices"
	"time"
)

// A Timer is a handle to a timer scheduled by [Wheel.Add]. It pairs a node
// index with the node's generation at Add, so a handle whose timer has fired
// or been stopped is recognised even after the node runs another timer: Stop
// and Active are safe to call on any handle at any time. (A generation wraps
// only after a single node has been reused 2^32 times.) The zero Timer is
// never active.
type Timer struct {
	idx, gen uint32
}

// A Wheel schedules timers on a caller-driven clock. See the package
// documentation for its ordering guarantee. A Wheel must be created with
// [New] and used by one goroutine at a time.
type Wheel struct {
	start int64  // time at which tick 0 begins
	tick  uint64 // tick length in nanoseconds, > 0

	// cur is the current tick; it never decreases. Every pending timer is
	// due at or after cur. Timers due at cur are on level-0 list cur%256,
	// in the order they were added; every other list holds timers of one
	// span that cur has not yet entered (see next).
	cur uint64
	n   int // pending timers

	head, tail [numLists]uint32
	// occupied has a bit set for each non-empty list below overflowList, so
	// that empty slots are skipped a word at a time.
	occupied [level0Slots/64 + numLevels - 1]uint64
	// low holds, for each list from level 1 up, the least due tick pushed
	// since the list was last empty: exact unless that timer was stopped,
	// and never after the earliest remaining one.
	low [numLists - level0Slots]uint64

	nodes []node // nodes[nilIndex] is never used
	free  uint32 // free list of nodes, linked by next

	// staged lists, in the order added, the timers not yet filed into a
	// list (see file): first the staged timers, staged[:sealed], which
	// have deadlines, then those added by AddAfter since the last Seal,
	// which seals them where they are listed and moves sealed past them
	// (one list: Seal copies no entry). Entries of timers stopped since
	// stay until the next filing; those of the unsealed part go when none
	// of its timers is left, and all go when no timer of either part is.
	// liveStaged and liveUnsealed count the timers still pending in each
	// part, and stagedMin is never after the earliest deadline of the
	// staged ones (math.MaxInt64 when there are none).
	staged       []stagedTimer
	sealed       int
	liveStaged   int
	liveUnsealed int
	stagedMin    int64

	// quiet is a time before which Pop, staged timers aside, has nothing
	// to do: no filed timer is due and cur would not move (the start of
	// cur's tick if a timer is due in it, else of the next). Pop sets it
	// when it reports none due; filing, which may make a timer due at cur,
	// lowers it to math.MinInt64.
	quiet int64
}

// stagedTimer names a staged timer: its node and the node's generation at
// Add, which tells a stopped timer's entry from one of a later timer on the
// same node.
type stagedTimer struct{ idx, gen uint32 }

// maxStaged is the number of staged entries that makes Add file them: a
// timer stopped before that many more are added never reaches a list.
const maxStaged = 256

// New returns an empty wheel whose tick 0 begins at start, the caller's clock
// reading in nanoseconds. tick is the resolution to which deadlines are
// rounded up; if tick <= 0, it is one millisecond.
func New(start int64, tick time.Duration) *Wheel {
	if tick <= 0 {
		tick = time.Millisecond
	}
	return &Wheel{
		start:     start,
		tick:      uint64(tick),
		nodes:     make([]node, 1, 64),
		quiet:     start,
		stagedMin: math.MaxInt64,
	}
}

// Add schedules a timer carrying data that Pop returns once time deadline has
// been reached, rounded up to a tick boundary. A deadline the wheel has
// already passed makes the timer due at once, after those already due. Add
// takes amortized constant time (it files maxStaged timers at once) and
// allocates only when more timers are pending than ever before. (While
// timers added by AddAfter await their Seal, Add also moves their entries,
// which it lists ahead of them: an event loop adds such timers only during
// a pass, and seals them at its end.)
//
// The timer is staged, not filed into its list: most timers of an event
// loop (step timeouts) are stopped soon after they are set, and a staged
// one is stopped without touching a list, or even rounding its deadline.
// Staged timers are filed, in the order added, when one of them may be
// due (Pop), or when maxStaged entries have piled up.
func (w *Wheel) Add(deadline int64, data uint64) Timer {
	if w.sealed == maxStaged {
		w.file()
	}
	i, n := w.alloc()
	n.due, n.data, n.list = uint64(deadline), data, stagedList // due holds the deadline until filed
	w.stagedMin = min(w.stagedMin, deadline)
	s := stagedTimer{i, n.gen}
	if w.sealed == len(w.staged) {
		w.staged = append(w.staged, s)
	} else {
		// Ahead of the unsealed timers, which count as added at their Seal.
		w.staged = slices.Insert(w.staged, w.sealed, s)
	}
	w.sealed++
	w.liveStaged++
	w.n++
	return Timer{idx: i, gen: n.gen}
}

// file moves the staged timers into their lists, in the order they were
// added, so that ties keep that order. Their due ticks are computed now:
// no tick has passed since any of them could have been due (Pop files
// first), so the result is what Add would have computed.
func (w *Wheel) file() {
	for _, s := range w.staged[:w.sealed] {
		n := &w.nodes[s.idx]
		if n.gen != s.gen || n.list != stagedList {
			continue // stopped
		}
		n.due = max(w.ceilTick(int64(n.due)), w.cur)
		w.push(w.listFor(n.due), s.idx)
	}
	k := copy(w.staged, w.staged[w.sealed:]) // the unsealed entries, to the front
	w.staged, w.sealed = w.staged[:k], 0
	w.liveStaged, w.stagedMin = 0, math.MaxInt64
	w.quiet = math.MinInt64
}

// AddAfter schedules a timer carrying data due d after the time given to
// the next Seal. Until that Seal the timer is pending (Len, Active and Stop
// see it) but has no deadline: Pop never returns it and NextDeadline leaves
// it out. For the order of timers due in the same tick it counts as added
// at that Seal.
//
// It lets an event loop arm every timer set during a pass with one clock
// reading taken at the end of the pass: a deadline counted from a reading
// taken after the timer was set is never early, and a timer stopped before
// the pass ends costs no reading at all. AddAfter takes constant time.
func (w *Wheel) AddAfter(d int64, data uint64) Timer {
	i, n := w.alloc()
	n.due, n.data, n.list = uint64(d), data, unsealedList // due holds d until sealed
	w.staged = append(w.staged, stagedTimer{i, n.gen})
	w.liveUnsealed++
	w.n++
	return Timer{idx: i, gen: n.gen}
}

// Seal gives the timers added by AddAfter since the last Seal their
// deadlines, now plus their d, and stages them in the order they were
// added (see Add). It takes time proportional to the timers added by
// AddAfter since the last Seal, and files the staged timers if maxStaged
// entries have piled up.
func (w *Wheel) Seal(now int64) {
	first := w.stagedMin
	for k := w.sealed; k < len(w.staged); k++ { // not a range over a reslice: cheaper for one timer
		u := w.staged[k]
		n := &w.nodes[u.idx]
		if n.gen != u.gen || n.list != unsealedList {
			continue // stopped
		}
		deadline := After(now, int64(n.due))
		n.due, n.list = uint64(deadline), stagedList // due holds the deadline until filed
		first = min(first, deadline)
	}
	w.stagedMin = first
	w.sealed = len(w.staged)
	w.liveStaged += w.liveUnsealed
	w.liveUnsealed = 0
	if w.sealed >= maxStaged {
		w.file()
	}
}

// After returns the deadline d after now. The longest durations saturate
// at math.MaxInt64 rather than wrap to the past, and the most negative at
// math.MinInt64 rather than wrap to the future.
func After(now, d int64) int64 {
	at := now + d
	switch {
	case d > 0 && at < now:
		return math.MaxInt64
	case d < 0 && at > now:
		return math.MinInt64
	}
	return at
}

// Unsealed reports whether timers added by AddAfter await a Seal.
func (w *Wheel) Unsealed() bool { return w.liveUnsealed > 0 }

// Stop cancels t in constant time and reports whether it was pending, which
// includes a timer that is due but not yet returned by Pop. For a timer that
// Pop has returned or that was already stopped, Stop does nothing and returns
// false.
func (w *Wheel) Stop(t Timer) bool {
	if !w.Active(t) {
		return false
	}
	switch w.nodes[t.idx].list {
	case stagedList:
		w.liveStaged--
		if w.liveStaged == 0 {
			w.stagedMin = math.MaxInt64
			if w.liveUnsealed == 0 { // every entry is stale
				w.staged, w.sealed = w.staged[:0], 0
			}
		}
	case unsealedList:
		w.liveUnsealed--
		if w.liveUnsealed == 0 { // every unsealed entry is stale, and so are the others if no staged timer is left
			if w.liveStaged == 0 {
				w.sealed = 0
			}
			w.staged = w.staged[:w.sealed]
		}
	default:
		w.unlink(t.idx)
	}
	w.release(t.idx)
	w.n--
	return true
}

// Active reports whether t is pending: added, and neither returned by Pop nor
// stopped.
func (w *Wheel) Active(t Timer) bool {
	if t.idx == nilIndex || int(t.idx) >= len(w.nodes) {
		return false
	}
	n := &w.nodes[t.idx]
	return n.gen == t.gen && n.list != freeList
}

// Len returns the number of pending timers.
func (w *Wheel) Len() int {
	return w.n
}

// Pop removes the next timer due by time now and returns its data; ok is
// false when none is due. It returns one timer per call, in the order given
// in the package documentation, so an event loop calls it until ok is false.
//
// Pop advances the wheel towards now only while no timer is due, skipping
// empty slots a bitmap word at a time and moving timers down a level as their
// slots come due; each timer moves at most once per level. It never returns
// a timer due after the tick containing now, even if now is earlier than in
// a previous call.
func (w *Wheel) Pop(now int64) (data uint64, ok bool) {
	// Before quiet and the earliest staged deadline, pop would find nothing
	// to do; this test is small enough for Pop to be inlined.
	if now >= min(w.quiet, w.stagedMin) {
		data, ok = w.pop(now)
	}
	return
}

// pop is Pop past the test of quiet.
func (w *Wheel) pop(now int64) (data uint64, ok bool) {
	end, reached := w.floorTick(now)
	if !reached {
		return 0, false
	}
	if w.stagedMin <= now {
		w.file() // one may be due: a due timer's deadline is not after now
	}
	for {
		if i := w.head[w.cur%level0Slots]; i != nilIndex {
			if w.cur > end {
				w.quiet = w.timeOf(w.cur)
				return 0, false
			}
			w.unlink(i)
			data = w.nodes[i].data
			w.release(i)
			w.n--
			return data, true
		}
		if w.cur >= end {
			w.quiet = w.timeOf(w.cur + 1)
			return 0, false
		}
		at, l, ok := w.next()
		if !ok || at > end {
			// Nothing happens by end: every span entered on the
			// way is empty.
			w.cur = end
			w.quiet = w.timeOf(end + 1)
			return 0, false
		}
		w.cur = at
		if l >= level0Slots {
			w.cascade(l)
		}
	}
}

// NextDeadline returns a time at which to call Pop next; ok is false when no
// timer is pending. at is never after the moment Pop will return the earliest
// pending timer, so a loop that sleeps until at never oversleeps. It is the
// start of a tick, and Pop(at) either returns a timer or moves the earliest
// one down a level, so a loop alternating NextDeadline and Pop progresses.
//
// at is exactly the start of the earliest timer's due tick when that timer
// is on level 0 (due in the current turn of 256 ticks), or when no timer
// has been stopped from its slot; otherwise it may be earlier, but never
// before the slot's span. Because timers become due only on tick boundaries,
// at may follow a deadline that is not on one by less than a tick.
// NextDeadline does not change the wheel; it takes constant time, a scan
// of the staged timers (at most maxStaged) included.
func (w *Wheel) NextDeadline() (at int64, ok bool) {
	k, l, ok := w.next()
	if ok && l >= level0Slots {
		k = w.low[l-level0Slots]
	}
	if w.liveStaged > 0 {
		// The earliest staged deadline, exactly: stagedMin may be a
		// stopped timer's. (At most maxStaged entries.)
		var first int64
		found := false
		for _, s := range w.staged[:w.sealed] {
			n := &w.nodes[s.idx]
			if n.gen == s.gen && n.list == stagedList && (!found || int64(n.due) < first) {
				first, found = int64(n.due), true
			}
		}
		if due := max(w.ceilTick(first), w.cur); !ok || due < k {
			k, ok = due, true
		}
	}
	if !ok {
		return 0, false
	}
	return w.timeOf(k), true
}
