package vm_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Immediate callbacks run in FIFO order; those queued by a callback run
// after the ones already queued.
func TestSemImmediateFIFO(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	for i := range 5 {
		l.Immediate(func() {
			log.add("%d", i)
			if i == 1 {
				l.Immediate(func() { log.add("queued by 1") })
			}
		})
	}
	l.RunUntilIdle()
	semExpect(t, &log, "0", "1", "2", "3", "4", "queued by 1")
}

// Deferred callbacks run by deadline (ties in the order set), never early.
func TestSemDeferredOrder(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	now := time.Duration(0)
	at := func(name string) func() { return func() { log.add("%s@%v", name, now) } }
	l.Deferred(30*time.Millisecond, at("c"))
	l.Deferred(10*time.Millisecond, at("a"))
	l.Deferred(20*time.Millisecond, at("b"))
	l.Deferred(10*time.Millisecond, at("a2"))
	l.Deferred(0, at("zero"))
	l.Deferred(-time.Second, at("negative"))
	l.Deferred(time.Minute+3*time.Millisecond, at("far"))
	for now < time.Minute+10*time.Millisecond {
		l.RunUntilIdle()
		clk.Advance(time.Millisecond)
		now += time.Millisecond
	}
	semExpect(t, &log, "zero@0s", "negative@0s", "a@10ms", "a2@10ms", "b@20ms", "c@30ms", "far@1m0.003s")
}

// A Deferred set from a callback counts from the time it is set.
func TestSemDeferredFromCallback(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	l.Deferred(5*time.Millisecond, func() {
		log.add("first")
		l.Deferred(5*time.Millisecond, func() { log.add("second") })
	})
	clk.Advance(5 * time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "first")
	clk.Advance(4 * time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "first")
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "first", "second")
}

// Cancel unschedules Immediate and Deferred callbacks; IsValid reports
// whether a handle is still scheduled; Cancel of a finished handle is
// harmless and does not touch a callback that reuses its slot.
func TestSemLoopCancelAndIsValid(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	if l.IsValid(vm.Handle{}) {
		t.Fatal("the zero Handle is valid")
	}
	imm := l.Immediate(func() { log.add("canceled immediate") })
	def := l.Deferred(time.Millisecond, func() { log.add("canceled deferred") })
	keepImm := l.Immediate(func() { log.add("immediate") })
	keepDef := l.Deferred(time.Millisecond, func() { log.add("deferred") })
	for _, h := range []vm.Handle{imm, def, keepImm, keepDef} {
		if !l.IsValid(h) {
			t.Fatal("a scheduled handle is invalid")
		}
	}
	l.Cancel(imm)
	l.Cancel(def)
	if l.IsValid(imm) || l.IsValid(def) {
		t.Fatal("a canceled handle is valid")
	}
	l.Cancel(imm) // twice: harmless
	l.RunUntilIdle()
	if l.IsValid(keepImm) {
		t.Fatal("an Immediate that ran is valid")
	}
	if !l.IsValid(keepDef) {
		t.Fatal("a pending Deferred is invalid")
	}
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	if l.IsValid(keepDef) {
		t.Fatal("a Deferred that ran is valid")
	}
	semExpect(t, &log, "immediate", "deferred")
	// Slots are reused: a stale handle must not cancel the new callback.
	fresh := l.Immediate(func() { log.add("fresh") })
	freshDef := l.Deferred(time.Millisecond, func() { log.add("fresh deferred") })
	for _, h := range []vm.Handle{imm, def, keepImm, keepDef} {
		l.Cancel(h)
		if l.IsValid(h) {
			t.Fatal("a stale handle turned valid")
		}
	}
	if !l.IsValid(fresh) || !l.IsValid(freshDef) {
		t.Fatal("canceling stale handles invalidated new ones")
	}
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "immediate", "deferred", "fresh", "fresh deferred")
}

// A Handle names a callback of the loop that scheduled it: IsValid and
// Cancel of another loop, whose slots and generations may match, leave
// that loop's callbacks alone. (l2.Cancel once canceled l2's own callback
// in the same slot.)
func TestSemLoopHandleOfAnotherLoop(t *testing.T) {
	l1, clk := semLoop()
	l2 := vm.NewLoop(vm.WithClock(clk))
	var log semLog
	imm1 := l1.Immediate(func() { log.add("l1 immediate") })
	def1 := l1.Deferred(time.Millisecond, func() { log.add("l1 deferred") })
	l2.Immediate(func() { log.add("l2 immediate") })
	l2.Deferred(time.Millisecond, func() { log.add("l2 deferred") })
	for _, h := range []vm.Handle{imm1, def1} {
		if l2.IsValid(h) {
			t.Fatal("a handle of another loop is valid")
		}
		l2.Cancel(h)
		if !l1.IsValid(h) {
			t.Fatal("another loop's Cancel unscheduled the callback")
		}
	}
	clk.Advance(time.Millisecond)
	l2.RunUntilIdle()
	l1.RunUntilIdle()
	semExpect(t, &log, "l2 immediate", "l2 deferred", "l1 immediate", "l1 deferred")
	if s := l2.Stats(); s.Timers != 0 || s.Queued != 0 {
		t.Fatalf("l2 after its callbacks: %+v", s)
	}
}

