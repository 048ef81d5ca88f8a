package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// syLimiterIdle fails t unless lm has nobody inside or waiting. The rate
// counter is left alone: it counts the entries of the current period.
func syLimiterIdle(t *testing.T, lm *vm.Limiter) {
	t.Helper()
	c, r := lm.Stats()
	syStats(t, "concurrency", c, 0, 0)
	if r.Queued != 0 {
		t.Fatalf("rate: %+v, want nobody queued", r)
	}
}

// Zero options take the FTN12 defaults: one flow inside, none waiting for
// it, one entry per second, none waiting for the rate.
func TestLimiterDefaults(t *testing.T) {
	l, clk := syLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{})
	var log syLog
	start := func(name string, section vm.ExecFunc) *vm.Future {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Sync(lm, section)
		}, func(as vm.AsyncSteps, code string) {
			log.add("%s at %d: %s %s", name, syMs(clk), code, as.State().ErrorInfo())
		})
		return root.Promise()
	}
	fa := start("A", syWaitFor(&log, "A", 10*time.Millisecond))
	fb := start("B", syHold(&log, "B"))
	l.RunUntilIdle()
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	fc := start("C", syHold(&log, "C"))
	l.RunUntilIdle()
	clk.Advance(990 * time.Millisecond)
	l.RunUntilIdle()
	fd := start("D", syHold(&log, "D"))
	l.RunUntilIdle()
	syExpect(t, &log,
		"enter A",
		"B at 0: DefenseRejected Mutex queue limit",
		"leave A",
		"C at 10: DefenseRejected Throttle queue limit",
		"enter D", "leave D")
	for i, f := range []*vm.Future{fa, fb, fc, fd} {
		syWant(t, f, []string{"ok", vm.DefenseRejected, vm.DefenseRejected, "ok"}[i], "flow ", i)
	}
	syLimiterIdle(t, lm)
	syIdle(t, l)
}

// Both limits hold together: never more than Concurrent flows inside, never
// more than Rate entries per Period; a flow holds its place inside while it
// waits for the rate.
func TestLimiterBothLimits(t *testing.T) {
	l, clk := syLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{
		Concurrent: 2, MaxQueue: vm.Unbounded,
		Rate: 3, Period: 100 * time.Millisecond, Burst: vm.Unbounded,
	})
	var log syLog
	inside, most := 0, 0
	perPeriod := map[int64]int{}
	var futs []*vm.Future
	for i := range 10 {
		root := l.NewSteps()
		root.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
			inside++
			most = max(most, inside)
			now := syMs(clk)
			perPeriod[now/100]++
			log.add("%d at %d", i, now)
			l := as.Tool()
			h := l.Deferred(30*time.Millisecond, func() {
				inside--
				as.Success()
			})
			as.SetCancel(func(vm.AsyncSteps) { l.Cancel(h) })
		})
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	c, r := lm.Stats()
	syStats(t, "concurrency at 0", c, 2, 8)
	syStats(t, "rate at 0", r, 2, 0)
	for range 50 {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	// The periods start at 0: the Throttle is never idle in between.
	syExpect(t, &log,
		"0 at 0", "1 at 0", "2 at 30", // 3 waits for the rate, holding its place
		"3 at 100", "4 at 100", "5 at 130",
		"6 at 200", "7 at 200", "8 at 230",
		"9 at 300")
	if most != 2 {
		t.Fatalf("at most %d flows inside, want 2", most)
	}
	for p, n := range perPeriod {
		if n > 3 {
			t.Fatalf("%d entries in period %d", n, p)
		}
	}
	for i, f := range futs {
		syWant(t, f, "ok", "flow ", i)
	}
	syLimiterIdle(t, lm)
	syIdle(t, l)
}

// A flow refused by the rate gives its place inside back.
func TestLimiterRateRejectReleases(t *testing.T) {
	l, _ := syLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 2, Rate: 1})
	var log syLog
	a := l.NewSteps()
	a.Sync(lm, syHold(&log, "A"))
	fa := a.Promise()
	b := l.NewSteps()
	b.Sync(lm, syHold(&log, "B"), func(as vm.AsyncSteps, code string) {
		log.add("B section handler %s", code) // not called: the section never started
	})
	b.Add(func(vm.AsyncSteps, vm.Args) { log.add("B next step") })
	fb := b.Promise()
	l.Iterate()
	c, _ := lm.Stats()
	syStats(t, "B refused", c, 1, 0)
	l.RunUntilIdle()
	syExpect(t, &log, "enter A", "leave A")
	syWant(t, fa, "ok", "A")
	syWant(t, fb, vm.DefenseRejected, "B")
	syLimiterIdle(t, lm)
	syIdle(t, l)
}

