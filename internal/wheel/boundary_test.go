package wheel

import (
	"slices"
	"testing"
	"time"
)

// TestLevelBoundaries places deadlines on and around the span of every
// level (one tick and one nanosecond either side of 1, 2, 63, 64 and 65
// spans ahead), seen from a current tick at and next to span boundaries,
// and pops at each deadline, one nanosecond before it and one tick after
// it, or drains them all in one jump past the last. The wheel must agree
// with the model at every Pop: the cascading between levels neither fires
// a timer early nor holds one past its tick, and keeps their order.
func TestLevelBoundaries(t *testing.T) {
	for _, jump := range []bool{false, true} {
		t.Run(map[bool]string{false: "step", true: "jump"}[jump], func(t *testing.T) { testLevelBoundaries(t, jump) })
	}
}

func testLevelBoundaries(t *testing.T, jump bool) {
	const tick = int64(time.Millisecond)
	spans := []int64{1, level0Slots}
	for l := 1; l < numLevels; l++ {
		spans = append(spans, int64(1)<<(shift(l)+levelBits))
	}
	for _, base := range []int64{0, 1, level0Slots - 1, level0Slots, 1<<14 - 1, 1 << 20, 1<<32 - 1, 1 << 32} {
		w := New(0, time.Duration(tick))
		m := newModel(0, time.Duration(tick))
		// Bring the wheel to base with a timer, so that cur moves there.
		w.Add(base*tick, 0)
		m.add(base*tick, 0, Timer{})
		drainLikeModel(t, w, m, base*tick)
		var data uint64
		var times []int64
		for _, s := range spans {
			for _, k := range []int64{1, 2, 63, 64, 65} {
				for _, off := range []int64{-tick, -1, 0, 1, tick} {
					d := (base+k*s)*tick + off
					data++
					m.add(d, data, w.Add(d, data))
					times = append(times, d-1, d, d+tick)
				}
			}
		}
		slices.Sort(times)
		if jump {
			times = times[len(times)-1:]
		}
		for _, now := range slices.Compact(times) {
			drainLikeModel(t, w, m, now)
			if w.Len() != m.len() {
				t.Fatalf("base %d, at %d: Len %d, model %d", base, now, w.Len(), m.len())
			}
			checkNextDeadline(t, w, m)
		}
		if w.Len() != 0 {
			t.Fatalf("base %d: %d timers left", base, w.Len())
		}
	}
}
