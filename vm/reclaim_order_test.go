package vm_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// The collector's side of a root's life, in orderings the other tests do
// not take: what a dropped flow leaves behind once collected, what keeps
// one alive until it completes, and reclaims arriving while the loop runs,
// sleeps, or is itself dropped.

// collectUntil runs collections and loop passes until cond holds, for at
// most rounds rounds, and reports whether it did.
func collectUntil(l *vm.Loop, rounds int, cond func() bool) bool {
	for range rounds {
		if cond() {
			return true
		}
		runtime.GC()
		runtime.Gosched()
		l.RunUntilIdle() // applies the reclaims the cleanups posted
	}
	return cond()
}

// waitCancel is a step that waits for an event nothing delivers, with a
// cancel handler (whose record is the loop's).
func waitCancel(as vm.AsyncSteps, _ vm.Args) {
	as.SetCancel(func(vm.AsyncSteps) {})
	as.WaitExternal()
}

//go:noinline
func dropExecuted(l *vm.Loop, build func(as vm.AsyncSteps)) {
	as := l.NewSteps()
	build(as)
	as.Execute()
}

// Flows dropped while they wait deep in loops, nested parallels, error
// handlers' steps and frames holding Stack memory (a dedicated chunk too)
// leave nothing behind once collected: every frame's record is found.
func TestDroppedWaitingShapesLeaveNothing(t *testing.T) {
	shapes := map[string]func(as vm.AsyncSteps){
		"loop body": func(as vm.AsyncSteps) {
			as.Loop(func(as vm.AsyncSteps) { waitCancel(as, vm.Args{}) })
		},
		"repeat sub-steps": func(as vm.AsyncSteps) {
			as.Repeat(3, func(as vm.AsyncSteps, _ int) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) {})
					as.Add(waitCancel)
				})
			})
		},
		"nested parallel": func(as vm.AsyncSteps) {
			p := as.Parallel()
			p.Add(waitCancel)
			p.Add(func(vm.AsyncSteps, vm.Args) {})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) {})
				as.Parallel().Add(waitCancel).Add(waitCancel)
			})
		},
		"stack": func(as vm.AsyncSteps) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.StackRaw(100, func(unsafe.Pointer) {})
				_ = vm.Stack[struct{ s string }](as)
				as.SetCancel(func(vm.AsyncSteps) {})
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.StackRaw(40000, func(unsafe.Pointer) {})
					as.WaitExternal()
				})
			})
		},
		"error handler's steps": func(as vm.AsyncSteps) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) {})
				as.Error("E")
			}, func(as vm.AsyncSteps, _ string) { as.Add(waitCancel) })
		},
	}
	for name, build := range shapes {
		t.Run(name, func(t *testing.T) {
			l, _ := semLoop()
			for range 10 {
				dropExecuted(l, build)
			}
			l.RunUntilIdle()
			if s := l.Stats(); s.RunningRoots != 10 {
				t.Fatalf("before collection: %+v, want 10 running", s)
			}
			reclaimDropped(t, l)
		})
	}
}

//go:noinline
func dropTimedOut(l *vm.Loop, log *semLog) *vm.Future {
	as := l.NewSteps()
	as.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { log.add("cancel") })
		as.SetTimeout(time.Second)
	}, func(_ vm.AsyncSteps, code string) { log.add("%s", code) })
	return as.Promise()
}

// A dropped flow waiting with a timeout is kept alive by it: it times out
// as any other, its Future reports it, and it is reclaimed afterwards.
func TestDroppedRootWithTimeoutCompletes(t *testing.T) {
	l, clk := semLoop()
	log := &semLog{}
	f := dropTimedOut(l, log)
	l.RunUntilIdle()
	if collectUntil(l, 5, func() bool { return l.Stats().LiveRoots == 0 }) {
		t.Fatal("a flow waiting with a timeout was collected")
	}
	clk.Advance(time.Second)
	l.RunUntilIdle()
	semFail(t, f, vm.Timeout)
	semExpect(t, log, "cancel", vm.Timeout)
	reclaimDropped(t, l)
	semClean(t, l)
}

//go:noinline
func dropQueued(l *vm.Loop, m vm.ISync, n *int) *vm.Future {
	as := l.NewSteps()
	as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
		*n++
		as.SetCancel(func(vm.AsyncSteps) {})
		as.Add(func(vm.AsyncSteps, vm.Args) {})
	})
	return as.Promise()
}