// A flow re-entering a Limiter keeps its one place inside but counts
// against the rate again.
func TestLimiterReentry(t *testing.T) {
	l, clk := syLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{Rate: 2, Period: 100 * time.Millisecond, Burst: 1})
	var log syLog
	root := l.NewSteps()
	root.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
		log.add("outer at %d", syMs(clk))
		as.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("nested at %d", syMs(clk))
			as.Sync(lm, syEnterAt(&log, clk, "nested twice"))
		})
	})
	f := root.Promise()
	l.RunUntilIdle()
	c, r := lm.Stats()
	syStats(t, "concurrency at 0", c, 1, 0)
	syStats(t, "rate at 0", r, 2, 1)
	clk.Advance(100 * time.Millisecond)
	l.RunUntilIdle()
	syExpect(t, &log, "outer at 0", "nested at 0", "nested twice at 100")
	syWant(t, f, "ok")
	syLimiterIdle(t, lm)
	syIdle(t, l)
}

func TestNewLimiterPanics(t *testing.T) {
	l := vm.NewLoop()
	for _, o := range []vm.LimiterOptions{
		{Concurrent: -1},
		{Rate: -1},
		{Period: -time.Second},
		{MaxQueue: -2},
		{Burst: -2},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLimiter(%+v) did not panic", o)
				}
			}()
			vm.NewLimiter(l, o)
		}()
	}
}

// A section receives the values its Sync step received, and passes its own
// on, however the flow enters: through both limits at once (the dispatch
// goes on with the same values twice), waiting for the rate only, or
// waiting for a place inside and then for the rate. Four values take the
// run queue's spilled form. The flow entering at once does so after pre
// steps run back to back, at and past the end of the inline budget.
func TestLimiterPassesValuesAtEveryEntry(t *testing.T) {
	for _, pre := range []int{0, 255, 256} {
		l, clk := syLoop()
		lm := vm.NewLimiter(l, vm.LimiterOptions{
			Concurrent: 2, MaxQueue: vm.Unbounded,
			Rate: 1, Period: 10 * time.Millisecond, Burst: vm.Unbounded,
		})
		var log syLog
		start := func(i int, pre int, hold time.Duration) *vm.Future {
			name := string(rune('A' + i))
			root := l.NewSteps()
			for range pre {
				root.Add(func(vm.AsyncSteps, vm.Args) {})
			}
			root.SuccessStep(vm.Int(int64(i)), vm.Str(name), vm.Bool(true), vm.Float(0.5))
			root.Sync(lm, func(as vm.AsyncSteps, a vm.Args) {
				log.add("%s at %d got %d %s %v %v (%d values)", name, syMs(clk), a.Int(0), a.String(1), a.Bool(2), a.Get(3).Float(), a.Len())
				if hold == 0 {
					as.Success(vm.Int(int64(i+10)), vm.Str(name+"!"))
					return
				}
				h := l.Deferred(hold, func() { as.Success(vm.Int(int64(i+10)), vm.Str(name+"!")) })
				as.SetCancel(func(vm.AsyncSteps) { l.Cancel(h) })
			})
			root.Add(func(as vm.AsyncSteps, a vm.Args) {
				log.add("after %s: %d %s (%d values)", name, a.Int(0), a.String(1), a.Len())
			})
			return root.Promise()
		}
		fa := start(0, pre, 20*time.Millisecond)
		l.RunUntilIdle()
		fb := start(1, 0, 0)
		fc := start(2, 0, 0)
		for range 4 {
			l.RunUntilIdle()
			clk.Advance(10 * time.Millisecond)
		}
		l.RunUntilIdle()
		syExpect(t, &log,
			"A at 0 got 0 A true 0.5 (4 values)",
			"B at 10 got 1 B true 0.5 (4 values)",
			"after B: 11 B! (2 values)",
			"after A: 10 A! (2 values)",
			"C at 20 got 2 C true 0.5 (4 values)",
			"after C: 12 C! (2 values)")
		for i, f := range []*vm.Future{fa, fb, fc} {
			syWant(t, f, "ok", "flow ", i, " after ", pre, " steps")
		}
		syLimiterIdle(t, lm)
		syIdle(t, l)
	}
}

// A zero Limiter, which no flow can enter, has zero counters.
func TestLimiterZeroStats(t *testing.T) {
	c, r := new(vm.Limiter).Stats()
	if c != (vm.SyncStats{}) || r != (vm.SyncStats{}) {
		t.Fatalf("Stats of a zero Limiter: %+v, %+v", c, r)
	}
}
