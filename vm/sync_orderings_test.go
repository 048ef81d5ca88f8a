package vm_test

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Sync orderings the other tests do not take: flows dropped inside
// sections with re-entries, several places of one Mutex, a rate still to
// wait for, among Mutexes bound and collected by the hundred; a waiter
// admitted and timed out in one pass; Throttle periods ended exactly when
// flows arrive, and many periods passed at once.

func waitForever(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() }

// A flow dropped while it holds places gives each back once collected,
// whatever frames stand between them: a re-entry of the Mutex it holds
// (whose frame holds nothing), the places of its parallel branches in one
// Mutex of 3, a branch waiting in an error handler's step inside a loop
// iteration. Flows queued behind enter, and the Mutex ends empty.
func TestDroppedHolderShapesGiveBackTheirPlaces(t *testing.T) {
	for _, c := range []struct {
		name  string
		max   int
		build func(m *vm.Mutex) func(as vm.AsyncSteps)
	}{
		{"re-entered", 1, func(m *vm.Mutex) func(as vm.AsyncSteps) {
			return func(as vm.AsyncSteps) {
				as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.Sync(m, waitForever) })
					})
				})
			}
		}},
		{"branches", 3, func(m *vm.Mutex) func(as vm.AsyncSteps) {
			return func(as vm.AsyncSteps) {
				as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
					p := as.Parallel()
					p.Sync(m, waitForever)
					p.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.Sync(m, waitForever) })
				})
			}
		}},
		{"handler in iteration", 2, func(m *vm.Mutex) func(as vm.AsyncSteps) {
			return func(as vm.AsyncSteps) {
				as.Repeat(3, func(as vm.AsyncSteps, _ int) {
					p := as.Parallel()
					p.Add(waitForever)
					p.Sync(m, waitForever)
					p.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, _ string) {
							as.Sync(m, waitForever)
						})
					})
				})
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			m := vm.NewMutex(c.max, vm.Unbounded)
			dropExecuted(l, c.build(m))
			l.RunUntilIdle()
			if s := m.Stats(); s.Inside != c.max {
				t.Fatalf("the dropped flow holds %d places, want %d", s.Inside, c.max)
			}
			var ws []vm.AsyncSteps
			var fs []*vm.Future
			for range c.max + 1 {
				w := l.NewSteps()
				w.Sync(m, emptyStep)
				ws, fs = append(ws, w), append(fs, w.Promise())
			}
			l.RunUntilIdle()
			if !collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == int64(len(ws)) }) {
				t.Fatal("the dropped holder is not collected")
			}
			for _, f := range fs {
				semOK(t, f)
			}
			for _, w := range ws {
				w.Release()
			}
			syStats(t, "at the end", m.Stats(), 0, 0)
			semClean(t, l)
		})
	}
}

// Holders dropped while hundreds of Mutexes are bound and collected around
// them, their numbers' entries swept and reused: the holders of the Mutexes
// kept give their places to the flows queued there, and no number of a
// collected Mutex reaches a Mutex bound later in its entry.
func TestDroppedHoldersAmongCollectedMutexes(t *testing.T) {
	l, _ := semLoop()
	var kept []*vm.Mutex
	var ws []vm.AsyncSteps
	var fs []*vm.Future
	for i := range 400 {
		m := vm.NewMutex(1, vm.Unbounded)
		dropExecuted(l, func(as vm.AsyncSteps) { as.Sync(m, waitForever) })
		if i%3 == 0 {
			kept = append(kept, m)
		}
		if i%120 == 0 {
			w := l.NewSteps()
			w.Sync(m, emptyStep)
			ws, fs = append(ws, w), append(fs, w.Promise())
		}
		l.RunUntilIdle()
		if i%50 == 0 {
			runtime.GC()
		}
	}
	if !collectUntil(l, 200, func() bool { return l.Stats().LiveRoots == int64(len(ws)) }) {
		t.Fatalf("the dropped holders are not collected: %+v", l.Stats())
	}
	for _, f := range fs {
		semOK(t, f)
	}
	for i, m := range kept {
		// kept[i] is mutex 3i: entered by its dropped holder, and by a
		// waiter when 3i is a multiple of 120.
		want := uint64(1)
		if i%40 == 0 {
			want = 2
		}
		if s := m.Stats(); s.Inside != 0 || s.Queued != 0 || s.Entered != want {
			t.Fatalf("kept mutex %d: %+v, want empty after %d entries", i, s, want)
		}
	}
	for _, w := range ws {
		w.Release()
	}
	semClean(t, l)
}

