package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/allocs"
	"github.com/stepvm/stepvm/vm"
)

// Flows enter in the order they arrive; each section spans two turns, so
// that the others queue behind it.
func TestMutexFIFO(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	var futs []*vm.Future
	for i := range 4 {
		root := l.NewSteps()
		root.Sync(m, syHold(&log, string(rune('A'+i))))
		futs = append(futs, root.Promise())
	}
	l.Iterate()
	syStats(t, "after the first pass", m.Stats(), 1, 3)
	l.RunUntilIdle()
	syExpect(t, &log,
		"enter A", "leave A", "enter B", "leave B",
		"enter C", "leave C", "enter D", "leave D")
	for i, f := range futs {
		syWant(t, f, "ok", "flow ", i)
	}
	syStats(t, "at the end", m.Stats(), 0, 0)
	if s := m.Stats(); s.Entered != 4 || s.Rejected != 0 {
		t.Fatalf("counters %+v", s)
	}
	syIdle(t, l)
}

// At most max flows are inside at once; they enter in arrival order.
func TestMutexMax(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(3, vm.Unbounded)
	var log syLog
	inside, most := 0, 0
	for i := range 10 {
		root := l.NewSteps()
		root.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			inside++
			most = max(most, inside)
			// Stats counts the flows admitted, some of which may not have
			// run yet.
			if s := m.Stats(); s.Inside < inside || s.Inside > 3 {
				t.Errorf("flow %d: Stats().Inside = %d, %d flows inside", i, s.Inside, inside)
			}
			log.add("enter %d", i)
			as.Add(func(vm.AsyncSteps, vm.Args) {})
			as.Add(func(vm.AsyncSteps, vm.Args) { inside-- })
		})
		root.Execute()
	}
	l.RunUntilIdle()
	if most != 3 {
		t.Fatalf("at most %d flows were inside, want 3", most)
	}
	for i, line := range log.lines {
		if want := "enter " + string(rune('0'+i)); line != want {
			t.Fatalf("entry %d: %q, want %q", i, line, want)
		}
	}
	syEnd(t, l, m.Stats())
}

// The section receives the values the Sync step receives, and the next
// step receives the section's, also when the flow had to wait. The section
// is released as it completes, before the next step is scheduled, so B
// enters before A's next step runs.
func TestMutexPassesValues(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	for _, name := range []string{"A", "B"} {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Str(name)) })
		root.Sync(m, func(as vm.AsyncSteps, a vm.Args) {
			log.add("section %s got %d %s", name, a.Int(0), a.String(1))
			n, s := a.Int(0), a.String(1)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(n+1), vm.Str(s+"!"), vm.Bool(true)) })
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) {
			log.add("next %s got %d %s %v (%d values)", name, a.Int(0), a.String(1), a.Bool(2), a.Len())
		})
		root.Execute()
	}
	l.RunUntilIdle()
	syExpect(t, &log,
		"section A got 1 A",
		"section B got 1 B",
		"next A got 2 A! true (3 values)",
		"next B got 2 B! true (3 values)")
	syIdle(t, l)
}

// A flow that syncs again on a Mutex it holds, from the section or its
// sub-steps, enters without waiting and is counted once. MaxQueue 0 makes
// any wait a DefenseRejected.
func TestMutexReentry(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, 0)
	var log syLog
	check := func(where string) {
		if s := m.Stats(); s.Inside != 1 || s.Entered != 1 {
			t.Errorf("%s: %+v, want Inside 1, Entered 1", where, s)
		}
	}
	root := l.NewSteps()
	root.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
		log.add("outer")
		check("outer")
		as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("nested")
			check("nested")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Repeat(2, func(as vm.AsyncSteps, i int) {
					as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
						log.add("in sub-step loop %d", i)
						check("in sub-step loop")
						as.Success(vm.Int(int64(i)))
					})
				})
			})
		})
		as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { log.add("nested again") })
	})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("after: inside %d", m.Stats().Inside)
	})
	f := root.Promise()
	other := l.NewSteps()
	other.Sync(m, syHold(&log, "other"))
	of := other.Promise()
	l.RunUntilIdle()
	syExpect(t, &log,
		"outer",
		"nested",
		"in sub-step loop 0",
		"in sub-step loop 1",
		"nested again",
		"after: inside 0")
	syWant(t, f, "ok", "re-entering flow")
	syWant(t, of, vm.DefenseRejected, "other flow")
	syEnd(t, l, m.Stats())
}

