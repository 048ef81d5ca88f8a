package fuzz

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stepvm/stepvm/fuzz/prog"
	"github.com/stepvm/stepvm/internal/specflow"
	"github.com/stepvm/stepvm/vm"
)

// The same program must behave the same whichever way its loop is driven.
// Run drives it with Iterate, moving the manual clock on by the delay each
// Iterate reports once only timers are left; the drivers below drive it
// otherwise, and every trace must equal that one line for line, every root
// must complete exactly once and the loop end clean (run's checks).
//
// The clock moves by whole ticks from a whole second, so a deadline is the
// same instant whichever way the clock reaches it: Iterate's delay (at
// least a tick) jumps to the next deadline, a driver that moves the clock a
// tick at a time passes the instants between with empty passes, which do
// nothing. Only the system clock may legitimately reorder events, and only
// events that a manual clock puts in the same instant or a tick apart.

// untilIdle drives h with RunUntilIdle, moving the clock on a tick at a
// time while timers are pending. RunUntilIdle returns only once the loop
// is idle: it serves only programs that do not run on past a truncated
// trace.
func untilIdle(h *harness) {
	for steps := 0; !h.out.Truncated; steps++ {
		if steps > h.lim.MaxPasses {
			h.fail("the VM did not settle in %d clock steps", h.lim.MaxPasses)
			return
		}
		h.loop.RunUntilIdle()
		if h.out.Truncated {
			break
		}
		if h.loop.Stats().Timers > 0 {
			h.clock.Advance(time.Millisecond)
			continue
		}
		if !h.sweep() {
			break
		}
	}
	h.flushDone()
}

// snapshot is what a probe saw of the loop and the run at the end of a
// pass.
type snapshot struct {
	queued, timers int
	running, arena int64
	lines          int
	truncated      bool
	done           int
}

// runDriver drives a harness with Run on a goroutine of its own, from the
// calling goroutine, which tells that the loop is idle by probes it posts.
type runDriver struct {
	h    *harness
	stop context.CancelFunc
	exit chan any // what Run's goroutine ended with: a panic, or nil
	snap chan snapshot
}

func (d *runDriver) start(h *harness) {
	ctx, stop := context.WithCancel(context.Background())
	d.h, d.stop, d.exit, d.snap = h, stop, make(chan any, 1), make(chan snapshot, 1)
	go func() {
		defer func() { d.exit <- recover() }()
		if err := h.loop.Run(ctx); err != nil && err != context.Canceled {
			h.fail("Run returned %v", err)
		}
	}()
}

// finish stops Run and waits for it; a panic that ended Run goes on here,
// where run reports it.
func (d *runDriver) finish() {
	d.stop()
	if p := <-d.exit; p != nil {
		panic(p)
	}
	d.h.flushDone()
}

// probe posts to the loop a callback that sets a zero timer, and returns
// what the timer's callback saw. The timer fires at the end of the pass,
// after the timers due before it and the steps queued when the pass began.
func (d *runDriver) probe() (snapshot, bool) {
	h := d.h
	if !h.loop.Post(func() {
		h.loop.Deferred(0, func() {
			st := h.loop.Stats()
			n := 0
			for _, rr := range h.roots {
				if done(rr.fut) {
					n++
				}
			}
			d.snap <- snapshot{st.Queued, st.Timers, st.RunningRoots, st.ArenaInUse, len(h.out.Lines), h.out.Truncated, n}
		})
	}) {
		h.fail("Post refused")
		return snapshot{}, false
	}
	return d.await()
}

func (d *runDriver) await() (snapshot, bool) {
	tm := time.NewTimer(30 * time.Second)
	defer tm.Stop()
	select {
	case s := <-d.snap:
		return s, true
	case p := <-d.exit:
		d.exit <- p // for finish
		return snapshot{}, false
	case <-tm.C:
		buf := make([]byte, 1<<20)
		d.h.fail("the loop did not answer a probe in 30s\n%s", buf[:runtime.Stack(buf, true)])
		return snapshot{}, false
	}
}

// idle waits until the loop is idle: two probes, one pass or more apart,
// see nothing queued and the same loop and run. It returns the second.
func (d *runDriver) idle() (snapshot, bool) {
	for {
		s1, ok := d.probe()
		if !ok || s1.truncated {
			return s1, ok
		}
		if s1.queued > 0 {
			continue
		}
		s2, ok := d.probe()
		if !ok || s2 == s1 {
			return s2, ok
		}
	}
}

// sweep runs h.sweep on the loop.
func (d *runDriver) sweep() bool {
	found := make(chan bool, 1)
	d.h.loop.Post(func() { found <- d.h.sweep() })
	select {
	case f := <-found:
		return f
	case p := <-d.exit:
		d.exit <- p
		return false
	}
}