// Holders collected with their Mutexes, whose reclaims are still on their
// way to the loop when Limiters bound meanwhile take the swept entries of
// those Mutexes: the reclaims name no Mutex, and the Limiters stay empty.
func TestReclaimAfterItsMutexEntryIsReused(t *testing.T) {
	l, _ := semLoop()
	for range 64 {
		m := vm.NewMutex(1, vm.Unbounded)
		dropExecuted(l, func(as vm.AsyncSteps) { as.Sync(m, waitForever) })
	}
	l.RunUntilIdle()
	for range 3 { // the reclaims are posted, not handled
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	var lms []*vm.Limiter
	for range 64 {
		lms = append(lms, vm.NewLimiter(l, vm.LimiterOptions{}))
	}
	if !collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == 0 }) {
		t.Fatalf("the dropped holders are not collected: %+v", l.Stats())
	}
	for i, lm := range lms {
		if c, _ := lm.Stats(); c != (vm.SyncStats{}) {
			t.Fatalf("limiter %d: %+v, want unused", i, c)
		}
	}
	semClean(t, l)
}

// Flows dropped inside a Limiter's concurrency while they wait for its
// rate are kept by the rate's queue until admitted; then, waiting inside,
// they are collected and give their places back to the flow queued for
// one, which enters once the rate admits it.
func TestDroppedLimiterHoldersWaitingForTheRate(t *testing.T) {
	l, clk := semLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 2, Rate: 1, MaxQueue: vm.Unbounded, Burst: vm.Unbounded})
	for range 3 {
		dropExecuted(l, func(as vm.AsyncSteps) { as.Sync(lm, waitForever) })
	}
	w := l.NewSteps()
	w.Sync(lm, emptyStep)
	f := w.Promise()
	l.RunUntilIdle()
	c, r := lm.Stats()
	if c.Inside != 2 || c.Queued != 2 || r.Queued != 1 {
		t.Fatalf("concurrency %+v rate %+v, want 2 inside, 2 queued, 1 waiting for the rate", c, r)
	}
	for range 5 {
		collectUntil(l, 3, func() bool { return false })
		clk.Advance(time.Second)
		l.RunUntilIdle()
	}
	if !collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == 1 }) {
		t.Fatalf("the dropped holders are not collected: %+v", l.Stats())
	}
	semOK(t, f)
	w.Release()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	c, r = lm.Stats()
	if c.Inside != 0 || c.Queued != 0 || c.Entered != 4 || r.Queued != 0 || r.Entered != 4 {
		t.Fatalf("concurrency %+v rate %+v, want empty after 4 entries", c, r)
	}
	semClean(t, l)
}

// A waiter admitted by a holder's timer callback and timed out by its own
// timeout, due at the same time and set later, in the same pass: its
// section never runs, its place goes on to the next waiter before its
// step's error handler runs, and the handler may recover.
func TestMutexAdmittedWaiterTimesOutInTheSamePass(t *testing.T) {
	for _, recovers := range []bool{false, true} {
		l, clk := semLoop()
		m := vm.NewMutex(1, vm.Unbounded)
		var log semLog
		h := l.NewSteps()
		h.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("enter H")
			as.Tool().Deferred(10*time.Millisecond, func() { log.add("leave H"); as.Success() })
			as.WaitExternal()
		})
		fh := h.Promise()
		l.RunUntilIdle()
		w := l.NewSteps()
		w.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(10 * time.Millisecond)
			as.Sync(m, log.step("enter W"))
		}, func(as vm.AsyncSteps, code string) {
			s := m.Stats()
			log.add("W %s: inside %d queued %d", code, s.Inside, s.Queued)
			if recovers {
				as.Success()
			}
		})
		w.Add(log.step("W next"))
		fw := w.Promise()
		l.RunUntilIdle()
		w2 := l.NewSteps()
		w2.Sync(m, log.step("enter W2"))
		f2 := w2.Promise()
		l.RunUntilIdle()
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
		if recovers {
			semExpect(t, &log, "enter H", "leave H", "W Timeout: inside 1 queued 0", "enter W2", "W next")
			semOK(t, fw)
		} else {
			semExpect(t, &log, "enter H", "leave H", "W Timeout: inside 1 queued 0", "enter W2")
			semFail(t, fw, vm.Timeout)
		}
		semOK(t, fh)
		semOK(t, f2)
		h.Release()
		w.Release()
		w2.Release()
		syStats(t, "at the end", m.Stats(), 0, 0)
		semClean(t, l)
	}
}

