package vm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// How a flow of the live tests ends.
const (
	liveOK      = iota // its Limiter section is completed by a Resumer
	liveFail           // the Resumer fails the section
	liveCancel         // its poster cancels it after a while
	liveTimeout        // its step times out, often while queued
	liveRelease        // its poster releases it after a while
	liveKinds
)

// Limits of the live tests: a Throttle of 5 per 10 ms and a Limiter whose
// concurrency, not its rate, is the tighter limit.
const (
	liveRate     = 5
	livePeriod   = 10 * time.Millisecond
	liveThQueue  = 10
	liveConc     = 2
	liveMaxQueue = 10
)

// liveRun runs flows flows on l, driven by Run on a goroutine of its own,
// through a Throttle and then a Limiter. The flows are started by Posts
// from four goroutines, their Limiter sections completed by Resumers from
// worker goroutines, and some are canceled, time out or are released.
// now reads the loop's clock; drive, when not nil, runs on a goroutine of
// its own until its stop channel closes (it moves a manual clock). Every
// check runs on the loop's goroutine, or after Run returned.
func liveRun(t *testing.T, l *vm.Loop, flows int, now func() time.Duration, drive func(stop <-chan struct{})) {
	baseline := runtime.NumGoroutine()
	th := vm.NewThrottle(l, liveRate, livePeriod, liveThQueue)
	lm := vm.NewLimiter(l, vm.LimiterOptions{
		Concurrent: liveConc, MaxQueue: liveMaxQueue,
		Rate: liveRate, Period: livePeriod, Burst: 3,
	})

	type flow struct {
		kind     int
		root     vm.AsyncSteps
		fut      *vm.Future
		phase    int // 1: syncing on the Throttle; 2: on the Limiter
		done     int
		outcome  string
		released bool
	}
	fs := make([]flow, flows)
	futs := make([]chan *vm.Future, flows)
	for i := range futs {
		futs[i] = make(chan *vm.Future, 1)
	}
	var thEntries, lmEntries []time.Duration
	inside := 0
	var failures []string // loop goroutine only; reported after Run returns
	fail := func(format string, a ...any) {
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, a...))
		}
	}
	outcomes := map[string]int{}
	complete := func(i int, outcome string) {
		f := &fs[i]
		f.done++
		if f.done > 1 {
			fail("flow %d completed again (%s after %s)", i, outcome, f.outcome)
		}
		f.outcome = outcome
		outcomes[outcome]++
	}
	leave := func(unsafe.Pointer) { inside-- }

	work := make(chan func(), flows)
	var workers sync.WaitGroup
	for range 3 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for fn := range work {
				fn()
			}
		}()
	}

	start := func(i int, kind int, timeout, work2 time.Duration) {
		f := &fs[i]
		f.kind = kind
		v := int64(i)
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if kind == liveTimeout {
				as.SetTimeout(timeout)
			}
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				f.phase = 1
				as.Success(vm.Int(v))
			})
			as.Sync(th, func(as vm.AsyncSteps, a vm.Args) {
				thEntries = append(thEntries, now())
				if s := th.Stats(); s.Inside > liveRate || s.Queued > liveThQueue {
					fail("Throttle over its limits: %+v", s)
				}
				if a.Int(0) != v {
					fail("flow %d: Throttle section got %d", i, a.Int(0))
				}
				f.phase = 2
				as.Success(vm.Int(v))
			})
			as.Sync(lm, func(as vm.AsyncSteps, a vm.Args) {
				lmEntries = append(lmEntries, now())
				inside++
				as.StackRaw(1, leave)
				c, r := lm.Stats()
				if inside > liveConc || c.Inside > liveConc || c.Queued > liveMaxQueue || r.Inside > liveRate {
					fail("Limiter over its limits: %d inside; %+v; %+v", inside, c, r)
				}
				if a.Int(0) != v {
					fail("flow %d: Limiter section got %d", i, a.Int(0))
				}
				as.WaitExternal()
				res := as.Resumer()
				work <- func() {
					if work2 > 0 {
						time.Sleep(work2)
					}
					if kind == liveFail {
						res.Error("Custom", "section failed")
					} else {
						res.Success(vm.Int(2 * v))
					}
				}
			})
			as.Add(func(as vm.AsyncSteps, a vm.Args) {
				if a.Int(0) != 2*v {
					fail("flow %d: step after the sections got %d", i, a.Int(0))
				}
				complete(i, "ok")
			})
		}, func(as vm.AsyncSteps, code string) {
			if code == vm.DefenseRejected {
				c, _ := lm.Stats()
				switch info := as.State().ErrorInfo(); {
				case info == "Throttle queue limit" && f.phase == 1:
					if s := th.Stats(); s.Queued != liveThQueue || s.Inside != liveRate {
						fail("flow %d rejected by the Throttle while not full: %+v", i, s)
					}
				case info == "Mutex queue limit" && f.phase == 2:
					if c.Queued != liveMaxQueue || c.Inside != liveConc {
						fail("flow %d rejected by the Limiter while not full: %+v", i, c)
					}
				default:
					fail("flow %d: DefenseRejected %q in phase %d", i, info, f.phase)
				}
			}
			complete(i, code)
		})
		f.root = root
		f.fut = root.Promise()
		futs[i] <- f.fut
	}

	ctx, cancelRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- l.Run(ctx) }()
	stopDrive := make(chan struct{})
	var driving sync.WaitGroup
	if drive != nil {
		driving.Add(1)
		go func() { defer driving.Done(); drive(stopDrive) }()
	}

	// Four posters start the flows, and cancel or release some of them
	// (from goroutines that posters counts too).
	var posters sync.WaitGroup
	var next atomic.Int64
	for p := range 4 {
		posters.Add(1)
		go func() {
			defer posters.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 99))
			for {
				i := int(next.Add(1) - 1)
				if i >= flows {
					return
				}
				kind := rng.IntN(liveKinds)
				timeout := time.Duration(1+rng.IntN(30)) * time.Millisecond
				work2 := time.Duration(rng.IntN(6)) * time.Millisecond
				l.Post(func() { start(i, kind, timeout, work2) })
				if i%60 >= 15 { // the others come in bursts
					time.Sleep(time.Duration(rng.IntN(16)) * time.Millisecond)
				}
				if kind != liveCancel && kind != liveRelease {
					continue
				}
				later := time.Duration(rng.IntN(20)) * time.Millisecond
				posters.Add(1)
				go func() {
					defer posters.Done()
					time.Sleep(later)
					l.Post(func() {
						f := &fs[i]
						if !f.root.Valid() {
							fail("flow %d: no root to cancel or release (root %v, fut %v, done %d %s)", i, f.root, f.fut != nil, f.done, f.outcome)
						} else if kind == liveCancel {
							f.root.Cancel()
						} else if !f.released {
							f.released = true
							f.root.Release()
						}
					})
				}()
			}
		}()
	}
	posters.Wait()
	for i := range flows {
		semAwait(t, (<-futs[i]).Done(), "a flow's Future")
	}

	// Every flow ended: release what is left and wait for the Throttles'
	// periods to end.
	type snapshot struct {
		loop       vm.LoopStats
		th, lc, lr vm.SyncStats
		inside     int
	}
	snap := func() snapshot {
		ch := make(chan snapshot, 1)
		l.Post(func() {
			for i := range fs {
				if !fs[i].released {
					fs[i].released = true
					fs[i].root.Release()
				}
			}
			c, r := lm.Stats()
			ch <- snapshot{l.Stats(), th.Stats(), c, r, inside}
		})
		return semAwait(t, ch, "a snapshot of the loop")
	}
	var s snapshot
	for {
		s = snap()
		if s.loop.Timers == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stopDrive)
	driving.Wait()
	cancelRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
	close(work)
	workers.Wait()

	for _, f := range failures {
		t.Error(f)
	}
	if s.loop.ArenaInUse != 0 || s.loop.RunningRoots != 0 || s.loop.LiveRoots != 0 || s.loop.Panics != 0 {
		t.Errorf("loop not idle: %+v", s.loop)
	}
	for _, q := range []vm.SyncStats{s.th, s.lc, s.lr} {
		if q.Inside != 0 || q.Queued != 0 {
			t.Errorf("a queue is not empty: Throttle %+v, Limiter %+v %+v", s.th, s.lc, s.lr)
		}
	}
	if s.inside != 0 {
		t.Errorf("%d Limiter sections still run", s.inside)
	}
	// A flow admitted from a queue may end before its section runs.
	if int(s.th.Entered) < len(thEntries) || int(s.lr.Entered) < len(lmEntries) {
		t.Errorf("entries counted %d and %d, sections ran %d and %d", s.th.Entered, s.lr.Entered, len(thEntries), len(lmEntries))
	}
	if got := int(s.th.Rejected + s.lc.Rejected + s.lr.Rejected); got != outcomes[vm.DefenseRejected] {
		t.Errorf("%d rejections counted, %d flows rejected", got, outcomes[vm.DefenseRejected])
	}
	for i := range fs {
		f := &fs[i]
		o := syOutcome(t, f.fut)
		if o == "canceled" {
			outcomes[o]++
		}
		switch {
		case o == "canceled":
			if f.done != 0 || f.kind != liveCancel && f.kind != liveRelease {
				t.Errorf("flow %d (kind %d) canceled after recording %d completions (%s)", i, f.kind, f.done, f.outcome)
			}
		case f.done != 1 || f.outcome != o:
			t.Errorf("flow %d (kind %d) ended %s, recorded %d completions (%s)", i, f.kind, o, f.done, f.outcome)
		}
	}
	liveRateHolds(t, "Throttle", thEntries)
	liveRateHolds(t, "Limiter", lmEntries)
	for _, o := range []string{"ok", "Custom", vm.Timeout, vm.DefenseRejected, "canceled"} {
		if outcomes[o] == 0 {
			t.Errorf("no flow ended with %s: %v", o, outcomes)
		}
	}
	t.Logf("%d flows: %v; Throttle %+v; Limiter %+v %+v", flows, outcomes, s.th, s.lc, s.lr)

	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > baseline; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// liveRateHolds fails t unless the entry times, in the order of entry,