// Flows dropped while they wait in the queue of a Mutex, Throttle or
// Limiter that a live flow holds are kept by the queue, enter in turn, and
// are reclaimed once they complete.
func TestDroppedSyncWaitersComplete(t *testing.T) {
	for _, kind := range []string{"mutex", "throttle", "limiter"} {
		t.Run(kind, func(t *testing.T) {
			l, clk := semLoop()
			var m vm.ISync
			switch kind {
			case "mutex":
				m = vm.NewMutex(1, vm.Unbounded)
			case "throttle":
				m = vm.NewThrottle(l, 1, time.Second, vm.Unbounded)
			default:
				m = vm.NewLimiter(l, vm.LimiterOptions{MaxQueue: vm.Unbounded, Burst: vm.Unbounded})
			}
			holder := l.NewSteps()
			var res vm.Resumer
			holder.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
				res = as.Resumer()
				as.WaitExternal()
			})
			hf := holder.Promise()
			l.RunUntilIdle()
			n := 0
			var fs []*vm.Future
			for range 5 {
				fs = append(fs, dropQueued(l, m, &n))
			}
			l.RunUntilIdle()
			collectUntil(l, 5, func() bool { return false }) // the queue keeps them
			res.Success()
			for range 10 {
				clk.Advance(time.Second)
				l.RunUntilIdle()
			}
			semOK(t, hf)
			for _, f := range fs {
				semOK(t, f)
			}
			if n != 5 {
				t.Fatalf("%d sections ran, want 5", n)
			}
			holder.Release()
			reclaimDropped(t, l)
			semClean(t, l)
		})
	}
}

// Reclaims posted while Run sleeps wake it, and it applies them.
func TestReclaimWakesRun(t *testing.T) {
	l := vm.NewLoop()
	dropWaitingRoots(l, 50)
	done := make(chan error)
	go func() { done <- l.Run(t.Context()) }()
	stats := func() (vm.LoopStats, int) {
		ch := make(chan struct{})
		var s vm.LoopStats
		var k int
		l.Post(func() { s, k = l.Stats(), vm.CallbacksInUse(l); close(ch) })
		<-ch
		return s, k
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		s, k := stats()
		if s.LiveRoots == 0 && s.RunningRoots == 0 && s.ArenaInUse == 0 && k == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reclaims not applied while Run sleeps: %+v, %d callbacks", s, k)
		}
		time.Sleep(time.Millisecond)
	}
	l.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Reclaims that arrive during a pass (a step collects) are applied in a
// later pass, and the flow running meanwhile is not disturbed.
func TestReclaimDuringPass(t *testing.T) {
	l, _ := semLoop()
	dropWaitingRoots(l, 20)
	as := l.NewSteps()
	for i := range 5 {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			runtime.GC()
			runtime.GC()
			runtime.Gosched()
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				p := (*[64]byte)(as.StackRaw(64, nil))
				p[i] = byte(i)
			})
		})
	}
	f := as.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	as.Release()
	reclaimDropped(t, l)
}

//go:noinline
func dropLoopWithRoots(closed bool) {
	l := vm.NewLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	for i := range 200 {
		as := l.NewSteps()
		switch i % 4 {
		case 0: // idle, with a step
			as.Add(emptyStep)
		case 1: // waiting, with Stack memory and a cancel handler
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.StackRaw(40000, func(unsafe.Pointer) {})
				waitCancel(as, vm.Args{})
			})
			as.Execute()
		case 2: // holding, or waiting for, a Mutex
			as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
			as.Execute()
		case 3: // released into the pool
			as.Add(emptyStep)
			as.Execute()
			l.RunUntilIdle()
			as.Release()
		}
	}
	l.Spawn(waitCancel)
	l.Deferred(time.Hour, func() {})
	l.RunUntilIdle()
	if closed {
		l.Close()
	}
}

// A loop dropped, closed or not, with idle, waiting, queued and pooled
// roots gives every arena back once collected.
func TestDroppedLoopWithRootsReturnsArenas(t *testing.T) {
	held := func() int64 { s := arena.ReadSourceStats(); return s.Mapped - s.Idle }
	for _, closed := range []bool{false, true} {
		runtime.GC()
		before := held()
		dropLoopWithRoots(closed)
		for i := 0; i < 100 && held() > before; i++ {
			runtime.GC()
			runtime.Gosched()
		}
		if h := held(); h > before {
			t.Fatalf("closed=%v: %d arena bytes still held", closed, h-before)
		}
	}
}

// canceledWhileWaiting returns a case of TestReleaseOrderingsThenCollect:
// a root runs the step step(root) makes until it waits, then is canceled.
func canceledWhileWaiting(step func(root vm.AsyncSteps) vm.ExecFunc) func(*vm.Loop) {
	return func(l *vm.Loop) {
		as := l.NewSteps()
		as.Add(step(as))
		as.Execute()
		l.RunUntilIdle()
		as.Cancel()
	}
}