// A flow that arrives when a full period ends, before its timer fires in
// that pass, queues behind those already waiting; a clock moved on by many
// periods at once ends one period, whose successor starts then.
func TestThrottlePeriodEndAndLongAdvance(t *testing.T) {
	l, clk := syLoop()
	th := vm.NewThrottle(l, 2, 100*time.Millisecond, vm.Unbounded)
	var log syLog
	var fs []*vm.Future
	start := func(name string) {
		root := l.NewSteps()
		root.Sync(th, syEnterAt(&log, clk, name))
		fs = append(fs, root.Promise())
	}
	for _, name := range []string{"A", "B", "C", "D", "E", "F", "G"} {
		start(name)
	}
	l.RunUntilIdle()
	clk.Advance(100 * time.Millisecond)
	start("H")
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	syStats(t, "after a long advance", th.Stats(), 2, 2)
	for range 2 {
		clk.Advance(100 * time.Millisecond)
		l.RunUntilIdle()
	}
	syExpect(t, &log, "A at 0", "B at 0", "C at 100", "D at 100", "E at 1100", "F at 1100", "G at 1200", "H at 1200")
	for i, f := range fs {
		syWant(t, f, "ok", "flow ", i)
	}
	if s := l.Stats(); s.Timers != 0 {
		t.Fatalf("%d timers pending on an idle Throttle", s.Timers)
	}
	syIdle(t, l)
}

// Random flows dropped while they hold and wait for places of Mutexes and
// a Limiter, taken in one order per flow (so that no two wait for each
// other, each kept alive by a queue), with live flows queued among them and
// Mutexes bound and dropped around them: once the dropped flows are
// collected, every live flow has entered, and nothing is held or in use.
func TestSyncRandomDrops(t *testing.T) { sySeeds(t, 100, syncRandomDrops) }

func syncRandomDrops(t *testing.T, seed uint64) {
	l, clk := semLoop()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e37))
	prims := []vm.ISync{
		vm.NewMutex(1, vm.Unbounded),
		vm.NewMutex(2, vm.Unbounded),
		vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, Rate: 2, Period: 10 * time.Millisecond, MaxQueue: vm.Unbounded, Burst: vm.Unbounded}),
		vm.NewMutex(1, vm.Unbounded),
		vm.NewMutex(3, vm.Unbounded),
		vm.NewMutex(1, vm.Unbounded),
	}
	// pick returns a primitive after held that no thread of the flow took,
	// or -1.
	pick := func(held int, used []bool) int {
		for range 4 {
			if i := held + 1 + rng.IntN(len(prims)); i < len(prims) && !used[i] {
				return i
			}
		}
		return -1
	}
	// body adds the steps of a thread holding primitives up to held.
	var body func(as vm.AsyncSteps, held int, used []bool, depth int)
	body = func(as vm.AsyncSteps, held int, used []bool, depth int) {
		k := rng.IntN(8)
		if depth > 3 {
			k = 0
		}
		switch k {
		case 0, 1:
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if rng.IntN(2) == 0 {
					as.SetCancel(func(vm.AsyncSteps) {})
				}
				as.WaitExternal()
			})
		case 2, 3:
			i := pick(held, used)
			if i < 0 {
				body(as, held, used, depth+1)
				return
			}
			used[i] = true
			as.Sync(prims[i], func(as vm.AsyncSteps, _ vm.Args) {
				if rng.IntN(3) == 0 { // a re-entry
					as.Sync(prims[i], func(as vm.AsyncSteps, _ vm.Args) { body(as, i, used, depth+1) })
					return
				}
				body(as, i, used, depth+1)
			})
		case 4:
			// One branch takes primitives: two that took them in
			// different orders could wait for each other for good.
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { body(as, held, used, depth+1) })
			for range rng.IntN(3) {
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { body(as, len(prims), used, depth+1) })
			}
		case 5:
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, _ string) {
				body(as, held, used, depth+1)
			})
		case 6:
			as.Repeat(3, func(as vm.AsyncSteps, i int) {
				if i == 1 {
					body(as, held, used, depth+1)
				}
			})
		case 7:
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { body(as, held, used, depth+1) })
		}
	}
	var live []vm.AsyncSteps
	var futs []*vm.Future
	var churned []*vm.Mutex
	for range 30 {
		if rng.IntN(3) == 0 {
			r := l.NewSteps()
			i := rng.IntN(len(prims))
			r.Sync(prims[i], func(as vm.AsyncSteps, _ vm.Args) {
				if j := i + 1 + rng.IntN(len(prims)); j < len(prims) {
					as.Sync(prims[j], emptyStep)
				}
			})
			live, futs = append(live, r), append(futs, r.Promise())
		} else {
			used := make([]bool, len(prims))
			dropExecuted(l, func(as vm.AsyncSteps) { body(as, -1, used, 0) })
		}
		for range rng.IntN(40) {
			m := vm.NewMutex(1, 0)
			if rng.IntN(4) == 0 {
				churned = append(churned, m)
			}
			dropExecuted(l, func(as vm.AsyncSteps) { as.Sync(m, waitForever) })
		}
		l.RunUntilIdle()
		if rng.IntN(4) == 0 {
			runtime.GC()
		}
		clk.Advance(time.Duration(rng.IntN(12)) * time.Millisecond)
		l.RunUntilIdle()
	}
	if !collectUntil(l, 300, func() bool {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
		return l.Stats().LiveRoots == int64(len(live))
	}) {
		t.Errorf("the dropped flows are not collected: %+v", l.Stats())
		return
	}
	// The last reclaim may have come in the last pass: a live flow whose
	// place it handed on may still wait for the Limiter's next period.
	for range 100 {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	for i, f := range futs {
		select {
		case <-f.Done():
			if _, err := f.Wait(t.Context()); err != nil {
				t.Errorf("live flow %d: %v", i, err)
			}
		default:
			t.Errorf("live flow %d did not complete", i)
		}
	}
	for _, r := range live {
		r.Release()
	}
	for range 3 {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	for i, p := range prims {
		switch p := p.(type) {
		case *vm.Mutex:
			if s := p.Stats(); s.Inside != 0 || s.Queued != 0 {
				t.Errorf("primitive %d: %+v", i, s)
			}
		case *vm.Limiter:
			if c, r := p.Stats(); c.Inside != 0 || c.Queued != 0 || r.Inside != 0 || r.Queued != 0 {
				t.Errorf("primitive %d: %+v %+v", i, c, r)
			}
		}
	}
	for _, m := range churned {
		if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
			t.Errorf("churned mutex: %+v", s)
		}
	}
	if s := l.Stats(); s.ArenaInUse != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.LiveRoots != 0 || vm.CallbacksInUse(l) != 0 {
		t.Errorf("not clean: %+v callbacks %d", s, vm.CallbacksInUse(l))
	}
}