// A callback can cancel another one queued in the same pass.
func TestSemLoopCancelFromCallback(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	var later, timer vm.Handle
	l.Immediate(func() {
		l.Cancel(later)
		l.Cancel(timer)
	})
	later = l.Immediate(func() { log.add("later must not run") })
	timer = l.Deferred(0, func() { log.add("timer must not run") })
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	semExpect(t, &log)
}

// Post from many goroutines delivers each callback exactly once to a loop
// run by Run, waking it while it sleeps.
func TestSemPostManyGoroutines(t *testing.T) {
	l, _ := semLoop()
	const writers, per = 8, 1000
	var seen [writers * per]int // loop goroutine only
	var next [writers]int       // per writer: the post expected next
	var total int
	outOfOrder := 0
	done := make(chan struct{})
	stop := semRunAsync(t, l)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if !l.Post(func() {
					seen[w*per+i]++
					if next[w] != i {
						outOfOrder++
					}
					next[w] = i + 1
					total++
					if total == writers*per {
						close(done)
					}
				}) {
					panic("Post on an open loop returned false")
				}
			}
		}()
	}
	wg.Wait()
	<-done
	// The loop sleeps now; one more Post must wake it.
	woke := make(chan bool)
	if !l.Post(func() { woke <- l.IsSameThread() }) {
		t.Fatal("Post returned false")
	}
	if !<-woke {
		t.Fatal("IsSameThread is false inside a Post callback")
	}
	stop()
	if outOfOrder != 0 {
		t.Fatalf("%d posts ran out of their writer's order", outOfOrder)
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("post %d delivered %d times", i, n)
		}
	}
}

// A loop polled with Iterate (embedded in a foreign loop, no Run) sees
// every post: once the writers are done, one pass delivers what is left,
// and Iterate reports work while any post waits.
func TestSemPostPolledByIterate(t *testing.T) {
	l, _ := semLoop()
	const writers, per = 4, 2000
	total := 0
	var wg sync.WaitGroup
	var writing atomic.Bool
	writing.Store(true)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				l.Post(func() { total++ })
			}
		}()
	}
	go func() { wg.Wait(); writing.Store(false) }()
	for writing.Load() {
		l.Iterate()
	}
	for range 2 { // the pass that drains, and one to spare
		if work, _ := l.Iterate(); !work {
			break
		}
	}
	if total != writers*per {
		t.Fatalf("%d posts delivered, want %d", total, writers*per)
	}
	if work, _ := l.Iterate(); work {
		t.Fatal("Iterate reports work with every post delivered")
	}
}

// Run wakes for a Resumer completion and for a ManualClock Advance.
func TestSemRunWakes(t *testing.T) {
	l, clk := semLoop()
	root := l.NewSteps()
	var res vm.Resumer
	ready, armed := make(chan struct{}), make(chan struct{})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res = as.Resumer()
		as.WaitExternal()
		close(ready)
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		as.SetTimeout(time.Second)
		close(armed)
	}, func(as vm.AsyncSteps, code string) {
		as.Success(vm.Str(code))
	})
	f := root.Promise()
	stop := semRunAsync(t, l)
	defer stop()
	<-ready
	res.Success() // wakes Run
	<-armed
	// Each Advance wakes Run. The timer is armed at the end of the step's
	// pass, which may come after an Advance: advance until it fires.
	for done := false; !done; {
		select {
		case <-f.Done():
			done = true
		default:
			clk.Advance(time.Second)
			runtime.Gosched()
		}
	}
	a, err := f.Wait(context.Background())
	if err != nil || a.String(0) != vm.Timeout {
		t.Fatalf("result %v %v", a.Values(), err)
	}
}

