package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/allocs"
	"github.com/stepvm/stepvm/vm"
)

// syEnterAt returns a section that logs "name at <ms>" with the loop's
// time.
func syEnterAt(log *syLog, clk *vm.ManualClock, name string) vm.ExecFunc {
	return func(vm.AsyncSteps, vm.Args) { log.add("%s at %d", name, syMs(clk)) }
}

// At most max entries per period; the others wait and enter, max at a
// time, as periods pass. With nobody waiting at the end of a period the
// Throttle goes idle, and the next entry starts a new period.
func TestThrottlePeriods(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 2, 100*time.Millisecond, vm.Unbounded)
	var log syLog
	var futs []*vm.Future
	for _, name := range []string{"A", "B", "C", "D", "E"} {
		root := l.NewSteps()
		root.Sync(th, syEnterAt(&log, clk, name))
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	syStats(t, "at 0", th.Stats(), 2, 3)
	for range 3 {
		clk.Advance(50 * time.Millisecond)
		l.RunUntilIdle()
	}
	syStats(t, "at 150", th.Stats(), 2, 1)
	for range 3 {
		clk.Advance(50 * time.Millisecond)
		l.RunUntilIdle()
	}
	syStats(t, "at 300", th.Stats(), 0, 0)
	if n := l.Stats().Timers; n != 0 {
		t.Fatalf("%d timers pending on an idle Throttle", n)
	}
	clk.Advance(30 * time.Millisecond)
	for _, name := range []string{"F", "G", "H"} {
		root := l.NewSteps()
		root.Sync(th, syEnterAt(&log, clk, name))
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	clk.Advance(99 * time.Millisecond)
	l.RunUntilIdle()
	clk.Advance(1 * time.Millisecond)
	l.RunUntilIdle()
	syExpect(t, &log,
		"A at 0", "B at 0", "C at 100", "D at 100", "E at 200",
		"F at 330", "G at 330", "H at 430")
	for i, f := range futs {
		syWant(t, f, "ok", "flow ", i)
	}
	if s := th.Stats(); s.Entered != 8 || s.Queued != 0 {
		t.Fatalf("%+v", s)
	}
	clk.Advance(100 * time.Millisecond)
	l.RunUntilIdle()
	if n := l.Stats().Timers; n != 0 {
		t.Fatalf("%d timers pending on an idle Throttle", n)
	}
	syIdle(t, l)
}

// Every entry counts, a flow's nested entries too; a nested entry over the
// limit waits for the next period like any other.
func TestThrottleNestedCounted(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 2, 100*time.Millisecond, vm.Unbounded)
	var log syLog
	a := l.NewSteps()
	a.Sync(th, func(as vm.AsyncSteps, _ vm.Args) {
		log.add("A at %d", syMs(clk))
		as.Sync(th, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("A nested at %d", syMs(clk))
			as.Sync(th, syEnterAt(&log, clk, "A nested twice"))
		})
	})
	fa := a.Promise()
	b := l.NewSteps()
	b.Add(func(vm.AsyncSteps, vm.Args) {})
	b.Sync(th, syEnterAt(&log, clk, "B"))
	fb := b.Promise()
	l.RunUntilIdle()
	syStats(t, "at 0", th.Stats(), 2, 2)
	clk.Advance(100 * time.Millisecond)
	l.RunUntilIdle()
	clk.Advance(100 * time.Millisecond)
	l.RunUntilIdle()
	syExpect(t, &log, "A at 0", "A nested at 0", "B at 100", "A nested twice at 100")
	syWant(t, fa, "ok", "A")
	syWant(t, fb, "ok", "B")
	if s := th.Stats(); s.Entered != 4 {
		t.Fatalf("%+v, want 4 entries", s)
	}
	syIdle(t, l)
}

// A full queue refuses new entries with DefenseRejected; queued ones keep
// their place.
func TestThrottleQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		maxQueue int
		want     []string
	}{
		{0, []string{"A at 0", "B: DefenseRejected Throttle queue limit", "C: DefenseRejected Throttle queue limit"}},
		{1, []string{"A at 0", "C: DefenseRejected Throttle queue limit", "B at 1000"}},
		{vm.Unbounded, []string{"A at 0", "B at 1000", "C at 2000"}},
	} {
		l, clk := syLoop()
		th := vm.NewThrottle(l, 1, time.Second, tc.maxQueue)
		var log syLog
		for _, name := range []string{"A", "B", "C"} {
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Sync(th, syEnterAt(&log, clk, name))
			}, func(as vm.AsyncSteps, code string) {
				log.add("%s: %s %s", name, code, as.State().ErrorInfo())
			})
			root.Execute()
		}
		for range 4 {
			l.RunUntilIdle()
			clk.Advance(time.Second)
		}
		l.RunUntilIdle()
		syExpect(t, &log, tc.want...)
		s := th.Stats()
		rejected := syCount(tc.want, vm.DefenseRejected)
		if int(s.Rejected) != rejected || int(s.Entered) != 3-rejected || s.Queued != 0 {
			t.Fatalf("maxQueue %d: %+v", tc.maxQueue, s)
		}
		syIdle(t, l)
	}
}

