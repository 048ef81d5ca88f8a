package wheel

import (
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// popAll drains the timers due at now.
func popAll(w *Wheel, now int64) []uint64 {
	var out []uint64
	for {
		v, ok := w.Pop(now)
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

func TestStopBeforeDue(t *testing.T) {
	w := New(0, 0)
	h := w.Add(10*ms, 1)
	if !w.Active(h) || w.Len() != 1 {
		t.Fatalf("after Add: Active = %v, Len = %d", w.Active(h), w.Len())
	}
	if !w.Stop(h) {
		t.Fatal("Stop of pending timer = false")
	}
	if w.Active(h) || w.Len() != 0 {
		t.Fatalf("after Stop: Active = %v, Len = %d", w.Active(h), w.Len())
	}
	if w.Stop(h) {
		t.Fatal("second Stop = true")
	}
	if got := popAll(w, 20*ms); len(got) != 0 {
		t.Fatalf("stopped timer fired: %v", got)
	}
}

func TestStopDueNotPopped(t *testing.T) {
	w := New(0, 0)
	a := w.Add(5*ms, 1)
	b := w.Add(5*ms, 2)
	c := w.Add(5*ms, 3)
	if v, ok := w.Pop(5 * ms); !ok || v != 1 {
		t.Fatalf("Pop = %d, %v; want 1, true", v, ok)
	}
	if w.Stop(a) {
		t.Fatal("Stop of popped timer = true")
	}
	// b and c are due; b is stopped before it is popped.
	if !w.Active(b) || !w.Stop(b) {
		t.Fatal("Stop of due, unpopped timer failed")
	}
	if got := popAll(w, 5*ms); len(got) != 1 || got[0] != 3 {
		t.Fatalf("popped %v, want [3]", got)
	}
	if w.Active(c) || w.Stop(c) {
		t.Fatal("popped timer still active")
	}
}

func TestStaleHandleAfterReuse(t *testing.T) {
	w := New(0, 0)
	old := w.Add(ms, 1)
	if !w.Stop(old) {
		t.Fatal("Stop failed")
	}
	// The free list is LIFO, so the next Add reuses old's node.
	cur := w.Add(2*ms, 2)
	if cur.idx != old.idx {
		t.Fatalf("node not reused: %v vs %v", cur, old)
	}
	if w.Active(old) || w.Stop(old) {
		t.Fatal("stale handle acts on the node's new timer")
	}
	if !w.Active(cur) || w.Len() != 1 {
		t.Fatal("new timer disturbed by stale Stop")
	}
	if got := popAll(w, 2*ms); len(got) != 1 || got[0] != 2 {
		t.Fatalf("popped %v, want [2]", got)
	}
	// Reused again after firing.
	again := w.Add(3*ms, 3)
	if again.idx != old.idx || w.Active(cur) || w.Stop(cur) || !w.Active(again) {
		t.Fatal("handle of popped timer not stale after reuse")
	}
}

func TestZeroTimer(t *testing.T) {
	w := New(0, 0)
	w.Add(ms, 1)
	var z Timer
	if w.Active(z) || w.Stop(z) || w.Len() != 1 {
		t.Fatal("zero Timer is active")
	}
}

func TestNeverEarlyUnaligned(t *testing.T) {
	const start = 123 // ticks start at 123ns, 1ms apart
	w := New(start, time.Millisecond)
	d := int64(start + 5*ms + 1) // just after a boundary: due at 6ms
	w.Add(d, 1)
	if at, _ := w.NextDeadline(); at != start+6*ms {
		t.Fatalf("NextDeadline = %d, want %d", at, start+6*ms)
	}
	for _, now := range []int64{start, d - 1, d, start + 6*ms - 1} {
		if _, ok := w.Pop(now); ok {
			t.Fatalf("fired at %d, deadline %d, tick boundary %d", now, d, start+6*ms)
		}
	}
	if _, ok := w.Pop(start + 6*ms); !ok {
		t.Fatal("did not fire at the tick boundary after its deadline")
	}
}

func TestPastDeadlineDueNow(t *testing.T) {
	w := New(0, 0)
	w.Add(10*ms, 1)
	w.Add(10*ms, 2)
	if v, _ := w.Pop(50 * ms); v != 1 {
		t.Fatalf("Pop = %d, want 1", v)
	}
	// The wheel stands at 10ms. A deadline before that is due at once,
	// after the timers already due; a deadline after it keeps its place.
	w.Add(3*ms, 3)
	w.Add(20*ms, 4)
	w.Add(10*ms, 5)
	if got := popAll(w, 50*ms); !equal(got, []uint64{2, 3, 5, 4}) {
		t.Fatalf("popped %v, want [2 3 5 4]", got)
	}
	// Before the start nothing is due, even a timer due at tick 0.
	w = New(100*ms, 0)
	w.Add(0, 6)
	if _, ok := w.Pop(99 * ms); ok {
		t.Fatal("fired before the start")
	}
	if v, ok := w.Pop(100 * ms); !ok || v != 6 {
		t.Fatal("timer due at the start did not fire there")
	}
}

// TestFIFOAcrossCascades adds timers for one deadline while the wheel moves
// towards it, so they sit at different levels when added, and checks they
// come out in insertion order with the timers of neighbouring ticks around
// them.
func TestFIFOAcrossCascades(t *testing.T) {
	w := New(0, 0)
	const day = 24 * 3600 * 1000 * ms
	d := 3*day + 7*ms
	var want []uint64
	want = append(want, 100) // one tick earlier, added last
	var id uint64
	for now := int64(0); now < d; now += 1 + (d-now)/2 {
		popAll(w, now)
		id++
		w.Add(d, id)
		w.Add(d+ms, 1000+id)
	}
	for i := uint64(1); i <= id; i++ {
		want = append(want, i)
	}
	for i := uint64(1); i <= id; i++ {
		want = append(want, 1000+i)
	}
	w.Add(d-ms, 100)
	if got := popAll(w, d+ms); !equal(got, want) {
		t.Fatalf("popped %v,\nwant %v", got, want)
	}
}

// TestLongHorizon schedules timers 30 and 100 days out (beyond the top
// level, so through the overflow) and steps the clock in hours, then
// milliseconds, then nanoseconds up to each deadline.
func TestLongHorizon(t *testing.T) {
	const start = -7_777_777_777 // not a multiple of the tick
	const day = int64(24 * time.Hour)
	w := New(start, time.Millisecond)
	d30 := int64(start + 30*day)
	d100 := int64(start + 100*day + 3*ms)
	w.Add(d100, 100)
	w.Add(d30, 30)
	w.Add(start+ms, 1)
	now := int64(start)
	step := func(to int64, by int64) {
		t.Helper()
		for now+by <= to {
			now += by
			if got := popAll(w, now); len(got) != 0 && !(len(got) == 1 && got[0] == 1) {
				t.Fatalf("at %d: popped %v early", now, got)
			}
		}
	}
	for _, d := range []int64{d30, d100} {
		step(d-ms, int64(time.Hour))
		step(d-ms, ms)
		step(d-1, 1)
		if at, ok := w.NextDeadline(); !ok || at != d {
			t.Fatalf("NextDeadline = %d, %v; want %d", at, ok, d)
		}
		now = d
		if got := popAll(w, now); len(got) != 1 || got[0] != uint64((d-start)/day) {
			t.Fatalf("at deadline %d popped %v", d, got)
		}
	}
	if w.Len() != 0 {
		t.Fatalf("Len = %d after all fired", w.Len())
	}
}

// TestLongHorizonJump fires a 30-day timer with a single large step, and one
// scheduled just before the top level turns over.
func TestLongHorizonJump(t *testing.T) {
	w := New(0, 0)
	d := int64(30 * 24 * time.Hour)
	w.Add(d, 1)
	if popAll(w, d-1) != nil {
		t.Fatal("fired early")
	}
	if got := popAll(w, d); len(got) != 1 {
		t.Fatal("did not fire")
	}
	turn := int64(1<<32) * ms
	popAll(w, turn-2*ms)
	w.Add(turn+40*24*3600*1000*ms, 3) // in the next turn: overflow
	w.Add(turn+ms, 2)
	w.Add(turn-ms, 1)
	if got := popAll(w, turn+40*24*3600*1000*ms); !equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("popped %v, want [1 2 3]", got)
	}
}

func TestNewDefaultTick(t *testing.T) {
	for _, tick := range []time.Duration{0, -1} {
		if w := New(0, tick); w.tick != uint64(time.Millisecond) {
			t.Fatalf("New(0, %v).tick = %d", tick, w.tick)
		}
	}
}

func TestExtremeTimes(t *testing.T) {
	const maxInt64 = 1<<63 - 1
	w := New(-maxInt64-1, time.Second)
	w.Add(maxInt64, 1) // rounds up past the last representable boundary
	if at, ok := w.NextDeadline(); !ok || at != maxInt64 {
		t.Fatalf("NextDeadline = %d, %v; want saturated", at, ok)
	}
	if _, ok := w.Pop(maxInt64 - 1); ok {
		t.Fatal("fired early")
	}
}

// A timer added by AddAfter with the longest delay there is is due at the
// latest time, however late the Seal: its deadline saturates instead of
// wrapping to the past.
func TestAddAfterSaturates(t *testing.T) {
	const maxInt64 = 1<<63 - 1
	w := New(0, time.Millisecond)
	w.AddAfter(maxInt64, 1)
	w.Seal(5 * ms)
	if got := popAll(w, time.Hour.Nanoseconds()); len(got) != 0 {
		t.Fatalf("fired at once: %v", got)
	}
	if w.Len() != 1 {
		t.Fatalf("Len = %d, want 1", w.Len())
	}
}

// The most negative delay saturates too: its deadline is the earliest
// time, so the timer is due at once instead of wrapping to the far future.
// (After(-10, MinInt64) was 2^63-11.)
func TestAddAfterSaturatesNegative(t *testing.T) {
	const minInt64 = -1 << 63
	if got := After(-10, minInt64); got != minInt64 {
		t.Fatalf("After(-10, MinInt64) = %d, want MinInt64", got)
	}
	w := New(-1000, time.Millisecond)
	w.AddAfter(minInt64, 1)
	w.Seal(-10)
	if got := popAll(w, 0); !equal(got, []uint64{1}) {
		t.Fatalf("popped %v, want the timer at once", got)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// listsEmpty reports whether no timer is filed in any list.
func listsEmpty(w *Wheel) bool {
	for l := range w.head {
		if w.head[l] != nilIndex || w.tail[l] != nilIndex {
			return false
		}
	}
	return w.occupied == [len(w.occupied)]uint64{}
}

// TestStagedStopNeverFiles checks the point of staging: a timer stopped
// before more than maxStaged others are added never reaches a list, and
// its entry does not pile up.
func TestStagedStopNeverFiles(t *testing.T) {
	w := New(0, 0)
	for i := range 10 * maxStaged {
		if !w.Stop(w.Add(int64(i+1)*ms, uint64(i))) {
			t.Fatalf("timer %d: Stop = false", i)
		}
		if !listsEmpty(w) || len(w.staged) != 0 || w.Len() != 0 {
			t.Fatalf("timer %d: filed, or %d staged entries left, Len %d", i, len(w.staged), w.Len())
		}
	}
}

// TestStagedFilingKeepsOrder adds timers with equal deadlines across
// several filings (maxStaged reached, and Pop of an earlier one), with
// entries of stopped timers and reused nodes among them, and stops from the
// middle of the lists they are filed into: they must fire in the order
// added, and the stopped ones never.
func TestStagedFilingKeepsOrder(t *testing.T) {
	w := New(0, 0)
	early := w.Add(1*ms, 0)
	var want []uint64
	var later []Timer // to stop once filed, from the middle of their list
	var prev Timer
	for i := uint64(1); i <= 3*maxStaged; i++ {
		if i == maxStaged/2 {
			if v, ok := w.Pop(1 * ms); !ok || v != 0 || w.Active(early) {
				t.Fatalf("Pop(1ms) = %d, %v; want the early timer", v, ok)
			}
		}
		h := w.Add(50*ms, i)
		switch {
		case i%3 == 2:
			prev = h // stopped after the next Add, whose node it is not
			continue
		case i%3 == 0:
			w.Stop(prev) // its node is reused by the next Add
		case i%5 == 0:
			later = append(later, h)
			continue
		}
		want = append(want, i)
	}
	if len(w.staged) == 0 || listsEmpty(w) {
		t.Fatalf("want timers both staged and filed: %d staged", len(w.staged))
	}
	for _, h := range later {
		if !w.Stop(h) {
			t.Fatalf("Stop(%v) = false", h)
		}
	}
	if at, ok := w.NextDeadline(); !ok || at != 50*ms {
		t.Fatalf("NextDeadline = %d, %v; want %d", at, ok, 50*ms)
	}
	if got := popAll(w, 49*ms); len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	got := popAll(w, 50*ms)
	if len(got) != len(want) {
		t.Fatalf("fired %d timers, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("fired #%d: %d, want %d", i, got[i], want[i])
		}
	}
	if w.Len() != 0 || len(w.staged) != 0 {
		t.Fatalf("Len %d, %d staged after draining", w.Len(), len(w.staged))
	}
}