// Branches of a Parallel step are separate flows: they exclude each other,
// and a branch does not inherit the lock of the thread that started it.
func TestMutexBranchesAreSeparateFlows(t *testing.T) {
	t.Run("exclude each other", func(t *testing.T) {
		l, _ := syLoop()
		m := vm.NewMutex(1, vm.Unbounded)
		var log syLog
		root := l.NewSteps()
		p := root.Parallel()
		for _, name := range []string{"b0", "b1", "b2"} {
			p.Sync(m, syHold(&log, name))
		}
		f := root.Promise()
		l.RunUntilIdle()
		syExpect(t, &log, "enter b0", "leave b0", "enter b1", "leave b1", "enter b2", "leave b2")
		syWant(t, f, "ok")
		syEnd(t, l, m.Stats())
	})
	t.Run("no inherited lock", func(t *testing.T) {
		l, clk := syLoop()
		m := vm.NewMutex(1, vm.Unbounded)
		var log syLog
		root := l.NewSteps()
		root.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(time.Second)
			as.Parallel().Sync(m, func(vm.AsyncSteps, vm.Args) { log.add("branch entered") })
		}, func(as vm.AsyncSteps, code string) {
			log.add("section error %s: inside %d queued %d", code, m.Stats().Inside, m.Stats().Queued)
		})
		f := root.Promise()
		l.RunUntilIdle()
		syStats(t, "branch waiting", m.Stats(), 1, 1)
		clk.Advance(time.Second)
		l.RunUntilIdle()
		syExpect(t, &log, "section error Timeout: inside 1 queued 0")
		syWant(t, f, vm.Timeout, "flow")
		syEnd(t, l, m.Stats())
	})
}

// A full queue refuses new flows with DefenseRejected through the normal
// error path; the flows already queued keep their place.
func TestMutexQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		maxQueue int
		want     []string
	}{
		{0, []string{"enter A", "B: DefenseRejected Mutex queue limit", "C: DefenseRejected Mutex queue limit", "leave A"}},
		{1, []string{"enter A", "C: DefenseRejected Mutex queue limit", "leave A", "enter B", "leave B"}},
		{vm.Unbounded, []string{"enter A", "leave A", "enter B", "leave B", "enter C", "leave C"}},
	} {
		l, _ := syLoop()
		m := vm.NewMutex(1, tc.maxQueue)
		var log syLog
		for _, name := range []string{"A", "B", "C"} {
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Sync(m, syHold(&log, name))
			}, func(as vm.AsyncSteps, code string) {
				log.add("%s: %s %s", name, code, as.State().ErrorInfo())
			})
			root.Execute()
		}
		l.RunUntilIdle()
		syExpect(t, &log, tc.want...)
		s := m.Stats()
		syStats(t, "at the end", s, 0, 0)
		if rejected := syCount(tc.want, vm.DefenseRejected); int(s.Rejected) != rejected || int(s.Entered) != 3-rejected {
			t.Fatalf("maxQueue %d: %+v", tc.maxQueue, s)
		}
		syIdle(t, l)
	}
}

// However a section fails, its error handler runs while the flow is still
// inside, and the next flow enters once the error has left the section.
func TestMutexFaultInSection(t *testing.T) {
	for _, tc := range []struct {
		name string
		code string
		fail func(as vm.AsyncSteps)
	}{
		{"Error", "Boom", func(as vm.AsyncSteps) { as.Error("Boom", "info") }},
		{"panic", vm.InternalError, func(vm.AsyncSteps) { panic("kaboom") }},
		{"panic Error", vm.Unauthorized, func(vm.AsyncSteps) { panic(&vm.Error{Code: vm.Unauthorized}) }},
		{"timeout", vm.Timeout, func(as vm.AsyncSteps) { as.SetTimeout(10 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clk := syLoop()
			m := vm.NewMutex(1, vm.Unbounded)
			var log syLog
			a := l.NewSteps()
			a.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
					log.add("enter A")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { tc.fail(as) })
				}, func(as vm.AsyncSteps, code string) {
					s := m.Stats()
					log.add("A section handler %s: inside %d queued %d", code, s.Inside, s.Queued)
				})
			}, func(as vm.AsyncSteps, code string) {
				s := m.Stats()
				log.add("A outer handler %s: inside %d queued %d", code, s.Inside, s.Queued)
			})
			fa := a.Promise()
			b := l.NewSteps()
			b.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Sync(m, syHold(&log, "B")) })
			fb := b.Promise()
			l.RunUntilIdle()
			clk.Advance(10 * time.Millisecond)
			l.RunUntilIdle()
			syExpect(t, &log,
				"enter A",
				"A section handler "+tc.code+": inside 1 queued 1",
				"A outer handler "+tc.code+": inside 1 queued 0",
				"enter B", "leave B")
			syWant(t, fa, tc.code, "A")
			syWant(t, fb, "ok", "B")
			syEnd(t, l, m.Stats())
		})
	}
}