// Iterate runs the immediate work queued when the pass starts and the due
// timers, and reports what remains.
func TestSemIterate(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	if work, delay := l.Iterate(); work || delay != 0 {
		t.Fatalf("idle loop: Iterate = %v, %v", work, delay)
	}
	l.Immediate(func() {
		log.add("A")
		l.Immediate(func() { log.add("B") })
	})
	work, delay := l.Iterate()
	semExpect(t, &log, "A")
	if !work || delay != 0 {
		t.Fatalf("with B queued: Iterate = %v, %v; want true, 0", work, delay)
	}
	l.Deferred(50*time.Millisecond, func() { log.add("T") })
	work, delay = l.Iterate()
	semExpect(t, &log, "A", "B")
	if !work || delay != 50*time.Millisecond {
		t.Fatalf("only a timer left: Iterate = %v, %v; want true, 50ms", work, delay)
	}
	clk.Advance(20 * time.Millisecond)
	if work, delay = l.Iterate(); !work || delay != 30*time.Millisecond {
		t.Fatalf("20ms later: Iterate = %v, %v; want true, 30ms", work, delay)
	}
	clk.Advance(30 * time.Millisecond)
	work, delay = l.Iterate()
	semExpect(t, &log, "A", "B", "T")
	if work || delay != 0 {
		t.Fatalf("after the timer: Iterate = %v, %v; want false, 0", work, delay)
	}
	// A timer and immediate work: delay is 0.
	l.Deferred(time.Second, func() {})
	l.Immediate(func() { l.Immediate(func() {}) })
	if work, delay = l.Iterate(); !work || delay != 0 {
		t.Fatalf("immediate work and a timer: Iterate = %v, %v; want true, 0", work, delay)
	}
	if work, delay = l.Iterate(); !work || delay != time.Second {
		t.Fatalf("only the timer: Iterate = %v, %v; want true, 1s", work, delay)
	}
	// A flow's timeout counts as a timer.
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(200 * time.Millisecond) })
	root.Execute()
	l.RunUntilIdle()
	if work, delay = l.Iterate(); !work || delay != 200*time.Millisecond {
		t.Fatalf("flow timeout pending: Iterate = %v, %v; want true, 200ms", work, delay)
	}
	// A Post counts as work.
	l.Post(func() { log.add("posted") })
	if work, _ := l.Iterate(); !work {
		t.Fatal("Iterate ran the post but reports no work left (a timer remains)")
	}
	semExpect(t, &log, "A", "B", "T", "posted")
}

// Iterate counts its delay until the next timer from after the timer
// callbacks of its pass: a slow callback (here one that moves the clock
// on) does not make the loop wake late for the next timer.
func TestSemIterateDelayAfterSlowCallback(t *testing.T) {
	l, clk := semLoop()
	l.Deferred(10*time.Millisecond, func() { clk.Advance(4 * time.Millisecond) })
	l.Deferred(20*time.Millisecond, func() {})
	clk.Advance(10 * time.Millisecond)
	if work, delay := l.Iterate(); !work || delay != 6*time.Millisecond {
		t.Fatalf("Iterate = %v, %v; want true, 6ms (20ms - 10ms - the callback's 4ms)", work, delay)
	}
}

// IsSameThread is true on the driving goroutine and in callbacks, false on
// other goroutines.
func TestSemIsSameThread(t *testing.T) {
	l, _ := semLoop()
	if !l.IsSameThread() {
		t.Fatal("false on the goroutine that created the loop")
	}
	other := make(chan bool)
	go func() { other <- l.IsSameThread() }()
	if <-other {
		t.Fatal("true on another goroutine before the loop runs")
	}
	var inside []bool
	l.Immediate(func() { inside = append(inside, l.IsSameThread()) })
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { inside = append(inside, as.Tool().IsSameThread()) })
	root.Execute()
	l.RunUntilIdle()
	if len(inside) != 2 || !inside[0] || !inside[1] {
		t.Fatalf("inside callbacks: %v", inside)
	}

	// Once Run drives it from another goroutine, that one is the loop's.
	l2, _ := semLoop()
	stop := semRunAsync(t, l2)
	inCb := make(chan bool)
	l2.Post(func() { inCb <- l2.IsSameThread() })
	if !<-inCb {
		t.Fatal("false inside a callback of a loop run on another goroutine")
	}
	if l2.IsSameThread() {
		t.Fatal("true on the test goroutine while Run drives the loop elsewhere")
	}
	stop()
}

// Close makes Run return nil and Post return false.
func TestSemClose(t *testing.T) {
	l, _ := semLoop()
	done := make(chan error, 1)
	ran := make(chan struct{})
	go func() { done <- l.Run(context.Background()) }()
	l.Post(func() { close(ran) })
	<-ran
	l.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run after Close = %v, want nil", err)
	}
	var called atomic.Bool
	if l.Post(func() { called.Store(true) }) {
		t.Fatal("Post on a closed loop returned true")
	}
	l.RunUntilIdle()
	if called.Load() {
		t.Fatal("a Post refused by a closed loop ran")
	}
	// Close before Run: Run returns at once.
	l2, _ := semLoop()
	l2.Close()
	if err := l2.Run(context.Background()); err != nil {
		t.Fatalf("Run of a closed loop = %v", err)
	}
}