// Roots released from their own steps, handlers, cancel handlers, destroy
// callbacks and Immediates, by Spawn's end, or while queued, are counted
// once: with no pool they are dropped and reclaimed without touching the
// Stats again, with one the pooled roots serve new flows.
func TestReleaseOrderingsThenCollect(t *testing.T) {
	cases := map[string]func(l *vm.Loop){
		"own step": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(vm.AsyncSteps, vm.Args) { as.Release() })
			as.Execute()
		},
		"own step after Add": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(s vm.AsyncSteps, _ vm.Args) {
				s.Add(emptyStep)
				s.SetCancel(func(vm.AsyncSteps) {})
				as.Release()
			})
			as.Execute()
		},
		"own error handler": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(s vm.AsyncSteps, _ vm.Args) { s.Error("E") }, func(vm.AsyncSteps, string) { as.Release() })
			as.Execute()
		},
		"own branch": func(l *vm.Loop) {
			as := l.NewSteps()
			p := as.Parallel()
			p.Add(waitCancel)
			p.Add(func(vm.AsyncSteps, vm.Args) { as.Release() })
			as.Execute()
		},
		"own loop body": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Loop(func(vm.AsyncSteps) { as.Release() })
			as.Execute()
		},
		"Immediate": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(s vm.AsyncSteps, _ vm.Args) {
				s.WaitExternal()
				l.Immediate(func() { as.Release() })
			})
			as.Execute()
		},
		"own cancel handlers, restarting": canceledWhileWaiting(func(as vm.AsyncSteps) vm.ExecFunc {
			return func(s vm.AsyncSteps, _ vm.Args) {
				s.SetCancel(func(vm.AsyncSteps) { as.Release() })
				s.Add(func(s vm.AsyncSteps, _ vm.Args) {
					s.SetCancel(func(vm.AsyncSteps) { as.Release(); as.Execute() })
					s.WaitExternal()
				})
			}
		}),
		"destroy callback": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(s vm.AsyncSteps, _ vm.Args) {
				s.StackRaw(8, func(unsafe.Pointer) { as.Release() })
			})
			as.Execute()
		},
		"destroy callback of a canceled step": canceledWhileWaiting(func(as vm.AsyncSteps) vm.ExecFunc {
			return func(s vm.AsyncSteps, _ vm.Args) {
				s.StackRaw(8, func(unsafe.Pointer) { as.Release(); as.Cancel() })
				s.WaitExternal()
			}
		}),
		"queued": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(emptyStep)
			as.Execute()
			as.Release()
		},
		"Promise": func(l *vm.Loop) {
			as := l.NewSteps()
			as.Add(func(s vm.AsyncSteps, _ vm.Args) { s.WaitExternal() })
			f := as.Promise()
			l.RunUntilIdle()
			as.Release()
			<-f.Done()
		},
		"Spawn": func(l *vm.Loop) {
			l.Spawn(func(s vm.AsyncSteps, _ vm.Args) { s.Add(emptyStep) })
			l.Spawn(func(s vm.AsyncSteps, _ vm.Args) { s.Error("E") })
		},
	}
	for name, run := range cases {
		for _, pool := range []int{0, 4} {
			t.Run(name, func(t *testing.T) {
				l := vm.NewLoop(vm.WithRootPool(pool))
				for range 5 {
					run(l)
					l.RunUntilIdle()
				}
				if pool == 0 {
					collectUntil(l, 100, func() bool { return l.Stats().ArenaReserved == 0 })
				}
				reclaimDropped(t, l)
				if s := l.Stats(); s.LiveRoots != 0 || pool == 0 && s.ArenaReserved != 0 || s.Panics != 0 {
					t.Fatalf("after collection: %+v", s)
				}
				for range 6 { // more than the pool holds
					as := l.NewSteps()
					f := as.Add(emptyStep).Promise()
					l.RunUntilIdle()
					semOK(t, f)
					as.Release()
				}
				semClean(t, l)
			})
		}
	}
}

//go:noinline
func dropSyncHolder(l *vm.Loop, m vm.ISync) {
	as := l.NewSteps()
	as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
	as.Execute()
}