// An error handler of the section that recovers continues the flow after
// the section, which has been released by then.
func TestMutexHandlerRecovers(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	root := l.NewSteps()
	root.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
		as.Error("Boom")
	}, func(as vm.AsyncSteps, code string) {
		as.Success(vm.Int(7))
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		log.add("next got %d, inside %d", a.Int(0), m.Stats().Inside)
	})
	f := root.Promise()
	l.RunUntilIdle()
	syExpect(t, &log, "next got 7, inside 0")
	syWant(t, f, "ok")
	syIdle(t, l)
}

// Canceling or releasing the root of a flow inside the section releases
// it; canceling one that waits removes it from the queue and leaves the
// others in order.
func TestMutexCancel(t *testing.T) {
	l, clk := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	var roots []vm.AsyncSteps
	var futs []*vm.Future
	for _, name := range []string{"A", "B", "C", "D", "E"} {
		root := l.NewSteps()
		root.Sync(m, syWaitFor(&log, name, 10*time.Millisecond))
		roots = append(roots, root)
		futs = append(futs, root.Promise())
	}
	l.RunUntilIdle()
	syStats(t, "all arrived", m.Stats(), 1, 4)
	roots[2].Cancel() // C waits
	syStats(t, "C canceled", m.Stats(), 1, 3)
	roots[0].Cancel() // A is inside: B enters
	syStats(t, "A canceled", m.Stats(), 1, 2)
	l.RunUntilIdle()
	roots[3].Release() // D waits
	syStats(t, "D released", m.Stats(), 1, 1)
	roots[1].Release() // B is inside: E enters
	l.RunUntilIdle()
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	syExpect(t, &log, "enter A", "enter B", "enter E", "leave E")
	for i, want := range []string{"canceled", "", "canceled", "", "ok"} {
		if want != "" {
			syWant(t, futs[i], want, "flow ", i)
		}
	}
	syStats(t, "at the end", m.Stats(), 0, 0)
	if s := m.Stats(); s.Entered != 3 {
		t.Fatalf("%+v, want 3 entries", s)
	}
	syIdle(t, l)
}

// A flow that times out while it waits leaves the queue; the section it
// waited for never runs.
func TestMutexTimeoutWhileQueued(t *testing.T) {
	l, clk := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	a := l.NewSteps()
	a.Sync(m, syWaitFor(&log, "A", 50*time.Millisecond))
	fa := a.Promise()
	b := l.NewSteps()
	b.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(10 * time.Millisecond)
		as.Sync(m, syHold(&log, "B"))
	})
	fb := b.Promise()
	c := l.NewSteps()
	c.Sync(m, syHold(&log, "C"))
	fc := c.Promise()
	l.RunUntilIdle()
	syStats(t, "B and C wait", m.Stats(), 1, 2)
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	syWant(t, fb, vm.Timeout, "B")
	syStats(t, "B timed out", m.Stats(), 1, 1)
	syPending(t, fa)
	clk.Advance(40 * time.Millisecond)
	l.RunUntilIdle()
	syExpect(t, &log, "enter A", "leave A", "enter C", "leave C")
	syWant(t, fa, "ok", "A")
	syWant(t, fc, "ok", "C")
	syEnd(t, l, m.Stats())
}

