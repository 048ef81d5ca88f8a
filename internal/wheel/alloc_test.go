package wheel

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/allocs"
)

// steady returns a wheel holding n timers spread evenly over span, due from
// now on, after running the steady-state loop of steadyStep long enough that
// the slab has reached its peak size.
func steady(n int, span time.Duration) (w *Wheel, now int64) {
	w = New(0, time.Millisecond)
	step := int64(span) / int64(n)
	for i := range n {
		w.Add(int64(i+1)*step, uint64(i))
	}
	for range 3 * n {
		now = steadyStep(w, now, step, span)
	}
	return w, now
}

// steadyStep advances the clock by step, adds a timer span ahead and pops
// what is due, so a wheel holding timers every step up to span ahead keeps
// holding span/step of them.
func steadyStep(w *Wheel, now, step int64, span time.Duration) int64 {
	now += step
	w.Add(now+int64(span), 1)
	for {
		if _, ok := w.Pop(now); !ok {
			return now
		}
	}
}

// noAllocs fails if any of runs calls of f allocates (allocs.Count does
// not round an average down, which would hide the occasional growth of a
// slice).
func noAllocs(t *testing.T, runs int, f func()) {
	t.Helper()
	if n := allocs.Count(runs, f); n != 0 {
		t.Fatalf("%d allocations in %d calls", n, runs)
	}
}

func TestAllocsAddStop(t *testing.T) {
	w, now := steady(1000, 10*time.Second)
	var d int64
	missed := 0
	noAllocs(t, 5000, func() {
		d = (d + 7_919_777) % int64(40*24*time.Hour)
		if !w.Stop(w.Add(now+d, 1)) {
			missed++
		}
	})
	if missed != 0 {
		t.Fatalf("%d timers were not pending when stopped", missed)
	}
}

// TestAllocsAddAfterSeal is an event loop's pass: timers set relative to
// the pass end, some stopped within it, the rest sealed and stopped later.
func TestAllocsAddAfterSeal(t *testing.T) {
	w, now := steady(1000, 10*time.Second)
	var d int64
	missed := 0
	noAllocs(t, 5000, func() {
		d = (d + 7_919_777) % int64(40*24*time.Hour)
		a, b := w.AddAfter(d, 1), w.AddAfter(d/2, 2)
		ok := w.Stop(a)
		w.Seal(now)
		if !ok || !w.Stop(b) {
			missed++
		}
	})
	if missed != 0 {
		t.Fatalf("%d runs found a timer not pending when stopped", missed)
	}
}

func TestAllocsAddPop(t *testing.T) {
	const span = 10 * time.Second
	w, now := steady(1000, span)
	step := int64(span) / 1000
	noAllocs(t, 5000, func() {
		now = steadyStep(w, now, step, span)
		w.NextDeadline()
	})
	if w.Len() != 1000 {
		t.Fatalf("Len = %d, want a steady 1000", w.Len())
	}
}