// Run returns the context's error when it is canceled.
func TestSemRunContext(t *testing.T) {
	l, _ := semLoop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// Post never blocks, even with far more posts pending than the inbox
// holds, and one goroutine's posts run in the order posted.
func TestSemPostBeyondCapacity(t *testing.T) {
	l, _ := semLoop()
	const n = 10_000
	var got []int
	done := make(chan struct{})
	go func() { // not the loop's goroutine; nobody drains meanwhile
		defer close(done)
		for i := range n {
			if !l.Post(func() { got = append(got, i) }) {
				panic("Post returned false")
			}
		}
	}()
	<-done
	l.RunUntilIdle()
	if len(got) != n {
		t.Fatalf("%d of %d posts ran", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("post %d ran at position %d", v, i)
		}
	}
}

// A panic out of the panic handler leaves the pass; the posts behind the
// one that panicked stay queued, and the next pass runs them.
func TestSemPostsSurviveHandlerPanic(t *testing.T) {
	l := vm.NewLoop(vm.WithPanicHandler(func(v any) { panic(v) }))
	defer l.Close()
	ran := 0
	l.Post(func() { panic("first") })
	l.Post(func() { ran++ })
	func() {
		defer func() {
			if v := recover(); v != "first" {
				t.Fatalf("RunUntilIdle panicked with %v, want first", v)
			}
		}()
		l.RunUntilIdle()
	}()
	l.RunUntilIdle()
	if ran != 1 {
		t.Fatalf("the second post ran %d times, want once", ran)
	}
}

// A panic out of the panic handler leaves the pass it was raised in: a
// Deferred set afterwards from the driving goroutine, between passes,
// counts its delay from when it was set, as any set outside a pass does.
func TestSemDeferredAfterHandlerPanicEscapes(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(v any) { panic(v) }))
	l.Post(func() { panic("out") })
	semPanicEscapes(t, l.RunUntilIdle)
	fired := false
	l.Deferred(10*time.Millisecond, func() { fired = true })
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	if !fired {
		t.Fatal("a 10ms Deferred set between passes has not fired 10ms later")
	}
}

// semPanicEscapes fails t unless fn panics (out of the panic handler).
func semPanicEscapes(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("the panic handler's panic did not leave the pass")
		}
	}()
	fn()
}

// A Deferred set in the pass that a panic out of the panic handler leaves
// counts from when it was set, as it would had the pass ended: it used to
// be sealed only by the next pass, and count from there.
func TestSemDeferredBeforeHandlerPanicEscapes(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(p any) { panic(p) }))
	fired := false
	l.Immediate(func() {
		l.Deferred(10*time.Millisecond, func() { fired = true })
		panic("boom")
	})
	semPanicEscapes(t, l.RunUntilIdle)
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	if !fired {
		t.Fatal("the Deferred of 10ms has not fired 10ms after it was set")
	}
	semClean(t, l)
}

// A closed loop can still be driven by hand: its flows and callbacks run.
func TestSemClosedLoopByHand(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		as.Tool().Immediate(func() { as.Success(vm.Int(1)) })
	})
	f := root.Promise()
	l.Close()
	l.Immediate(func() { log.add("immediate") })
	l.RunUntilIdle()
	semExpect(t, &log, "immediate")
	if a := semOK(t, f); a.Int(0) != 1 {
		t.Fatalf("result %v", a.Values())
	}
}

// countingClock is a ManualClock that counts its readings.
type countingClock struct {
	*vm.ManualClock
	reads int
}

func (c *countingClock) Now() time.Time {
	c.reads++
	return c.ManualClock.Now()
}

// A pass reads the clock for its timers only when one set during it is
// still pending at its end: a timeout set and stopped within the pass
// costs no reading (wheel.Seal is skipped), one that outlives the pass
// does, and it still fires on time.
func TestSemClockReadOnlyForSurvivingTimers(t *testing.T) {
	clk := &countingClock{ManualClock: vm.NewManualClock(time.Unix(0, 0))}
	l := vm.NewLoop(vm.WithClock(clk))
	defer l.Close()
	quick := func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		as.Success()
	}
	clk.reads = 0
	for range 3 {
		l.Spawn(quick)
		l.RunUntilIdle()
	}
	if clk.reads != 0 || l.Stats().Timers != 0 {
		t.Fatalf("timeouts stopped within their pass: %d clock reads, %d timers left; want none", clk.reads, l.Stats().Timers)
	}

	var code string
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
	}, func(_ vm.AsyncSteps, c string) { code = c })
	l.RunUntilIdle()
	if clk.reads == 0 || l.Stats().Timers != 1 {
		t.Fatalf("a timeout outliving its pass: %d clock reads, %d timers; want some, 1", clk.reads, l.Stats().Timers)
	}
	clk.Advance(time.Second - time.Millisecond)
	l.RunUntilIdle()
	if code != "" {
		t.Fatalf("timed out early: %q", code)
	}
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	if code != vm.Timeout {
		t.Fatalf("error = %q, want %s", code, vm.Timeout)
	}
}

