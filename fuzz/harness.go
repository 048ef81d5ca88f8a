package fuzz

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/stepvm/stepvm/fuzz/prog"
	"github.com/stepvm/stepvm/vm"
)

// Options tune a run on the VM.
type Options struct {
	// GC runs the garbage collector after every pass of the loop, so that
	// a value the VM keeps where the collector cannot see it is freed
	// while still in use (and the trace shows garbage).
	GC bool
}

// Run runs p on the VM, with a manual clock, and returns its trace. The
// error reports a broken invariant of the VM: a panic that escaped it, a
// root that did not complete exactly once, arena memory still in use once
// every root is released, stack memory that was not zeroed or was
// overwritten, a loop callback that panicked, or a run that did not settle
// within lim.MaxPasses passes.
func Run(p *prog.Program, lim prog.Limits, opt Options) (tr prog.Trace, err error) {
	return run(program(p), lim, opt, vm.NewManualClock(time.Unix(1_700_000_000, 0)), (*harness).drive)
}

// program loads p into a harness.
func program(p *prog.Program) func(*harness) {
	return func(h *harness) {
		h.ids = prog.IDs(p)
		h.load(p)
	}
}

// run is Run of the roots that load sets up, on a loop that reads clock
// (nil: the system clock; h.clock is clock if it is a ManualClock), driven
// by drive: one that runs passes until every root completed, canceling
// with sweep the roots left running once nothing can move them, and stops
// once the trace is truncated.
func run(load func(*harness), lim prog.Limits, opt Options, clock vm.Clock, drive func(*harness)) (tr prog.Trace, err error) {
	manual, _ := clock.(*vm.ManualClock)
	h := &harness{
		lim:     lim,
		opt:     opt,
		clock:   manual,
		byState: map[*vm.State]*rootRun{},
		models:  map[string]vm.AsyncSteps{},
		mutexes: map[string]vm.ISync{},
		waiting: map[vm.AsyncSteps]bool{},
		failed:  new(error),
	}
	// The panic handler reaches the loop only through failed, not h.
	failed := h.failed
	opts := []vm.LoopOption{vm.WithPanicHandler(func(v any) {
		if *failed == nil {
			*failed = fmt.Errorf("a loop callback panicked: %v", v)
		}
	})}
	if clock != nil {
		opts = append(opts, vm.WithClock(clock))
	}
	h.loop = vm.NewLoop(opts...)
	defer func() {
		if r := recover(); r != nil {
			tr, err = h.out, fmt.Errorf("panic escaped the VM: %v\n%s", r, debug.Stack())
		}
	}()
	defer h.dispose()
	load(h)
	drive(h)
	h.check()
	if *h.failed != nil {
		h.fail("%v", *h.failed)
	}
	return h.out, h.err
}

type harness struct {
	ids   map[prog.Stmt]string
	lim   prog.Limits
	opt   Options
	out   prog.Trace
	err   error
	loop  *vm.Loop
	clock *vm.ManualClock

	roots   []*rootRun
	byState map[*vm.State]*rootRun
	models  map[string]vm.AsyncSteps
	modelAs []vm.AsyncSteps
	mutexes map[string]vm.ISync // *vm.Mutex, *vm.Throttle or *vm.Limiter
	// waiting holds the steps the harness is to complete: a step leaves it
	// when its error handler runs (the completion is then dropped, as the
	// model does).
	waiting map[vm.AsyncSteps]bool
	allocs  byte
	failed  *error // set by the loop's panic handler
}

type rootRun struct {
	name     string
	as       vm.AsyncSteps
	fut      *vm.Future
	reported bool
}

func (h *harness) fail(format string, args ...any) {
	if h.err == nil {
		h.err = fmt.Errorf(format, args...)
	}
}

// load builds the mutexes, models and roots, executes the roots in order
// and schedules the cancels.
func (h *harness) load(p *prog.Program) {
	l := h.loop
	for _, d := range p.Decls {
		switch d := d.(type) {
		case *prog.Mutex:
			if d.Limiter {
				h.mutexes[d.Name] = vm.NewLimiter(l, vm.LimiterOptions{Concurrent: d.Max, MaxQueue: d.Queue,
					Rate: d.Rate, Period: time.Duration(d.PeriodMS) * time.Millisecond, Burst: d.Burst})
			} else if d.PeriodMS > 0 {
				h.mutexes[d.Name] = vm.NewThrottle(l, d.Max, time.Duration(d.PeriodMS)*time.Millisecond, d.Queue)
			} else {
				h.mutexes[d.Name] = vm.NewMutex(d.Max, d.Queue)
			}
		case *prog.Model:
			m := l.NewSteps()
			h.build(m, d.Body)
			h.models[d.Name] = m
			h.modelAs = append(h.modelAs, m)
		case *prog.Root:
			r := l.NewSteps()
			rr := &rootRun{name: d.Name, as: r}
			h.roots = append(h.roots, rr)
			h.byState[r.State()] = rr
			h.build(r, d.Body)
			rr.fut = r.Promise()
		}
	}
	i := 0
	for _, d := range p.Decls {
		if r, ok := d.(*prog.Root); ok {
			rr := h.roots[i]
			i++
			if r.Cancel >= 0 {
				l.Deferred(time.Duration(r.Cancel)*time.Millisecond, func() { rr.as.Cancel() })
			}
		}
	}
}