// keep to a rate of liveRate per livePeriod. The periods are those of an
// interval timer that starts with an entry, so a window of one period may
// straddle two of them; entries j periods' worth of entries apart are at
// least j-1 periods apart.
func liveRateHolds(t *testing.T, what string, at []time.Duration) {
	t.Helper()
	if !slices.IsSorted(at) {
		t.Errorf("%s: entry times go back", what)
		return
	}
	for i := range at {
		for j := 2; i+j*liveRate < len(at); j++ {
			if d := at[i+j*liveRate] - at[i]; d < time.Duration(j-1)*livePeriod {
				t.Errorf("%s: entries %d and %d are %v apart, under %d periods", what, i, i+j*liveRate, d, j-1)
				return
			}
		}
	}
}

// Flows posted from other goroutines to a loop that Run drives on the
// system clock sync on a Throttle and a Limiter, are completed by
// Resumers, canceled, released and time out, while queued and inside.
func TestThrottleLimiterLive(t *testing.T) {
	l := vm.NewLoop()
	t0 := time.Now()
	liveRun(t, l, 300, func() time.Duration { return time.Since(t0) }, nil)
}

// The same with a manual clock that another goroutine moves by odd
// amounts: half a period, a period and a half, many periods at once.
func TestThrottleLimiterLiveManualClock(t *testing.T) {
	l, clk := syLoop()
	ms := time.Millisecond
	steps := []time.Duration{livePeriod / 2, ms, 3 * livePeriod / 2, ms, ms, 7 * livePeriod, ms, 3 * ms, ms}
	liveRun(t, l, 300, func() time.Duration { return clk.Now().Sub(syEpoch) }, func(stop <-chan struct{}) {
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(steps[k%len(steps)])
			time.Sleep(time.Millisecond)
		}
	})
}
