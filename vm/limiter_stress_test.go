package vm_test

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Limits of the stress test: small enough that flows queue, are rejected
// and time out all the time. Burst is below Concurrent, so that the flows
// inside can fill the rate's queue.
var stressOptions = vm.LimiterOptions{
	Concurrent: 8, MaxQueue: 16,
	Rate: 35, Period: 10 * time.Millisecond, Burst: 4,
}

// What a stressed flow's section does.
const (
	stressQuick   = iota // succeeds at once
	stressWait           // succeeds after a timer
	stressError          // a sub-step fails
	stressPanic          // a sub-step panics
	stressNested         // syncs again on the Limiter
	stressForever        // waits until its timeout or cancel
	stressBreak          // runs a loop left by Break, then succeeds
	stressTimeout        // a sub-step times out
	stressKinds
)

// stressRun runs flows flows through one Limiter with random sections,
// timeouts and cancels drawn from seed, checking the invariants of the
// issue as it goes, and returns a digest of every flow's outcome.
func stressRun(t *testing.T, flows int, seed uint64) uint64 {
	l, clk := syLoop()
	o := stressOptions
	lm := vm.NewLimiter(l, o)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	type flow struct {
		root     vm.AsyncSteps
		fut      *vm.Future
		cancelAt int64 // ms on the loop's clock; 0: never
		done     int   // completions recorded
		rejected bool
		outcome  string
	}
	fs := make([]flow, flows)
	var active []int
	inside := 0 // flows whose (outer) section runs
	rejections, completed := 0, 0
	outcomes := map[string]int{}

	complete := func(i int, outcome string) {
		f := &fs[i]
		f.done++
		if f.done > 1 {
			t.Errorf("flow %d completed again (%s after %s)", i, outcome, f.outcome)
		}
		f.outcome = outcome
		outcomes[outcome]++
		completed++
	}
	leave := func(unsafe.Pointer) { inside-- }
	checkLimits := func(where string) {
		c, r := lm.Stats()
		if inside > o.Concurrent || c.Inside > o.Concurrent || c.Queued > o.MaxQueue ||
			r.Inside > o.Rate || r.Queued > o.Burst {
			t.Fatalf("%s: limits exceeded: %d sections run; concurrency %+v; rate %+v", where, inside, c, r)
		}
	}
	// onReject checks that a DefenseRejected came from a full queue. It
	// runs in the first handler that sees the error, in the turn that
	// raised it.
	onReject := func(i int, as vm.AsyncSteps) {
		if fs[i].rejected {
			return
		}
		fs[i].rejected = true
		rejections++
		c, r := lm.Stats()
		switch info := as.State().ErrorInfo(); info {
		case "Mutex queue limit":
			if c.Queued != o.MaxQueue || c.Inside != o.Concurrent {
				t.Fatalf("flow %d rejected by the Mutex while not full: %+v", i, c)
			}
		case "Throttle queue limit":
			if r.Queued != o.Burst || r.Inside != o.Rate {
				t.Fatalf("flow %d rejected by the Throttle while not full: %+v", i, r)
			}
		default:
			t.Fatalf("flow %d: DefenseRejected with info %q", i, info)
		}
	}

	launch := func(i int) {
		v := int64(i)
		kind := rng.IntN(stressKinds)
		var timeout time.Duration
		if rng.IntN(5) == 0 {
			timeout = time.Duration(1+rng.IntN(30)) * time.Millisecond
		}
		if rng.IntN(10) == 0 {
			fs[i].cancelAt = syMs(clk) + int64(rng.IntN(30))
		}
		if kind == stressForever && timeout == 0 && fs[i].cancelAt == 0 {
			kind = stressQuick
		}
		wait := time.Duration(rng.IntN(10)) * time.Millisecond
		recovers := rng.IntN(2) == 0

		section := func(as vm.AsyncSteps, a vm.Args) {
			if a.Int(0) != v {
				t.Errorf("flow %d: section got %d", i, a.Int(0))
			}
			inside++
			checkLimits("section entry")
			as.StackRaw(1, leave)
			switch kind {
			case stressQuick:
				as.Success(vm.Int(2 * v))
			case stressWait:
				h := l.Deferred(wait, func() { as.Success(vm.Int(2 * v)) })
				as.SetCancel(func(vm.AsyncSteps) { l.Cancel(h) })
			case stressError:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Custom", "section failed") })
			case stressPanic:
				as.Add(func(vm.AsyncSteps, vm.Args) { panic("section panicked") })
			case stressNested:
				as.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
					checkLimits("nested entry")
					as.Success(vm.Int(2 * v))
				})
			case stressForever:
				as.WaitExternal()
			case stressBreak:
				as.Loop(func(as vm.AsyncSteps) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Break() })
				})
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(2 * v)) })
			case stressTimeout:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(wait) })
			}
		}
		sectionError := func(as vm.AsyncSteps, code string) {
			if code == vm.DefenseRejected {
				onReject(i, as)
			}
			if recovers {
				as.Success(vm.Int(-1))
			}
		}
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if timeout > 0 {
				as.SetTimeout(timeout)
			}
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(v)) })
			as.Sync(lm, section, sectionError)
			as.Add(func(as vm.AsyncSteps, a vm.Args) {
				switch got := a.Int(0); {
				case got == 2*v:
					complete(i, "ok")
				case got == -1 && recovers:
					complete(i, "recovered")
				default:
					t.Errorf("flow %d: step after the section got %d", i, got)
				}
			})
		}, func(as vm.AsyncSteps, code string) {
			if code == vm.DefenseRejected {
				onReject(i, as)
			}
			complete(i, code)
		})
		fs[i].root = root
		fs[i].fut = root.Promise()
		active = append(active, i)
	}

	// reap releases the roots of completed flows after checking that the
	// VM saw the same outcome.
	reap := func() {
		kept := active[:0]
		for _, i := range active {
			f := &fs[i]
			select {
			case <-f.fut.Done():
			default:
				if f.done != 0 {
					t.Fatalf("flow %d recorded %s but still runs", i, f.outcome)
				}
				kept = append(kept, i)
				continue
			}
			_, err := f.fut.Wait(context.Background())
			var e *vm.Error
			switch {
			case f.done != 1:
				t.Fatalf("flow %d ended (%v) with %d completions recorded", i, err, f.done)
			case err == nil:
				if f.outcome != "ok" && f.outcome != "recovered" {
					t.Fatalf("flow %d succeeded after recording %s", i, f.outcome)
				}
			case errors.Is(err, vm.ErrCanceled):
				if f.outcome != "canceled" {
					t.Fatalf("flow %d canceled after recording %s", i, f.outcome)
				}
			case errors.As(err, &e):
				if e.Code != f.outcome {
					t.Fatalf("flow %d failed with %s after recording %s", i, e.Code, f.outcome)
				}
			}
			f.root.Release()
			f.root = vm.AsyncSteps{}
		}
		active = kept
	}

	next := 0
	lastDone, lastCompleted := int64(0), 0
	for next < flows || len(active) > 0 {
		// Flows end within tens of milliseconds of the loop's clock:
		// a second without any completion means some are stuck.
		if completed != lastCompleted {
			lastDone, lastCompleted = syMs(clk), completed
		} else if len(active) > 0 && syMs(clk)-lastDone > 1000 {
			t.Fatalf("no flow completed for a second; %d flows active, first %d", len(active), active[0])
		}
		for k := rng.IntN(8); k > 0 && next < flows; k-- {
			launch(next)
			next++
		}
		l.RunUntilIdle()
		checkLimits("after a pass")
		now := syMs(clk)
		for _, i := range active {
			if f := &fs[i]; f.done == 0 && f.cancelAt != 0 && f.cancelAt <= now {
				f.root.Cancel()
				complete(i, "canceled")
			}
		}
		reap()
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
	}

	// Let the last period end: the Throttle goes idle.
	clk.Advance(2 * o.Period)
	l.RunUntilIdle()
	c, r := lm.Stats()
	if c != (vm.SyncStats{Entered: c.Entered, Rejected: c.Rejected}) || r.Inside != 0 || r.Queued != 0 {
		t.Fatalf("Limiter not idle: concurrency %+v, rate %+v", c, r)
	}
	if got := int(c.Rejected + r.Rejected); got != rejections {
		t.Fatalf("Limiter counted %d rejections, handlers saw %d", got, rejections)
	}
	if s := l.Stats(); s.ArenaInUse != 0 || s.RunningRoots != 0 || s.LiveRoots != 0 || s.Timers != 0 || s.Panics != 0 {
		t.Fatalf("loop not idle: %+v", s)
	}
	if inside != 0 {
		t.Fatalf("%d sections still run", inside)
	}
	for i := range fs {
		if fs[i].done != 1 {
			t.Fatalf("flow %d completed %d times", i, fs[i].done)
		}
	}
	// Every kind of ending happened, or the test proves less than it says.
	for _, k := range []string{"ok", "recovered", "Custom", vm.InternalError, vm.Timeout, vm.DefenseRejected, "canceled"} {
		if outcomes[k] == 0 {
			t.Errorf("no flow ended with %s: %v", k, outcomes)
		}
	}
	if c.Rejected == 0 || r.Rejected == 0 {
		t.Errorf("no rejection by one of the queues: concurrency %+v, rate %+v", c, r)
	}
	t.Logf("%d flows: %v; concurrency %+v; rate %+v", flows, outcomes, c, r)

	h := fnv.New64a()
	for i := range fs {
		h.Write([]byte(fs[i].outcome))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// 100,000 flows go through one Limiter with random sections, errors,
// panics, timeouts and cancels. Every flow completes exactly once, the
// limits hold at every section entry and after every pass, a rejection
// happens only when its queue is full, and every byte of arena memory
// comes back. -short runs 20,000 flows.
func TestLimiterStress(t *testing.T) {
	flows := 100_000
	if testing.Short() {
		flows = 20_000
	}
	stressRun(t, flows, 1)
}

// The same seed gives the same outcome for every flow.
func TestLimiterStressRepeatable(t *testing.T) {
	a, b := stressRun(t, 2_000, 7), stressRun(t, 2_000, 7)
	if a != b {
		t.Fatalf("two runs with seed 7 differ: digests %x and %x", a, b)
	}
}