// semWithin fails t unless done is closed within a generous bound. It
// detects a hang; the outcome of a test never depends on the bound.
func semWithin(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("hang: %s", what)
	}
}

// A ManualClock moved on by a timer callback while Run drives the loop
// wakes Run for the timers now due: Advance from the loop's own goroutine
// finds Run awake, and Run must not then sleep on the delay it computed
// from the reading taken before the callbacks ran.
func TestSemRunAdvanceFromTimerCallback(t *testing.T) {
	l, clk := semLoop()
	done := make(chan struct{})
	l.Deferred(time.Millisecond, func() { clk.Advance(time.Millisecond) })
	l.Deferred(2*time.Millisecond, func() { close(done) })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- l.Run(ctx) }()
	clk.Advance(time.Millisecond)
	semWithin(t, done, "the timer due after the callback's Advance never fired")
	cancel()
	<-ran
}

// A ManualClock moved on by a timer callback, or by the error handler of
// a timeout, when the loop is driven by hand: the timers due by then fire
// before RunUntilIdle returns, and Iterate reports them as work to do now.
// The pass's reading, taken before the callbacks ran, does not see them
// due: RunUntilIdle used to return with them pending, and Iterate to
// report a tick's delay, as if the clock had not moved.
func TestSemAdvanceFromTimerCallbackByHand(t *testing.T) {
	for _, by := range []string{"Deferred", "timeout handler"} {
		for _, drive := range []string{"RunUntilIdle", "Iterate"} {
			t.Run(by+"/"+drive, func(t *testing.T) {
				l, clk := semLoop()
				var log semLog
				advance := func() {
					log.add("advance")
					clk.Advance(time.Millisecond)
				}
				if by == "Deferred" {
					l.Deferred(time.Millisecond, advance)
				} else {
					l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) },
						func(vm.AsyncSteps, string) { advance() }) // the flow ends: nothing is queued
				}
				l.Deferred(2*time.Millisecond, func() { log.add("deferred") })
				root := l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(2 * time.Millisecond) },
					func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				f := root.Promise()
				l.RunUntilIdle()
				clk.Advance(time.Millisecond)
				if drive == "RunUntilIdle" {
					l.RunUntilIdle()
				} else {
					if work, delay := l.Iterate(); !work || delay != 0 {
						t.Fatalf("Iterate after the Advance = %v, %v; want true, 0 (timers are due)", work, delay)
					}
					l.Iterate()
				}
				semExpect(t, &log, "advance", "deferred", "handler Timeout")
				semFail(t, f, vm.Timeout)
				semClean(t, l)
			})
		}
	}
}

// A timer callback that sets a timer due at once does not keep its pass
// from ending: the new timer fires in a later pass, after the immediate
// work queued meanwhile, and Iterate reports it as work to do now.
// Otherwise a callback that re-arms itself with Deferred(0) would starve
// the loop: no Immediate, Post, Close or context would be seen again.
func TestSemZeroDeferredChainYields(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	k := 0
	var chain func()
	chain = func() {
		k++
		log.add("timer %d", k)
		if k == 1 {
			l.Immediate(func() { log.add("immediate") })
		}
		if k < 1000 { // bounded, so that the bug fails the test instead of hanging it
			l.Deferred(0, chain)
		}
	}
	l.Deferred(0, chain)
	for i := range 3 {
		if work, delay := l.Iterate(); !work || delay != 0 {
			t.Fatalf("Iterate %d = %v, %v; want true, 0 (a timer is due)", i, work, delay)
		}
	}
	semExpect(t, &log, "timer 1", "immediate", "timer 2", "timer 3")
	l.RunUntilIdle()
	if k != 1000 || l.Stats().Timers != 0 || vm.CallbacksInUse(l) != 0 {
		t.Fatalf("after the chain: %d timers ran, Stats %+v, %d callbacks", k, l.Stats(), vm.CallbacksInUse(l))
	}
}