// runManual drives h with Run, moving the manual clock on a tick at a time
// once the loop is idle with timers pending, from where advance says.
func runManual(advance func(d *runDriver)) func(h *harness) {
	return func(h *harness) {
		var d runDriver
		d.start(h)
		defer d.finish()
		for steps := 0; ; steps++ {
			if steps > h.lim.MaxPasses {
				h.fail("the VM did not settle in %d clock steps", h.lim.MaxPasses)
				return
			}
			s, ok := d.idle()
			if !ok || s.truncated {
				return
			}
			if s.timers > 0 {
				advance(&d)
				continue
			}
			if !d.sweep() {
				return
			}
		}
	}
}

// Where runManual moves the clock from: the driving goroutine, while Run
// sleeps; a Post callback, before the pass that runs it fires the timers;
// a timer callback, after the pass that runs it fired them (the next pass
// fires those the move made due).
var (
	advanceOutside = func(d *runDriver) { d.h.clock.Advance(time.Millisecond) }
	advanceInPost  = func(d *runDriver) { d.onLoop(func() { d.h.clock.Advance(time.Millisecond) }) }
	advanceInTimer = func(d *runDriver) {
		d.onLoop(func() { d.h.loop.Deferred(0, func() { d.h.clock.Advance(time.Millisecond) }) })
	}
)

// onLoop posts fn to the loop.
func (d *runDriver) onLoop(fn func()) {
	if !d.h.loop.Post(fn) {
		d.h.fail("Post refused")
	}
}

// runSystem drives h with Run on the system clock: it waits for the
// timers.
func runSystem(h *harness) {
	var d runDriver
	d.start(h)
	defer d.finish()
	for {
		s, ok := d.idle()
		if !ok || s.truncated {
			return
		}
		if s.timers > 0 {
			time.Sleep(time.Millisecond / 4) // for the timers, on the clock
			continue
		}
		if !d.sweep() {
			return
		}
	}
}

// closeThenIterate drives h with Run until the loop is first idle, then
// closes the loop, which ends Run, and goes on by hand with Iterate: the
// flows stay as they were.
func closeThenIterate(h *harness) {
	var d runDriver
	d.start(h)
	s, ok := d.idle()
	h.loop.Close()
	if p := <-d.exit; p != nil {
		panic(p)
	}
	if ok && !s.truncated {
		h.drive()
	}
	h.flushDone()
}

// handoff hands the loop back and forth between Run on a goroutine of
// its own and Iterate on the calling goroutine, one idle point each,
// moving the clock on a tick at a time in between.
func handoff(h *harness) {
	defer h.flushDone()
	for round, passes := 0, 0; !h.out.Truncated; round++ {
		if round > h.lim.MaxPasses || passes > h.lim.MaxPasses {
			h.fail("the VM did not settle in %d rounds", h.lim.MaxPasses)
			return
		}
		if round%2 == 0 {
			var d runDriver
			d.start(h)
			_, ok := d.idle()
			d.stop()
			if p := <-d.exit; p != nil {
				panic(p)
			}
			if !ok {
				return
			}
		} else {
			for ; !h.out.Truncated; passes++ {
				if work, delay := h.loop.Iterate(); !work || delay > 0 {
					break
				}
			}
		}
		if h.out.Truncated {
			return
		}
		if h.loop.Stats().Timers > 0 {
			h.clock.Advance(time.Millisecond)
		} else if !h.sweep() {
			return
		}
	}
}

var manualDrivers = []struct {
	name      string
	drive     func(*harness)
	truncates bool // the driver can stop a run whose trace is truncated
}{
	{"RunUntilIdle", untilIdle, false},
	{"Run", runManual(advanceOutside), true},
	{"Run, Advance in a Post", runManual(advanceInPost), true},
	{"Run, Advance in a timer", runManual(advanceInTimer), true},
	{"Close", closeThenIterate, true},
	{"handoff", handoff, true},
}

// sameUnderDrivers runs p with Run and with each driver, and fails t unless
// every run keeps the harness's checks and gives the same trace.
func sameUnderDrivers(t *testing.T, name string, p *prog.Program, lim prog.Limits) {
	t.Helper()
	want, err := Run(p, lim, Options{})
	if err != nil {
		t.Fatalf("%s: Iterate: %v\nprogram:\n%s", name, err, p)
	}
	for _, d := range manualDrivers {
		if want.Truncated && !d.truncates {
			continue
		}
		got, err := run(program(p), lim, Options{}, vm.NewManualClock(time.Unix(1_700_000_000, 0)), d.drive)
		if err != nil {
			t.Fatalf("%s: %s: %v\nprogram:\n%s", name, d.name, err, p)
		}
		if msg := traceDiff(want, got); msg != "" {
			t.Fatalf("%s: %s and Iterate differ: %s\nprogram:\n%s", name, d.name, msg, p)
		}
	}
}

// traceDiff describes where got departs from want, "" if they are equal.
func traceDiff(want, got prog.Trace) string {
	if slices.Equal(want.Lines, got.Lines) && want.Truncated == got.Truncated {
		return ""
	}
	i := 0
	for i < min(len(want.Lines), len(got.Lines)) && want.Lines[i] == got.Lines[i] {
		i++
	}
	return fmt.Sprintf("at line %d: Iterate %q, other %q (truncated %v, %v)", i+1, lineAt(want, i), lineAt(got, i), want.Truncated, got.Truncated)
}