// Break and Continue leaving a section release it.
func TestMutexLoopControl(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, 0)
	var log syLog
	root := l.NewSteps()
	root.Repeat(4, func(as vm.AsyncSteps, i int) {
		as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("%d inside %d", i, m.Stats().Inside)
			switch i {
			case 1:
				as.Continue()
			case 2:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Break() })
			}
		})
	})
	root.Add(func(vm.AsyncSteps, vm.Args) { log.add("after: inside %d", m.Stats().Inside) })
	f := root.Promise()
	l.RunUntilIdle()
	syExpect(t, &log, "0 inside 1", "1 inside 1", "2 inside 1", "after: inside 0")
	syWant(t, f, "ok")
	syIdle(t, l)
}

// Sync on a nil object, on a nil pointer of a primitive or on a primitive
// not made by its constructor is an InternalError of the flow that made
// the call and of no other.
func TestSyncNilObject(t *testing.T) {
	var nilMutex *vm.Mutex
	var nilThrottle *vm.Throttle
	var nilLimiter *vm.Limiter
	for _, tc := range []struct {
		name string
		obj  vm.ISync
		info string
	}{
		{"nil", nil, "Sync with a nil object or step function"},
		{"nil *Mutex", nilMutex, "Sync on a nil *Mutex"},
		{"nil *Throttle", nilThrottle, "Sync on a nil *Throttle"},
		{"nil *Limiter", nilLimiter, "Sync on a nil *Limiter"},
		{"zero Mutex", new(vm.Mutex), "Sync on a zero Mutex: make it with NewMutex"},
		{"zero Throttle", new(vm.Throttle), "Sync on a zero Throttle: make it with NewThrottle"},
		{"zero Limiter", new(vm.Limiter), "Sync on a zero Limiter: make it with NewLimiter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := syLoop()
			m := vm.NewMutex(1, vm.Unbounded)
			var log syLog
			good := l.NewSteps()
			good.Sync(m, syHold(&log, "good"))
			fg := good.Promise()
			bad := l.NewSteps()
			bad.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Sync(tc.obj, func(vm.AsyncSteps, vm.Args) { log.add("bad section ran") })
			})
			fb := bad.Promise()
			l.RunUntilIdle()
			syExpect(t, &log, "enter good", "leave good")
			syWant(t, fb, vm.InternalError, "bad flow")
			if got := bad.State().ErrorInfo(); got != tc.info {
				t.Errorf("ErrorInfo %q, want %q", got, tc.info)
			}
			syWant(t, fg, "ok", "good flow")
			syEnd(t, l, m.Stats())
		})
	}
}

// A Mutex belongs to the loop of its first flow; a flow of another loop
// fails and leaves it untouched.
func TestMutexOtherLoop(t *testing.T) {
	l1, clk1 := syLoop()
	l2, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	a := l1.NewSteps()
	a.Sync(m, syWaitFor(&log, "A", time.Millisecond))
	fa := a.Promise()
	l1.RunUntilIdle()
	b := l2.NewSteps()
	b.Sync(m, syHold(&log, "B"))
	fb := b.Promise()
	l2.RunUntilIdle()
	syStats(t, "B refused", m.Stats(), 1, 0)
	clk1.Advance(time.Millisecond)
	l1.RunUntilIdle()
	syExpect(t, &log, "enter A", "leave A")
	syWant(t, fa, "ok")
	syWant(t, fb, vm.InternalError, "B")
	syIdle(t, l1)
	syIdle(t, l2)
}

// Sync steps are copied by CopyFrom and Clone like any other step.
func TestMutexClone(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	model := l.NewSteps()
	model.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(5)) })
	model.Sync(m, func(as vm.AsyncSteps, a vm.Args) {
		n := a.Int(0)
		log.add("enter %d", n)
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("leave %d", n)
			as.Success(vm.Int(n * 2))
		})
	})
	model.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next %d", a.Int(0)) })
	c1, c2 := model.Clone(), model.Clone()
	f1, f2 := c1.Promise(), c2.Promise()
	l.RunUntilIdle()
	syExpect(t, &log, "enter 5", "leave 5", "enter 5", "next 10", "leave 5", "next 10")
	syWant(t, f1, "ok", "clone 1")
	syWant(t, f2, "ok", "clone 2")
	model.Release() // its steps hold arena memory
	syIdle(t, l)
}