// A clock that goes back (a wall clock set back; here a ManualClock moved
// back, from outside and from a timer callback) does not hold up the
// timers armed afterwards until it regains the time it lost: the loop's
// time stands still meanwhile, so each timer fires as long after it was
// set as it asked, by the clock's forward moves, and none earlier. The
// wheel's time never goes back: timers armed after the clock went back an
// hour used to wait that hour out, and Iterate to report it as the delay.
func TestSemClockGoesBack(t *testing.T) {
	for _, from := range []string{"outside", "callback"} {
		t.Run(from, func(t *testing.T) {
			l, clk := semLoop()
			var log semLog
			l.Deferred(time.Hour, func() { log.add("hour") })
			l.Deferred(time.Hour+30*time.Millisecond, func() { log.add("armed before") })
			if from == "callback" {
				l.Deferred(time.Hour, func() { clk.Advance(-time.Hour) })
				clk.Advance(time.Hour)
				l.RunUntilIdle()
			} else {
				clk.Advance(time.Hour)
				l.RunUntilIdle()
				clk.Advance(-time.Hour)
			}
			l.Deferred(10*time.Millisecond, func() { log.add("deferred") })
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(20 * time.Millisecond) },
				func(_ vm.AsyncSteps, code string) { log.add("step %s", code) })
			l.RunUntilIdle()
			if work, delay := l.Iterate(); !work || delay != 10*time.Millisecond {
				t.Fatalf("Iterate = %v, %v; want true, 10ms", work, delay)
			}
			for i := range 30 {
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
				switch i + 1 {
				case 9:
					semExpect(t, &log, "hour")
				case 10:
					semExpect(t, &log, "hour", "deferred")
				case 19:
					semExpect(t, &log, "hour", "deferred")
				case 29:
					semExpect(t, &log, "hour", "deferred", "step Timeout")
				}
			}
			semExpect(t, &log, "hour", "deferred", "step Timeout", "armed before")
			semClean(t, l)
		})
	}
}

// A clock that reads the zero time once (a clock whose source failed) is
// read as one that went back two thousand years and came back: the
// distance from the loop's start saturates each way. The loop's time
// stands still over it, and timers go on counting; a step's timeout set
// afterwards fires on time, where the loop's time used to stay saturated
// for good and no timer set afterwards ever fired.
func TestSemClockReadsZeroOnce(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	glitch := &glitchClock{ManualClock: clk}
	l := vm.NewLoop(vm.WithClock(glitch))
	var log semLog
	glitch.zero = true
	l.Deferred(time.Millisecond, func() { log.add("during") })
	glitch.zero = false
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	l.Deferred(10*time.Millisecond, func() { log.add("deferred") })
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(20 * time.Millisecond) },
		func(_ vm.AsyncSteps, code string) { log.add("step %s", code) })
	l.RunUntilIdle()
	for range 20 {
		clk.Advance(time.Millisecond)
		l.RunUntilIdle()
	}
	semExpect(t, &log, "during", "deferred", "step Timeout")
	semClean(t, l)
}

// glitchClock is a ManualClock that reads the zero time while zero is set.
type glitchClock struct {
	*vm.ManualClock
	zero bool
}

func (c *glitchClock) Now() time.Time {
	if c.zero {
		return time.Time{}
	}
	return c.ManualClock.Now()
}

// The hand-over from other goroutines (Post, Resumer completions) in
// orderings the other tests do not force: a wake that lands while Run
// decides to sleep, many producers that yield mid-stream, and Posts racing
// Close. A lost wake shows as a hang, which a generous deadline turns into
// a failure with every goroutine's stack.

// One Post or Resumer completion at a time, each made while Run goes idle
// after the previous one, at varying points of its way to sleep: every
// one wakes it.
func TestSemHandoverWakesRunGoingToSleep(t *testing.T) {
	rounds := 100_000
	if raceEnabled || testing.Short() {
		rounds = 10_000
	}
	l, _ := semLoop()
	ran := make(chan struct{}, 1)
	post := func() { ran <- struct{}{} }
	resumers := make(chan vm.Resumer, 1)
	root := l.NewSteps()
	root.Loop(func(as vm.AsyncSteps) {
		resumers <- as.Resumer()
		as.WaitExternal()
	})
	root.Execute()
	stop := semRunAsync(t, l)
	defer stop()
	for i := range rounds {
		for range i % 5 { // land before, at and after Run raises sleeping
			runtime.Gosched()
		}
		if i%2 == 0 {
			if !l.Post(post) {
				t.Fatal("Post on an open loop returned false")
			}
			semAwait(t, ran, "Post")
			continue
		}
		if !semAwait(t, resumers, "the loop body's next iteration").Success() {
			t.Fatalf("round %d: Resumer.Success returned false", i)
		}
	}
}

// 64 goroutines, yielding as they go, each post callbacks and complete
// waiting steps through their Resumers, several pushes behind the ring's
// capacity, while Run drains: each Post runs once, in its goroutine's
// order, each flow ends once with its completion's value, and the loop
// ends with nothing in use.
func TestSemHandoverManyProducers(t *testing.T) {
	const producers, per = 64, 40 // per producer: per posts and per flows
	l, _ := semLoop()
	resumers := make([]vm.Resumer, producers*per)
	futures := make([]*vm.Future, producers*per)
	for k := range futures {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			resumers[k] = as.Resumer()
			as.WaitExternal()
		})
		futures[k] = root.Promise()
	}
	l.RunUntilIdle() // every flow waits, its Resumer handed out

	var next [producers]int // loop goroutine only
	outOfOrder := 0
	posted := make(chan struct{})
	var ran atomic.Int64
	stop := semRunAsync(t, l)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if !l.Post(func() {
					if next[p] != i {
						outOfOrder++
					}
					next[p] = i + 1
					if ran.Add(1) == producers*per {
						close(posted)
					}
				}) {
					panic("Post on an open loop returned false")
				}
				k := p*per + i
				if !resumers[k].Success(vm.Int(int64(k))) {
					panic("the first completion of a step was refused")
				}
				if i%3 == p%3 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	semAwait(t, posted, "the last Post")
	for k, f := range futures {
		semAwait(t, f.Done(), "a completed flow")
		args, err := f.Wait(context.Background())
		if err != nil || args.Int(0) != int64(k) {
			t.Fatalf("flow %d: %v %v", k, args.Values(), err)
		}
	}
	stop()
	if outOfOrder != 0 {
		t.Fatalf("%d posts ran out of their goroutine's order", outOfOrder)
	}
	semClean(t, l)
}

