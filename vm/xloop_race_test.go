package vm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// xlFlows starts n flows on l from l's own goroutine (through Post), each
// built by build, and returns their Futures once all have started (nil for
// one whose Post was refused, which it reports). Any goroutine.
func xlFlows(t *testing.T, l *vm.Loop, n int, build func(root vm.AsyncSteps)) []*vm.Future {
	fs := make([]*vm.Future, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range fs {
		if !l.Post(func() {
			root := l.NewSteps()
			build(root)
			fs[i] = root.Promise()
			wg.Done()
		}) {
			t.Error("Post refused")
			wg.Done()
		}
	}
	wg.Wait()
	return fs
}

// xlWait waits for every Future of fs and returns how many failed with
// code (all others must succeed).
func xlWait(t *testing.T, fs []*vm.Future, code string) (failed int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, f := range fs {
		if f == nil {
			continue // xlFlows reported it
		}
		_, err := f.Wait(ctx)
		switch e, _ := err.(*vm.Error); {
		case err == nil:
		case e != nil && e.Code == code:
			failed++
		default:
			t.Fatalf("flow ended with %v", err)
		}
	}
	return failed
}

// xlNoTimers waits for l, run by Run on another goroutine, to have no
// timer pending.
func xlNoTimers(t *testing.T, l *vm.Loop) {
	t.Helper()
	for range 1000 {
		timers := make(chan int, 1)
		if !l.Post(func() { timers <- l.Stats().Timers }) {
			t.Fatal("Post refused")
		}
		if <-timers == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("timers still pending")
}

// Two loops run by Run on goroutines of their own: flows of loop A take
// turns in a Mutex, a Throttle and a Limiter of A while flows of loop B
// sync on the same ones. B's flows fail with InternalError and read nothing
// of the primitives that A's goroutine writes (the race detector would
// tell), A's flows all get in, and everything is back to zero.
func TestXLoopSyncOnOtherLoopsPrimitive(t *testing.T) {
	la, clkA := semLoop()
	lb, _ := semLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	th := vm.NewThrottle(la, 1000, time.Millisecond, vm.Unbounded)
	lim := vm.NewLimiter(la, vm.LimiterOptions{Concurrent: 2, MaxQueue: vm.Unbounded, Rate: 1000, Burst: vm.Unbounded})
	prims := []vm.ISync{m, th, lim}
	// m is A's once a flow of A has entered it.
	bind := la.NewSteps()
	bind.Sync(m, func(vm.AsyncSteps, vm.Args) {})
	bf := bind.Promise()
	la.RunUntilIdle()
	semOK(t, bf)
	bind.Release()

	stopA, stopB := semRunAsync(t, la), semRunAsync(t, lb)
	const n = 200
	var fa, fb []*vm.Future
	var wg sync.WaitGroup
	wg.Add(2)
	entered := 0
	go func() {
		defer wg.Done()
		fa = xlFlows(t, la, n, func(root vm.AsyncSteps) {
			root.Repeat(10, func(as vm.AsyncSteps, i int) {
				as.Sync(prims[i%len(prims)], func(as vm.AsyncSteps, _ vm.Args) {
					entered++
					as.Add(func(vm.AsyncSteps, vm.Args) {}) // leave in a later turn
				})
			})
		})
	}()
	go func() {
		defer wg.Done()
		k := 0 // lb's goroutine's
		fb = xlFlows(t, lb, n, func(root vm.AsyncSteps) {
			k++
			root.Sync(prims[k%len(prims)], func(vm.AsyncSteps, vm.Args) { t.Error("a flow of B entered") })
		})
	}()
	wg.Wait()
	if got := xlWait(t, fa, vm.InternalError); got != 0 {
		t.Fatalf("%d flows of A failed", got)
	}
	if got := xlWait(t, fb, vm.InternalError); got != n {
		t.Fatalf("%d of %d flows of B failed", got, n)
	}
	clkA.Advance(time.Second) // the periods end
	xlNoTimers(t, la)
	stopA()
	stopB()
	semClean(t, la)
	semClean(t, lb)
	if entered != n*10 {
		t.Fatalf("A entered %d times, want %d", entered, n*10)
	}
	for _, s := range []vm.SyncStats{m.Stats(), th.Stats()} {
		if s.Queued != 0 || s.Rejected != 0 {
			t.Fatalf("primitive left with %+v", s)
		}
	}
	if s := m.Stats(); s.Inside != 0 {
		t.Fatalf("Mutex left with %+v", s)
	}
}

// Flows of two loops, run by Run on goroutines of their own, enter a new
// Mutex at once: it becomes the loop's whose flow entered first, and every
// flow of the other loop fails with InternalError, whichever it is.
func TestXLoopMutexFirstEntryRace(t *testing.T) {
	for range 20 {
		la, _ := semLoop()
		lb, _ := semLoop()
		m := vm.NewMutex(1, vm.Unbounded)
		stopA, stopB := semRunAsync(t, la), semRunAsync(t, lb)
		enter := func(root vm.AsyncSteps) { root.Sync(m, func(vm.AsyncSteps, vm.Args) {}) }
		start := make(chan struct{})
		var fa, fb []*vm.Future
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; fa = xlFlows(t, la, 5, enter) }()
		go func() { defer wg.Done(); <-start; fb = xlFlows(t, lb, 5, enter) }()
		close(start)
		wg.Wait()
		failedA, failedB := xlWait(t, fa, vm.InternalError), xlWait(t, fb, vm.InternalError)
		stopA()
		stopB()
		semClean(t, la)
		semClean(t, lb)
		if failedA+failedB != 5 || failedA != 0 && failedB != 0 {
			t.Fatalf("flows refused: %d of A, %d of B; want all 5 of one loop", failedA, failedB)
		}
		if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
			t.Fatalf("Mutex left with %+v", s)
		}
	}
}