// A section entered at once (a Limiter's: two sections, each entered in
// its Sync step's turn) whose step releases its own root, draws it again
// from the pool for a new flow, then succeeds through its stale handle:
// the new flow is untouched, and enters the sections the release gave
// back.
func TestSyncSectionReleasesAndReusesItsRoot(t *testing.T) {
	for _, kind := range []string{"Mutex", "Limiter"} {
		l, clk := semLoop()
		var obj vm.ISync = vm.NewMutex(1, vm.Unbounded)
		if kind == "Limiter" {
			obj = vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, Rate: 10, Period: time.Second})
		}
		var log semLog
		root := l.NewSteps()
		var again vm.AsyncSteps
		var f *vm.Future
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(5)) })
		root.Sync(obj, func(as vm.AsyncSteps, a vm.Args) {
			log.add("section %d", a.Int(0))
			root.Release()
			again = l.NewSteps()
			again.Sync(obj, func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(7)) })
			f = again.Promise()
			as.Success(vm.Int(1))
		})
		root.Add(log.step("never"))
		root.Execute()
		l.RunUntilIdle()
		semExpect(t, &log, "section 5")
		if a := semOK(t, f); a.Int(0) != 7 {
			t.Fatalf("%s: the new flow got %v", kind, a.Values())
		}
		again.Release()
		clk.Advance(time.Second) // the Throttle's period ends
		l.RunUntilIdle()
		semClean(t, l)
		if s := l.Stats(); s.LiveRoots != 0 {
			t.Fatalf("%s: %+v", kind, s)
		}
	}
}

// A Sync section entered at once is part of its step's turn: it takes none
// of the turns a flow may run on without going through the queue. A loop
// of uncontended Syncs runs as many iterations before a completion another
// flow was posted reaches it as a loop of plain steps does.
func TestSyncSectionTakesNoInlineTurn(t *testing.T) {
	iterationsBefore := func(body func(as vm.AsyncSteps, step vm.ExecFunc)) int {
		l := vm.NewLoop()
		defer l.Close()
		count, seen := 0, -1
		other := l.NewSteps()
		other.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal()
			as.Resumer().Success() // posted: it reaches the flow in a later pass
		}).Add(func(vm.AsyncSteps, vm.Args) { seen = count })
		other.Execute()
		looping := l.NewSteps()
		looping.Loop(func(as vm.AsyncSteps) {
			if seen >= 0 {
				as.Break()
			}
			body(as, func(vm.AsyncSteps, vm.Args) { count++ })
		})
		looping.Execute()
		l.RunUntilIdle()
		if seen < 0 {
			t.Fatal("the posted completion never ran its flow's next step")
		}
		return seen
	}
	mu := vm.NewMutex(1, 0)
	plain := iterationsBefore(func(as vm.AsyncSteps, step vm.ExecFunc) { as.Add(step) })
	synced := iterationsBefore(func(as vm.AsyncSteps, step vm.ExecFunc) { as.Sync(mu, step) })
	if plain < 2 || synced != plain {
		t.Fatalf("%d iterations of Syncs ran before the completion, %d of plain steps; want as many", synced, plain)
	}
}