// Posts from many goroutines race Close while Run drives the loop: a Post
// that returned true runs exactly once (by Run, or by hand on the closed
// loop once Run has returned), and one that returned false never runs.
func TestSemPostsRaceClose(t *testing.T) {
	const producers, per = 16, 64
	for round := range 40 {
		l, _ := semLoop()
		var ran [producers * per]int // Run's goroutine, then this one's
		var accepted [producers * per]bool
		start := make(chan struct{})
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range per {
					k := p*per + i
					accepted[k] = l.Post(func() { ran[k]++ })
					if i%8 == 0 {
						runtime.Gosched()
					}
				}
			}()
		}
		done := make(chan error, 1)
		go func() { done <- l.Run(context.Background()) }()
		close(start)
		for range round % 10 {
			runtime.Gosched()
		}
		l.Close()
		if err := semAwait(t, done, "Run after Close"); err != nil {
			t.Fatalf("Run after Close = %v", err)
		}
		wg.Wait()
		l.RunUntilIdle()
		for k := range ran {
			want := 0
			if accepted[k] {
				want = 1
			}
			if ran[k] != want {
				t.Fatalf("round %d: post %d (accepted=%v) ran %d times", round, k, accepted[k], ran[k])
			}
		}
	}
}

// A clock moved past the end of the loop's time (292 years after its
// start) fires every pending timer: the move is forward, however far.
func TestSemClockJumpsPastTheEnd(t *testing.T) {
	l, clk := semLoop()
	var log semLog
	l.Deferred(time.Hour, func() { log.add("hour") })
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(24 * time.Hour) },
		func(_ vm.AsyncSteps, code string) { log.add("step %s", code) })
	l.RunUntilIdle()
	clk.Advance(time.Duration(math.MaxInt64))
	l.RunUntilIdle()
	semExpect(t, &log, "hour", "step Timeout")
	semClean(t, l)
}

// Two goroutines start Run on one loop at once, one of them the goroutine
// that drove the loop before: the loser gets ErrLoopRunning, never the
// nested-Run misuse. The check for a Run from the running one's callback
// compared the caller with the loop's owner, which the winner stores only
// after taking the loop: in between, the previous owner passed for the
// running Run's own goroutine and panicked, reading (and possibly writing)
// what the running Run owns. The window is short: the race is retried.
func TestSemRunRaceWithPreviousOwner(t *testing.T) {
	for range 500 {
		l := vm.NewLoop()
		l.RunUntilIdle() // this goroutine drives the loop: its owner
		ctx, cancel := context.WithCancel(context.Background())
		var started atomic.Bool
		errs := make(chan error, 1)
		go func() {
			started.Store(true)
			err := l.Run(ctx)
			if err != context.Canceled {
				cancel() // it lost: the other Run is to return
			}
			errs <- err
		}()
		for !started.Load() {
			runtime.Gosched()
		}
		var p any
		err := func() error {
			defer func() {
				if p = recover(); p != nil {
					cancel()
				}
			}()
			err := l.Run(ctx)
			if err != context.Canceled {
				cancel()
			}
			return err
		}()
		other := <-errs
		cancel()
		if p != nil {
			t.Fatalf("the second Run panicked: %v", p)
		}
		if (err == vm.ErrLoopRunning) == (other == vm.ErrLoopRunning) {
			t.Fatalf("Runs returned %v and %v: want one ErrLoopRunning", err, other)
		}
	}
}

// A custom clock that panics leaves the pass that read it, the panic
// reaching the pass's caller. A timer set between passes afterwards counts
// from when it is set, as it would after any pass: the pass no longer
// counts as running. It used to, so the timer waited for the next pass to
// read the clock and fired that much late.
func TestSemClockPanicsAtThePassEnd(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	faulty := &panicClock{ManualClock: clk}
	l := vm.NewLoop(vm.WithClock(faulty))
	var log semLog
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Hour) },
		func(_ vm.AsyncSteps, code string) { log.add("step %s", code) })
	faulty.failIn(t, l.RunUntilIdle)
	l.Deferred(10*time.Millisecond, func() { log.add("deferred") })
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "deferred")
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	semExpect(t, &log, "deferred", "step Timeout")
	semClean(t, l)
}