// A flow dropped inside a section, waiting for an event nothing can
// deliver, gives its place back once collected: the flow queued behind it
// enters (a Mutex, a Limiter's concurrency, both when nested), and one
// with nobody queued leaves the Mutex free.
func TestDroppedSyncHolderFreesItsPlace(t *testing.T) {
	for _, c := range []struct {
		name  string
		syncs func(l *vm.Loop) []vm.ISync
	}{
		{"mutex", func(*vm.Loop) []vm.ISync { return []vm.ISync{vm.NewMutex(1, vm.Unbounded)} }},
		{"limiter", func(l *vm.Loop) []vm.ISync {
			return []vm.ISync{vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, Rate: 100, MaxQueue: vm.Unbounded})}
		}},
		{"nested", func(*vm.Loop) []vm.ISync {
			return []vm.ISync{vm.NewMutex(1, vm.Unbounded), vm.NewMutex(2, 0)}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, clk := semLoop()
			syncs := c.syncs(l)
			dropNestedHolder(l, syncs)
			l.RunUntilIdle()
			w := l.NewSteps()
			f := w.Sync(syncs[0], emptyStep).Promise()
			l.RunUntilIdle()
			if !collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == 1 }) {
				t.Fatal("the dropped holder is not collected")
			}
			semOK(t, f)
			w.Release()
			clk.Advance(time.Second) // the Limiter's period ends
			l.RunUntilIdle()
			for i, s := range syncs {
				if m, ok := s.(*vm.Mutex); ok && m.Stats().Inside != 0 {
					t.Errorf("mutex %d: Inside = %d after every flow ended", i, m.Stats().Inside)
				}
			}
			semClean(t, l)
		})
	}

	l, _ := semLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	first := l.NewSteps()
	f := first.Sync(m, emptyStep).Promise()
	l.RunUntilIdle()
	semOK(t, f) // m is the loop's now: the next entry takes the uncontended path
	first.Release()
	dropNestedHolder(l, []vm.ISync{m})
	l.RunUntilIdle()
	if !collectUntil(l, 100, func() bool { return m.Stats().Inside == 0 }) {
		t.Fatalf("Inside = %d after the holder was collected, want 0", m.Stats().Inside)
	}
}

// dropNestedHolder drops a flow that waits inside the sections of syncs,
// each nested in the one before.
//
//go:noinline
func dropNestedHolder(l *vm.Loop, syncs []vm.ISync) {
	as := l.NewSteps()
	var enter func(as vm.AsyncSteps, i int)
	enter = func(as vm.AsyncSteps, i int) {
		as.Sync(syncs[i], func(as vm.AsyncSteps, _ vm.Args) {
			if i+1 < len(syncs) {
				enter(as, i+1)
				return
			}
			as.WaitExternal()
		})
	}
	enter(as, 0)
	as.Execute()
}

//go:noinline
func dropPromised(l *vm.Loop, build func(as vm.AsyncSteps)) *vm.Future {
	as := l.NewSteps()
	build(as)
	return as.Promise()
}

// The Future of a flow dropped while it waits for what nothing can deliver
// is settled with InternalError once the root is collected: its run never
// ends, and a Wait on it would otherwise wait for good. A Future whose run
// ended keeps its result when the root is collected later.
func TestDroppedRootSettlesItsFuture(t *testing.T) {
	l, _ := semLoop()
	f := dropPromised(l, func(as vm.AsyncSteps) { as.Add(waitCancel) })
	l.RunUntilIdle()
	if !collectUntil(l, 100, func() bool {
		select {
		case <-f.Done():
			return true
		default:
			return false
		}
	}) {
		t.Fatal("the Future of the collected flow is not settled")
	}
	semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "dropped", "collected")

	done := dropPromised(l, func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(7)) })
	})
	l.RunUntilIdle()
	collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == 0 })
	if got := semOK(t, done).Int(0); got != 7 {
		t.Fatalf("the ended run's Future holds %d, want 7", got)
	}
	semClean(t, l)
}

//go:noinline
func dropLoopWithPromise() *vm.Future {
	l, _ := semLoop()
	as := l.NewSteps()
	as.Add(waitCancel)
	f := as.Promise()
	l.RunUntilIdle()
	return f
}

// The Future of a run left waiting in a loop the program drops is settled
// with InternalError once the loop is collected.
func TestDroppedLoopSettlesItsFutures(t *testing.T) {
	f := dropLoopWithPromise()
	if !settledByCollection(f) {
		t.Fatal("the Future of a run in a collected loop is not settled")
	}
	semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "loop", "dropped")
}

// settledByCollection runs collections until f is settled, for at most 100
// rounds, and reports whether it was.
func settledByCollection(f *vm.Future) bool {
	for i := 0; ; i++ {
		select {
		case <-f.Done():
			return true
		default:
		}
		if i == 100 {
			return false
		}
		runtime.GC()
		runtime.Gosched()
	}
}