// An uncontended Sync on a Mutex allocates nothing, nor does a wait once
// the queue has grown.
func TestMutexAllocs(t *testing.T) {
	l := vm.NewLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	ran, queued := 0, 0
	fn := func(vm.AsyncSteps, vm.Args) { ran++ }
	hold := func(as vm.AsyncSteps, _ vm.Args) {
		queued = max(queued, m.Stats().Queued)
		as.Add(fn)
	}
	root := l.NewSteps()
	uncontended := func() {
		root.Sync(m, fn)
		root.Execute()
		l.RunUntilIdle()
	}
	uncontended()
	if a := allocs.Count(1000, uncontended); a != 0 {
		t.Fatalf("uncontended Sync: %d allocations in 1000 runs, want 0", a)
	}
	a, b, c := l.NewSteps(), l.NewSteps(), l.NewSteps()
	contended := func() {
		a.Sync(m, hold)
		a.Execute()
		b.Sync(m, hold)
		b.Execute()
		c.Add(fn)
		c.Sync(m, fn)
		c.Execute()
		l.RunUntilIdle()
	}
	contended()
	if queued == 0 {
		t.Fatal("no flow waited")
	}
	if a := allocs.Count(1000, contended); a != 0 {
		t.Fatalf("contended Sync: %d allocations in 1000 runs, want 0", a)
	}
	// Count runs its function once more to warm up.
	if ran != 1002+4*1002 {
		t.Fatalf("%d steps ran", ran)
	}
}

func TestNewMutexPanics(t *testing.T) {
	for _, args := range [][2]int{{0, 0}, {-1, 0}, {1, -2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewMutex(%d, %d) did not panic", args[0], args[1])
				}
			}()
			vm.NewMutex(args[0], args[1])
		}()
	}
}

// A branch that holds the Mutex and fails hands its place to a sibling
// branch of the same flow, which the failure then cancels before it runs:
// the place comes back, and the flow, recovered by the parallel step's
// handler, enters again at once.
func TestMutexHolderBranchFailsWaitingSibling(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	root := l.NewSteps()
	p := root.Parallel(func(as vm.AsyncSteps, code string) {
		s := m.Stats()
		log.add("parallel handler %s: inside %d queued %d", code, s.Inside, s.Queued)
		as.Success()
	})
	p.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
		log.add("enter A")
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") })
	})
	p.Sync(m, syHold(&log, "B"))
	root.Sync(m, syHold(&log, "after"))
	f := root.Promise()
	l.RunUntilIdle()
	syExpect(t, &log, "enter A", "parallel handler Boom: inside 0 queued 0", "enter after", "leave after")
	syWant(t, f, "ok")
	if s := m.Stats(); s.Entered != 3 {
		t.Fatalf("%+v, want 3 entries (A, B admitted, after)", s)
	}
	syIdle(t, l)
}

// A cancel handler below the section, run after the section has handed
// its place to the first waiter, releases that waiter before it runs: the
// place goes on to the next one.
func TestMutexCancelHandlerReleasesAdmitted(t *testing.T) {
	l, _ := syLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log syLog
	var w1 vm.AsyncSteps
	a := l.NewSteps()
	a.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("enter A")
			as.WaitExternal()
		})
		as.SetCancel(func(vm.AsyncSteps) {
			s := m.Stats()
			log.add("A cancel: inside %d queued %d", s.Inside, s.Queued)
			w1.Release()
		})
	})
	fa := a.Promise()
	l.RunUntilIdle()
	w1 = l.NewSteps()
	w1.Sync(m, syHold(&log, "W1"))
	w1.Execute()
	w2 := l.NewSteps()
	w2.Sync(m, syHold(&log, "W2"))
	f2 := w2.Promise()
	l.RunUntilIdle()
	a.Cancel()
	l.RunUntilIdle()
	syExpect(t, &log, "enter A", "A cancel: inside 1 queued 1", "enter W2", "leave W2")
	syWant(t, fa, "canceled", "A")
	syWant(t, f2, "ok", "W2")
	syStats(t, "at the end", m.Stats(), 0, 0)
	a.Release()
	w2.Release()
	if s := l.Stats(); s.LiveRoots != 0 || s.Timers != 0 {
		t.Fatalf("%+v", s)
	}
	syIdle(t, l)
}