// Flows that time out or are canceled while they wait leave the queue;
// the others keep their order.
func TestThrottleLeaveQueue(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 1, 100*time.Millisecond, vm.Unbounded)
	var log syLog
	var roots []vm.AsyncSteps
	var futs []*vm.Future
	for _, name := range []string{"A", "B", "C", "D", "E"} {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if name == "B" {
				as.SetTimeout(50 * time.Millisecond)
			}
			as.Sync(th, syEnterAt(&log, clk, name))
		})
		roots = append(roots, root)
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	syStats(t, "at 0", th.Stats(), 1, 4)
	roots[3].Cancel() // D
	syStats(t, "D canceled", th.Stats(), 1, 3)
	clk.Advance(50 * time.Millisecond)
	l.RunUntilIdle()
	syStats(t, "B timed out", th.Stats(), 1, 2)
	for range 4 {
		clk.Advance(50 * time.Millisecond)
		l.RunUntilIdle()
	}
	syExpect(t, &log, "A at 0", "C at 100", "E at 200")
	syStats(t, "at 250", th.Stats(), 1, 0)
	clk.Advance(50 * time.Millisecond)
	l.RunUntilIdle()
	for i, want := range []string{"ok", vm.Timeout, "ok", "canceled", "ok"} {
		syWant(t, futs[i], want, "flow ", i)
	}
	syEnd(t, l, th.Stats())
}

// A flow that waits keeps the values it entered with, and the section's
// values reach the next step.
func TestThrottlePassesValues(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 1, time.Second, vm.Unbounded)
	var log syLog
	for i := range 2 {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(int64(i)), vm.Str("v")) })
		root.Sync(th, func(as vm.AsyncSteps, a vm.Args) {
			log.add("section got %d %s at %d", a.Int(0), a.String(1), syMs(clk))
			as.Success(vm.Int(a.Int(0) + 10))
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %d", a.Int(0)) })
		root.Execute()
	}
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	syExpect(t, &log, "section got 0 v at 0", "next got 10", "section got 1 v at 1000", "next got 11")
	clk.Advance(time.Second)
	l.RunUntilIdle()
	syIdle(t, l)
}

// Nothing is held inside a Throttle: a section that fails changes no
// counter, and the flows behind it enter on schedule.
func TestThrottleFaultInSection(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 2, time.Second, vm.Unbounded)
	var log syLog
	var futs []*vm.Future
	fail := []func(vm.AsyncSteps){
		func(as vm.AsyncSteps) { as.Error("Boom") },
		func(vm.AsyncSteps) { panic("kaboom") },
		func(vm.AsyncSteps) {},
	}
	for i, f := range fail {
		root := l.NewSteps()
		root.Sync(th, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("%d at %d", i, syMs(clk))
			f(as)
		}, func(as vm.AsyncSteps, code string) {
			s := th.Stats()
			log.add("%d handler %s: inside %d queued %d", i, code, s.Inside, s.Queued)
		})
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	syExpect(t, &log,
		"0 at 0", "0 handler Boom: inside 1 queued 0",
		"1 at 0", "1 handler InternalError: inside 2 queued 0",
		"2 at 1000")
	for i, want := range []string{"Boom", vm.InternalError, "ok"} {
		syWant(t, futs[i], want, "flow ", i)
	}
	clk.Advance(time.Second)
	l.RunUntilIdle()
	syIdle(t, l)
}

// A Throttle serves the flows of its own loop only.
func TestThrottleOtherLoop(t *testing.T) {
	l1, _ := syLoop()
	l2, _ := syLoop()
	th := vm.NewThrottle(l1, 1, time.Second, vm.Unbounded)
	root := l2.NewSteps()
	root.Sync(th, func(vm.AsyncSteps, vm.Args) { t.Error("section ran") })
	f := root.Promise()
	l2.RunUntilIdle()
	syWant(t, f, vm.InternalError)
	if s := th.Stats(); s != (vm.SyncStats{}) {
		t.Fatalf("%+v", s)
	}
}

func TestNewThrottlePanics(t *testing.T) {
	l := vm.NewLoop()
	for _, tc := range []struct {
		l        *vm.Loop
		max      int
		period   time.Duration
		maxQueue int
	}{
		{nil, 1, time.Second, 0},
		{l, 0, time.Second, 0},
		{l, 1, 0, 0},
		{l, 1, time.Second, -2},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewThrottle%v did not panic", tc)
				}
			}()
			vm.NewThrottle(tc.l, tc.max, tc.period, tc.maxQueue)
		}()
	}
}

// Waiting in a Throttle and being admitted when a period ends allocates
// nothing once the queue and the loop's timers have grown.
func TestThrottleAllocs(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 1, time.Millisecond, vm.Unbounded)
	ran, queued := 0, 0
	section := func(vm.AsyncSteps, vm.Args) {
		ran++
		queued = max(queued, th.Stats().Queued)
	}
	roots := []vm.AsyncSteps{l.NewSteps(), l.NewSteps(), l.NewSteps()}
	run := func() {
		for _, root := range roots {
			root.Sync(th, section)
			root.Execute()
		}
		for range 4 {
			l.RunUntilIdle()
			clk.Advance(time.Millisecond)
		}
		l.RunUntilIdle()
	}
	run()
	if queued == 0 {
		t.Fatal("no flow waited")
	}
	if a := allocs.Count(200, run); a != 0 {
		t.Fatalf("%d allocations in 200 runs, want 0", a)
	}
	if ran != 3*202 {
		t.Fatalf("%d sections ran", ran)
	}
}