//go:noinline
func dropLoopWithPendingPost(closed bool) *vm.Future {
	l, _ := semLoop()
	as := l.NewSteps()
	as.Add(waitCancel)
	f := as.Promise()
	l.RunUntilIdle()
	l.Post(func() { l.Immediate(func() {}) }) // never run: it refers to l
	if closed {
		l.Close()
	}
	return f
}

// A loop dropped, closed or not, with a Post pending whose function refers
// to the loop, is collected all the same: the Future of its waiting run is
// settled.
func TestDroppedLoopWithPendingPostIsCollected(t *testing.T) {
	for _, closed := range []bool{false, true} {
		f := dropLoopWithPendingPost(closed)
		if !settledByCollection(f) {
			t.Fatalf("closed=%v: the loop was not collected (its run's Future is not settled)", closed)
		}
		semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "loop", "dropped")
	}
}

//go:noinline
func dropLoopWithAwait(closed bool, ctxErr chan<- error) *vm.Future {
	l, _ := semLoop()
	as := l.NewSteps()
	started := make(chan struct{})
	as.Await(func(ctx context.Context) (vm.Value, error) {
		close(started)
		<-ctx.Done()
		ctxErr <- ctx.Err()
		return vm.Int(1), nil
	})
	f := as.Promise()
	semDriveUntil(l, started)
	if closed {
		l.Close()
	}
	return f
}

// A loop dropped, closed or not, while an Await function waits for its
// context is collected all the same: the context is canceled, the
// function's goroutine ends, and the Future of its run is settled.
func TestDroppedLoopWithAwaitIsCollected(t *testing.T) {
	for _, closed := range []bool{false, true} {
		before := runtime.NumGoroutine()
		ctxErr := make(chan error, 1)
		f := dropLoopWithAwait(closed, ctxErr)
		if !settledByCollection(f) {
			t.Fatalf("closed=%v: the loop was not collected (its run's Future is not settled)", closed)
		}
		semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "loop", "dropped")
		if err := semAwait(t, ctxErr, "the Await function's return"); !errors.Is(err, context.Canceled) {
			t.Fatalf("closed=%v: ctx.Err() = %v", closed, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Fatalf("closed=%v: %d goroutines, %d before", closed, n, before)
		}
	}
}

// dropTimedOutside runs a flow whose step waits, then sets its timeout
// from outside the loop's passes with a clock that panics, and drops it.
//
//go:noinline
func dropTimedOutside(t *testing.T, l *vm.Loop, clk *panicClock) *vm.Future {
	as := l.NewSteps()
	var h vm.AsyncSteps
	as.Add(func(as vm.AsyncSteps, _ vm.Args) {
		h = as
		as.WaitExternal()
	})
	f := as.Promise()
	l.RunUntilIdle()
	clk.failIn(t, func() { h.SetTimeout(time.Second) })
	return f
}

// A step whose SetTimeout, made between passes, could not read the clock
// waits without a timer, as if it had none: nothing can complete it once
// its root is dropped, which is then collected and its Future settled. The
// frame's record kept the root reachable, waiting for a timer that was
// never armed.
func TestDroppedRootWhoseTimeoutClockPanicked(t *testing.T) {
	clk := &panicClock{ManualClock: vm.NewManualClock(time.Unix(1_700_000_000, 0))}
	l := vm.NewLoop(vm.WithClock(clk))
	f := dropTimedOutside(t, l, clk)
	if n := l.Stats().Timers; n != 0 {
		t.Fatalf("%d timers after the failed SetTimeout, want 0", n)
	}
	if !collectUntil(l, 100, func() bool { return l.Stats().LiveRoots == 0 }) {
		t.Fatal("the dropped root is not collected")
	}
	semFail(t, f, vm.InternalError)
	semClean(t, l)
}

// A flow dropped while its step waits with a Resumer handed out is kept:
// the Resumer, a plain value, may still be used, and it completes the flow,
// which is reclaimed then.
func TestDroppedFlowWithResumerKept(t *testing.T) {
	l, _ := semLoop()
	var res vm.Resumer
	ran := false
	dropExecuted(l, func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			res = as.Resumer()
			as.WaitExternal()
		})
		as.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
	})
	l.RunUntilIdle()
	if collectUntil(l, 5, func() bool { return l.Stats().LiveRoots == 0 }) {
		t.Fatal("flow waiting with a Resumer reclaimed")
	}
	if !res.Success() {
		t.Fatal("Resumer refused after the collections")
	}
	l.RunUntilIdle()
	if !ran {
		t.Fatal("step after the wait did not run")
	}
	reclaimDropped(t, l)
	semClean(t, l)
}