// driverPrograms are the examples and the programs of testdata (seeds).
func driverPrograms(t *testing.T) map[string]*prog.Program {
	out := map[string]*prog.Program{}
	for name, src := range seeds(t) {
		p, err := prog.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = p
	}
	return out
}

// TestDriversCorpus runs the examples and the programs of testdata with
// Iterate and with each driver on a manual clock.
func TestDriversCorpus(t *testing.T) {
	for name, p := range driverPrograms(t) {
		sameUnderDrivers(t, name, p, prog.DefaultLimits)
	}
}

// TestDriversRandomPrograms does so for generated programs.
func TestDriversRandomPrograms(t *testing.T) {
	n := 2500
	if testing.Short() || raceEnabled {
		n = 100
	}
	for i, p := range randomPrograms(21, n) {
		sameUnderDrivers(t, fmt.Sprint("program ", i), p, fuzzLimits)
	}
}

// scaled returns a copy of p whose durations (timeouts, timed completions,
// cancels, throttle and limiter periods) are k times as long. On a manual
// clock that changes no trace; on the system clock it keeps events a
// manual clock puts a tick apart k ticks apart, beyond the jitter of a
// loaded machine.
func scaled(p *prog.Program, k int64) *prog.Program {
	q, err := prog.Parse(p.String())
	if err != nil {
		panic(err)
	}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f, name := v.Field(i), v.Type().Field(i).Name
				if (name == "MS" || name == "PeriodMS" || name == "Cancel") && f.Kind() == reflect.Int64 {
					if f.Int() > 0 {
						f.SetInt(f.Int() * k)
					}
					continue
				}
				walk(f)
			}
		}
	}
	walk(reflect.ValueOf(q))
	return q
}

// TestDriversSystemClock runs the corpus programs whose timers add up to
// a few hundred milliseconds with Run on the system clock, their durations
// scaled by 20: on a manual clock every event of the program comes a whole
// number of ticks after its start, and the scaled program keeps them 20 ms
// apart, so that a timer firing a few milliseconds late changes nothing,
// and neither does immediate work that takes a few milliseconds. (Beyond
// that the system clock may legitimately reorder: a timer due while a long
// chain of turns still runs fires in its middle, where a manual clock runs
// the whole chain first.)
func TestDriversSystemClock(t *testing.T) {
	const k = 20
	var names []string
	progs := driverPrograms(t)
	for name := range progs {
		names = append(names, name)
	}
	slices.Sort(names)
	ran := 0
	for _, name := range names {
		p := scaled(progs[name], k)
		var took time.Duration
		want, err := run(program(p), prog.DefaultLimits, Options{}, vm.NewManualClock(time.Unix(1_700_000_000, 0)), func(h *harness) {
			start := h.clock.Now()
			h.drive()
			took = h.clock.Now().Sub(start)
		})
		if err != nil {
			t.Fatalf("%s: Iterate: %v", name, err)
		}
		if want.Truncated || took > 400*time.Millisecond {
			continue
		}
		ran++
		got, err := run(program(p), prog.DefaultLimits, Options{}, nil, runSystem)
		if err != nil {
			t.Fatalf("%s: Run on the system clock: %v\nprogram:\n%s", name, err, p)
		}
		if msg := traceDiff(want, got); msg != "" {
			t.Errorf("%s: Run on the system clock and Iterate differ: %s\nprogram:\n%s", name, msg, p)
		}
	}
	t.Logf("%d programs", ran)
}

// TestDriversSpecFlows runs the specification's examples, all at once on
// one loop, with Iterate and with each driver.
func TestDriversSpecFlows(t *testing.T) {
	load := func(h *harness) {
		for _, f := range specflow.All {
			r := h.loop.NewSteps()
			rr := &rootRun{name: f.Name, as: r}
			h.roots = append(h.roots, rr)
			h.byState[r.State()] = rr
			f.Build(r, func(s string) { h.emit(rr, "print "+s) })
			rr.fut = r.Promise()
		}
	}
	clock := func() vm.Clock { return vm.NewManualClock(time.Unix(1_700_000_000, 0)) }
	want, err := run(load, prog.DefaultLimits, Options{}, clock(), (*harness).drive)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range manualDrivers {
		got, err := run(load, prog.DefaultLimits, Options{}, clock(), d.drive)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		if msg := traceDiff(want, got); msg != "" {
			t.Errorf("%s and Iterate differ: %s", d.name, msg)
		}
	}
	got, err := run(load, prog.DefaultLimits, Options{}, nil, runSystem)
	if err != nil {
		t.Fatalf("Run on the system clock: %v", err)
	}
	if msg := traceDiff(want, got); msg != "" {
		t.Errorf("Run on the system clock and Iterate differ: %s", msg)
	}
}