// build adds the level 0 steps and sets the state of a root or model.
func (h *harness) build(r vm.AsyncSteps, body []prog.Stmt) {
	for _, s := range body {
		if set, ok := s.(*prog.Set); ok {
			sc := prog.Scope{State: stateOf(r)}
			r.State().Set(set.Var, sc.Expand(set.Text))
			continue
		}
		h.add(r, s, prog.LoopVars{})
	}
}

func stateOf(as vm.AsyncSteps) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := as.State().Get(k)
		s, _ := v.(string)
		return s, ok
	}
}

// drive runs the loop, advancing the clock whenever only timers are left,
// and cancels the roots left running once nothing can move them.
func (h *harness) drive() {
	for passes := 0; !h.out.Truncated; passes++ {
		if passes > h.lim.MaxPasses {
			h.fail("the VM did not settle in %d passes", h.lim.MaxPasses)
			return
		}
		work, delay := h.loop.Iterate()
		if h.opt.GC {
			runtime.GC()
		}
		if !work {
			if !h.sweep() {
				break
			}
			continue
		}
		if delay > 0 {
			h.clock.Advance(delay)
		}
	}
	h.flushDone()
}

func (h *harness) sweep() bool {
	found := false
	for _, rr := range h.roots {
		if !done(rr.fut) {
			found = true
			h.emit(rr, "stalled")
			rr.as.Cancel()
		}
	}
	return found
}

// check verifies what must hold once the run is over, then releases
// every root.
func (h *harness) check() {
	st := h.loop.Stats()
	if !h.out.Truncated {
		for _, rr := range h.roots {
			if !rr.reported {
				h.fail("root %s did not complete", rr.name)
			}
		}
		if st.RunningRoots != 0 || st.Queued != 0 || st.Timers != 0 {
			h.fail("idle loop with %d running roots, %d queued tasks, %d timers", st.RunningRoots, st.Queued, st.Timers)
		}
	}
	for _, rr := range h.roots {
		rr.as.Release()
	}
	for _, m := range h.modelAs {
		m.Release()
	}
	st = h.loop.Stats()
	if st.ArenaInUse != 0 || st.LiveRoots != 0 || st.RunningRoots != 0 {
		h.fail("after every root was released: %d arena bytes in use, %d live roots, %d running", st.ArenaInUse, st.LiveRoots, st.RunningRoots)
	}
}

// dispose closes the loop, so that once dropped it hands the arenas of
// its roots back to the process-wide chunk source (BUG-B1, BUG-F3).
func (h *harness) dispose() { h.loop.Close() }

// Trace output.

func (h *harness) emit(rr *rootRun, event string) {
	h.flushDone()
	h.line(rr.name + ": " + event)
}

func (h *harness) line(s string) {
	if len(h.out.Lines) >= h.lim.MaxTrace {
		h.out.Truncated = true
		return
	}
	h.out.Lines = append(h.out.Lines, s)
}

// flushDone reports the roots that completed since the last event, in
// root order. The completion itself happens inside the VM, out of sight.
func (h *harness) flushDone() {
	for _, rr := range h.roots {
		if rr.reported || !done(rr.fut) {
			continue
		}
		rr.reported = true
		args, err := rr.fut.Wait(context.Background())
		if err == vm.ErrCanceled {
			h.line(rr.name + ": " + prog.DoneCanceled)
			continue
		}
		switch e := err.(type) {
		case nil:
			h.line(rr.name + ": " + prog.DoneOK(fromArgs(args)))
		case *vm.Error:
			h.line(rr.name + ": " + prog.DoneError(e.Code, e.Info))
		default:
			h.fail("root %s completed with %T %v", rr.name, err, err)
		}
	}
}

func done(f *vm.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// rootNamed returns the root called name.
func (h *harness) rootNamed(name string) *rootRun {
	for _, rr := range h.roots {
		if rr.name == name {
			return rr
		}
	}
	panic("harness: cancel of an unknown root " + name) // Parse rejects such programs
}

// rootOf returns the root a step runs in; model steps run in many.
func (h *harness) rootOf(as vm.AsyncSteps) *rootRun {
	rr := h.byState[as.State()]
	if rr == nil {
		panic("harness: a step runs with an invalid handle")
	}
	return rr
}