// panicClock is a ManualClock that panics while fail is set.
type panicClock struct {
	*vm.ManualClock
	fail bool
}

// failIn runs fn with the clock failing, and fails t unless the clock's
// panic comes out of fn.
func (c *panicClock) failIn(t *testing.T, fn func()) {
	t.Helper()
	c.fail = true
	defer func() {
		c.fail = false
		if p := recover(); p != "clock failed" {
			t.Fatalf("recovered %v, want the clock's panic", p)
		}
	}()
	fn()
}

func (c *panicClock) Now() time.Time {
	if c.fail {
		panic("clock failed")
	}
	return c.ManualClock.Now()
}

// NewLoop takes nil for what it is: no option, and WithClock(nil) (or a
// nil *ManualClock) the system clock. They used to crash NewLoop.
func TestSemNilLoopOptions(t *testing.T) {
	for name, opts := range map[string][]vm.LoopOption{
		"nil option":        {nil},
		"nil clock":         {vm.WithClock(nil)},
		"nil manual clock":  {vm.WithClock((*vm.ManualClock)(nil))},
		"nil panic handler": {vm.WithPanicHandler(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			l := vm.NewLoop(opts...)
			defer l.Close()
			ran := false
			l.Deferred(0, func() { ran = true })
			l.Immediate(func() { panic("counted") })
			deadline := time.Now().Add(10 * time.Second)
			for !ran && time.Now().Before(deadline) {
				l.RunUntilIdle()
			}
			if !ran || l.Stats().Panics != 1 {
				t.Fatalf("ran %v, stats %+v", ran, l.Stats())
			}
		})
	}
}

// A second Run while one drives the loop from another goroutine returns
// ErrLoopRunning at once, reading nothing the first one writes; the first
// goes on. Two Runs used to drive the loop from two goroutines at once.
func TestSemRunWhileRunning(t *testing.T) {
	l, _ := semLoop()
	started := make(chan struct{})
	if !l.Post(func() { close(started) }) {
		t.Fatal("Post refused")
	}
	stop := semRunAsync(t, l)
	<-started
	if err := l.Run(context.Background()); !errors.Is(err, vm.ErrLoopRunning) {
		t.Fatalf("second Run: %v, want ErrLoopRunning", err)
	}
	ran := make(chan struct{})
	if !l.Post(func() { close(ran) }) {
		t.Fatal("Post refused")
	}
	<-ran
	stop()
	// Once the first has returned, the loop can be run again.
	ctx, cancel := context.WithCancel(context.Background())
	l.Post(cancel)
	if err := l.Run(ctx); err != context.Canceled {
		t.Fatalf("Run after the first returned: %v", err)
	}
}

// WithWakeup's function hears of each arrival from outside the loop's
// passes before the call that brings it returns, on that call's goroutine,
// so that a foreign loop sleeping until it is told misses nothing: a Post,
// a Resumer's completion, an Advance of the loop's ManualClock, a dropped
// root's reclaim.
func TestSemWakeupHearsOfOutsideWork(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(0, 0))
	var wakes atomic.Int32
	l := vm.NewLoop(vm.WithClock(clk), vm.WithWakeup(func() { wakes.Add(1) }))
	elsewhere := func(fn func() bool) {
		done := make(chan bool)
		go func() { done <- fn() }()
		if !<-done {
			t.Fatal("the loop refused the call")
		}
	}
	expect := func(what string, fn func()) {
		t.Helper()
		before := wakes.Load()
		fn()
		if wakes.Load() == before {
			t.Fatalf("%s: no wakeup", what)
		}
	}
	var res vm.Resumer
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res = as.Resumer()
		as.SetTimeout(time.Second)
	})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) })
	f := root.Promise()
	l.RunUntilIdle()
	if wakes.Load() != 0 {
		t.Fatalf("%d wakeups from the loop's own work", wakes.Load())
	}
	posted := false
	expect("Post", func() { elsewhere(func() bool { return l.Post(func() { posted = true }) }) })
	expect("Resumer", func() { elsewhere(func() bool { return res.Success() }) })
	l.RunUntilIdle()
	expect("Advance", func() { clk.Advance(time.Millisecond) })
	l.RunUntilIdle()
	if !posted {
		t.Fatal("the post did not run")
	}
	semFail(t, f, vm.Timeout) // the second step's, after the Advance
	root.Release()
	before := wakes.Load()
	dropWaitingRoots(l, 1)
	if !collectUntil(l, 100, func() bool { return wakes.Load() > before }) {
		t.Fatal("a dropped root's reclaim: no wakeup")
	}
	reclaimDropped(t, l)
	semClean(t, l)
}