// NewLimiter binds the Limiter's Mutex to its loop where it is called: a
// goroutine that makes Limiters for a loop that Run drives meanwhile, whose
// flows enter new Mutexes (which bind them too), must not write what the
// loop's goroutine reads. Each flow then enters a Limiter made for it.
func TestXLoopNewLimiterWhileLoopRuns(t *testing.T) {
	l, clk := semLoop()
	stop := semRunAsync(t, l)
	const n = 200
	lims := make(chan *vm.Limiter, n)
	go func() {
		for range n {
			lims <- vm.NewLimiter(l, vm.LimiterOptions{Rate: 1000, Period: time.Millisecond})
		}
	}()
	entered := 0
	fs := xlFlows(t, l, n, func(root vm.AsyncSteps) {
		root.Sync(vm.NewMutex(1, 0), func(vm.AsyncSteps, vm.Args) {})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Sync(<-lims, func(vm.AsyncSteps, vm.Args) { entered++ })
		})
	})
	if got := xlWait(t, fs, vm.InternalError); got != 0 {
		t.Fatalf("%d flows failed", got)
	}
	// The pass that ended the last flow may still be running, its Limiter's
	// period staged: it would count from a reading taken after the advance.
	// A Post runs in a later pass, once that one has armed it.
	passed := make(chan struct{})
	l.Post(func() { close(passed) })
	<-passed
	clk.Advance(time.Second) // the Limiters' periods end
	xlNoTimers(t, l)
	stop()
	semClean(t, l)
	if entered != n {
		t.Fatalf("%d flows entered their Limiter, want %d", entered, n)
	}
}

// Steps of loop A hand their Resumers to steps of loop B, both loops run
// by Run: B's steps complete them once, twice, or fail them, while A's
// roots are canceled, released and time out meanwhile; then A is closed
// with steps still waiting, B completes those, and A, iterated by hand,
// ends them. Every flow of A ends once, by the first completion or its
// end, and both loops are back to zero.
func TestXLoopResumersFromOtherLoopsSteps(t *testing.T) {
	la, clkA := semLoop()
	lb, _ := semLoop()
	stopA, stopB := semRunAsync(t, la), semRunAsync(t, lb)
	const n = 300
	ress := make(chan vm.Resumer, n)
	roots := make(chan vm.AsyncSteps, n)
	// A root goes to the poker once its step has handed B its Resumer: a
	// Cancel or Release before the step ran would leave a step of B
	// waiting for a Resumer that never comes.
	build := func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			ress <- as.Resumer()
			as.SetTimeout(time.Duration(1+len(ress)%5) * time.Millisecond)
			roots <- root
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { as.Success(vm.Int(a.Int(0) + 1)) })
	}
	complete := func(ress <-chan vm.Resumer) func(vm.AsyncSteps) {
		k := 0 // lb's goroutine's
		return func(root vm.AsyncSteps) {
			k++
			i := k
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				r := <-ress
				switch i % 3 {
				case 0:
					r.Success(vm.Int(1))
				case 1:
					r.Error("Bad", "from B")
				}
				if i%3 != 2 && r.Success(vm.Int(9)) {
					t.Error("a Resumer completed twice")
				}
			})
		}
	}
	fa := xlFlows(t, la, n, build)
	poked := make(chan struct{})
	go func() {
		defer close(poked)
		for i := range n {
			r := <-roots
			switch {
			case i%7 == 0:
				la.Post(func() { r.Cancel() })
			case i%11 == 0:
				la.Post(func() { r.Release() })
			case i%13 == 0:
				clkA.Advance(time.Millisecond)
			}
		}
	}()
	xlWait(t, xlFlows(t, lb, n, complete(ress)), "")
	<-poked
	// Steps left waiting when A is closed.
	late := xlFlows(t, la, 10, build)
	for len(ress) < len(late) { // their steps have run and wait
		time.Sleep(time.Millisecond)
	}
	la.Close()
	stopA()
	for range late {
		<-roots
	}
	xlWait(t, xlFlows(t, lb, len(late), complete(ress)), "")
	stopB()
	clkA.Advance(time.Hour)
	la.RunUntilIdle()
	for _, f := range append(fa, late...) {
		args, err := semResult(t, f)
		e, _ := err.(*vm.Error)
		switch {
		case err == nil && args.Int(0) == 2:
		case err == vm.ErrCanceled, e != nil && (e.Code == "Bad" || e.Code == vm.Timeout):
		default:
			t.Fatalf("flow of A ended with %v %v", args.Values(), err)
		}
	}
	semClean(t, la)
	semClean(t, lb)
}
