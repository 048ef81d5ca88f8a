package wheel

import (
	"testing"
	"time"
)

// Benchmarks run with 1000 timers pending, spread over 10 s, as in the VM's
// event loop. The time.AfterFunc benchmark is the same Add+Stop workload on
// the runtime's timers, for comparison.

// scatter returns a deterministic pseudo-random offset in [0, span).
func scatter(i int, span time.Duration) int64 {
	return int64(uint64(i) * 0x9E3779B97F4A7C15 % uint64(span))
}

func BenchmarkAddStop(b *testing.B) {
	w, now := steady(1000, 10*time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Stop(w.Add(now+scatter(i, 10*time.Second), uint64(i)))
	}
}

// BenchmarkAddPop adds timers at random points up to 10 s ahead and moves
// the clock 5 ms per timer, popping what is due: about 1000 stay pending,
// and each operation pays for one Add, one Pop and the timer's cascades.
func BenchmarkAddPop(b *testing.B) {
	const span = 10 * time.Second
	w, now := steady(1000, span)
	step := int64(span) / 2000
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Add(now+scatter(i, span), uint64(i))
		now += step
		for {
			if _, ok := w.Pop(now); !ok {
				break
			}
		}
	}
}

func BenchmarkTimeAfterFuncStop(b *testing.B) {
	f := func() {}
	// Pending timers an hour out, so none fires during the run.
	pending := make([]*time.Timer, 1000)
	for i := range pending {
		pending[i] = time.AfterFunc(time.Hour+time.Duration(scatter(i, 10*time.Second)), f)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		time.AfterFunc(time.Hour+time.Duration(scatter(i, 10*time.Second)), f).Stop()
	}
	b.StopTimer()
	for _, t := range pending {
		t.Stop()
	}
}
