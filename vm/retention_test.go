package vm_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/stepvm/stepvm/vm"
)

// Retention: the VM keeps the Go values of a flow (closures, Any values,
// State values, Stack memory with pointers, callbacks) in tables the
// collector sees, and must drop each as soon as it has no use for it, with
// the loop and the root still alive. Each test makes objects reachable
// only through the VM (built in functions that do not inline, so that no
// stack slot of the test keeps them) and checks, with weak pointers, which
// of them a collection finds.

// retObj is a tracked object, large enough not to be a tiny allocation.
type retObj struct {
	name string
	pad  [64]int64
}

// retProbe hands out tracked objects by name.
type retProbe struct {
	w map[string]weak.Pointer[retObj]
}

func newRetProbe() *retProbe { return &retProbe{w: map[string]weak.Pointer[retObj]{}} }

//go:noinline
func (p *retProbe) obj(name string) *retObj {
	o := &retObj{name: name}
	p.w[name] = weak.Make(o)
	return o
}

// collect runs collections, so that every object only weakly reachable is
// cleared.
func retCollect() {
	for range 3 {
		runtime.GC()
	}
}

// expect fails t unless the objects named in gone were collected and those
// named in live were not (which shows that the probe sees what the VM
// holds).
func (p *retProbe) expect(t *testing.T, what string, gone []string, live ...string) {
	t.Helper()
	retCollect()
	for _, n := range gone {
		w, ok := p.w[n]
		if !ok {
			t.Fatalf("%s: no object %q was made", what, n)
		}
		if w.Value() != nil {
			t.Errorf("%s: %s is still reachable: the VM retains it", what, n)
		}
	}
	for _, n := range live {
		if p.w[n].Value() == nil {
			t.Errorf("%s: %s was collected while the VM still needs it", what, n)
		}
	}
}

// use touches o, so that a closure keeps it.
//
//go:noinline
func use(o *retObj) { _ = o.name }

// retWait is a step that waits; its handle goes to *h.
func retWait(h *vm.AsyncSteps) vm.ExecFunc {
	return func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		*h = as
	}
}

// retDone reports whether f has completed.
func retDone(f *vm.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// Step closures, error handlers and cancel handlers go once their step has
// ended: while the flow waits in a later step, and after the run, the root
// kept but not released.
func TestRetainStepClosures(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	var h vm.AsyncSteps
	root := l.NewSteps()
	func() {
		a, aErr, b, bCancel, next := p.obj("a"), p.obj("aErr"), p.obj("b"), p.obj("bCancel"), p.obj("next")
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { use(a) }, func(vm.AsyncSteps, string) { use(aErr) })
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			use(b)
			as.SetCancel(func(vm.AsyncSteps) { use(bCancel) })
			as.Success()
		})
		root.Add(retWait(&h))
		root.Add(func(vm.AsyncSteps, vm.Args) { use(next) })
	}()
	root.Execute()
	l.RunUntilIdle()
	p.expect(t, "waiting", []string{"a", "aErr", "b", "bCancel"}, "next")
	h.Success()
	l.RunUntilIdle()
	p.expect(t, "after the run", []string{"next"})
	if s := l.Stats(); s.RunningRoots != 0 || s.ArenaInUse != 0 {
		t.Fatalf("stats after the run: %+v", s)
	}
	root.Release()
}

// The values a step succeeds with go once the step receiving them has run:
// one value (carried by the run queue's entry), two (a spill entry), passed
// in line or through the queue, by Success, SuccessStep, a Resumer and an
// error handler's Success.
func TestRetainPassedValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		queued bool // another flow keeps the run queue busy, so turns go through it
	}{{"inline", false}, {"queued", true}} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			p := newRetProbe()
			var h, h2 vm.AsyncSteps
			root := l.NewSteps()
			if c.queued {
				busy := l.NewSteps()
				busy.Loop(func(as vm.AsyncSteps) {
					if h.Valid() {
						as.Break()
					}
				})
				busy.Execute()
				defer busy.Release()
			}
			func() {
				one, two1, two2, ss, rv, eh := p.obj("one"), p.obj("two1"), p.obj("two2"), p.obj("ss"), p.obj("rv"), p.obj("eh")
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(one)) })
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(two1), vm.Any(two2)) })
				root.SuccessStep(vm.Any(ss), vm.Int(1))
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					res := as.Resumer()
					as.WaitExternal()
					go res.Success(vm.Any(rv), vm.Int(3), vm.Int(4))
				})
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, _ string) {
					as.Success(vm.Any(eh), vm.Int(2))
				})
				root.Add(func(as vm.AsyncSteps, args vm.Args) {
					if args.Len() != 2 {
						as.Error("bad")
					}
				})
				root.Add(retWait(&h))
				root.Add(retWait(&h2))
			}()
			f := root.Promise()
			for !h.Valid() && !retDone(f) {
				l.RunUntilIdle()
				runtime.Gosched()
			}
			p.expect(t, "waiting", []string{"one", "two1", "two2", "ss", "rv", "eh"})
			h.Success(vm.Any(p.obj("last")))
			l.RunUntilIdle()
			p.expect(t, "second wait", []string{"last"})
			h2.Success()
			l.RunUntilIdle()
			semOK(t, f)
		})
	}
}

// A Future's values are the program's: once it drops the Future, and the
// run has ended, nothing keeps them.
func TestRetainFutureValues(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	root := l.NewSteps()
	func() {
		v := p.obj("v")
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(v)) })
		root.Promise() // dropped at once
	}()
	l.RunUntilIdle()
	p.expect(t, "future dropped", []string{"v"})
	root.Release()
}

// Loop bodies, and the collections ForEach and ForEachMap range over, go
// once the loop ends, however it ends; so do the handlers of the steps the
// iterations add.
func TestRetainLoopBodies(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	var h vm.AsyncSteps
	root := l.NewSteps()
	func() {
		lb, rb, fb, mb := p.obj("loopBody"), p.obj("repeatBody"), p.obj("forEachBody"), p.obj("forEachMapBody")
		sub, subErr, subCancel := p.obj("sub"), p.obj("subErr"), p.obj("subCancel")
		s := []*retObj{p.obj("elem")}
		m := map[string]*retObj{"k": p.obj("mapVal")}
		root.Loop(func(as vm.AsyncSteps) {
			use(lb)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				use(sub)
				as.SetCancel(func(vm.AsyncSteps) { use(subCancel) })
				as.Break()
			}, func(vm.AsyncSteps, string) { use(subErr) })
		})
		root.Repeat(3, func(as vm.AsyncSteps, i int) { use(rb) })
		vm.ForEach(root, s, func(as vm.AsyncSteps, i int, v *retObj) { use(fb) })
		vm.ForEachMap(root, m, func(as vm.AsyncSteps, k string, v *retObj) {
			use(mb)
			as.Break()
		})
		eb := p.obj("errorBody")
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Loop(func(as vm.AsyncSteps) {
				use(eb)
				as.Error("Out")
			}, "L")
		}, func(as vm.AsyncSteps, _ string) { as.Success() })
	}()
	root.Add(retWait(&h))
	root.Execute()
	l.RunUntilIdle()
	if !h.Valid() {
		t.Fatal("the flow did not reach its last step")
	}
	p.expect(t, "after the loops", []string{"loopBody", "repeatBody", "forEachBody", "forEachMapBody",
		"sub", "subErr", "subCancel", "elem", "mapVal", "errorBody"})
	root.Release()
}

// Stack values with pointers go with their step.
func TestRetainStackValues(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	var h vm.AsyncSteps
	root := l.NewSteps()
	func() {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			*vm.Stack[*retObj](as) = p.obj("stack")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { *vm.Stack[*retObj](as) = p.obj("inner") })
		})
		root.Loop(func(as vm.AsyncSteps) {
			*vm.Stack[*retObj](as) = p.obj("iter")
			as.Break()
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			*vm.Stack[*retObj](as) = p.obj("errStack")
			as.Error("E")
		}, func(as vm.AsyncSteps, _ string) {
			*vm.Stack[*retObj](as) = p.obj("handlerStack")
			as.Success()
		})
	}()
	root.Add(retWait(&h))
	root.Execute()
	l.RunUntilIdle()
	if !h.Valid() {
		t.Fatal("the flow did not reach its last step")
	}
	p.expect(t, "after the steps", []string{"stack", "inner", "iter", "errStack", "handlerStack"})
	root.Release()
}

// State values go once unset, and with the run's state when the root is
// released into the pool; a pooled root reused keeps nothing of them. A
// panic value, LastException, goes with the next error and with Release.
func TestRetainStateValues(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	root := l.NewSteps()
	func() {
		root.State().Set("a", p.obj("unset"))
		root.State().Set("b", p.obj("released"))
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { panic(p.obj("panic")) })
	}()
	root.Execute()
	l.RunUntilIdle()
	root.State().Unset("a")
	p.expect(t, "unset", []string{"unset"}, "released", "panic")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Next") })
	root.Execute()
	l.RunUntilIdle()
	p.expect(t, "next error", []string{"unset", "panic"}, "released")
	func() {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { panic(p.obj("panic2")) })
	}()
	root.Execute()
	l.RunUntilIdle()
	root.Release()
	p.expect(t, "released", []string{"released", "panic2"})
	again := l.NewSteps() // the pooled root
	if _, ok := again.State().Get("b"); ok {
		t.Fatal("a pooled root kept a state variable of its previous use")
	}
	again.Release()
}

// Immediate, Deferred and Post callbacks go once run or canceled.
func TestRetainLoopCallbacks(t *testing.T) {
	l, clk := semLoop()
	p := newRetProbe()
	func() {
		im, imc, de, dec, po := p.obj("imm"), p.obj("immCanceled"), p.obj("def"), p.obj("defCanceled"), p.obj("post")
		l.Immediate(func() { use(im) })
		l.Cancel(l.Immediate(func() { use(imc) }))
		l.Deferred(time.Second, func() { use(de) })
		l.Cancel(l.Deferred(time.Second, func() { use(dec) }))
		l.Post(func() { use(po) })
	}()
	p.expect(t, "canceled", []string{"immCanceled", "defCanceled"}, "imm", "def", "post")
	l.RunUntilIdle()
	p.expect(t, "ran", []string{"imm", "post"}, "def")
	clk.Advance(time.Second)
	l.RunUntilIdle()
	p.expect(t, "fired", []string{"def"})
}

// An Await function and its result go once the step after it has run.
func TestRetainAwait(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	var h vm.AsyncSteps
	root := l.NewSteps()
	func() {
		fn, res := p.obj("fn"), p.obj("result")
		root.Await(func(context.Context) (vm.Value, error) {
			use(fn)
			return vm.Any(res), nil
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			if args.Any(0) == nil {
				as.Error("no result")
			}
		})
	}()
	root.Add(retWait(&h))
	f := root.Promise()
	for !h.Valid() && !retDone(f) {
		l.RunUntilIdle()
		runtime.Gosched()
	}
	p.expect(t, "await done", []string{"fn", "result"})
	h.Success()
	l.RunUntilIdle()
	semOK(t, f)
	root.Release()
}

// A flow canceled while it waits in a Mutex, Throttle or Limiter queue
// leaves nothing there: its values and its section's closures go.
func TestRetainSyncQueueEntries(t *testing.T) {
	l, clk := semLoop()
	prims := map[string]vm.ISync{
		"mutex":    vm.NewMutex(1, vm.Unbounded),
		"throttle": vm.NewThrottle(l, 1, time.Second, vm.Unbounded),
		"limiter":  vm.NewLimiter(l, vm.LimiterOptions{MaxQueue: vm.Unbounded}),
	}
	for name, s := range prims {
		t.Run(name, func(t *testing.T) {
			p := newRetProbe()
			var hold vm.AsyncSteps
			holder := l.NewSteps()
			holder.Sync(s, retWait(&hold))
			holder.Execute()
			l.RunUntilIdle()
			waiter := l.NewSteps()
			func() {
				v, sec, secErr := p.obj("value"), p.obj("section"), p.obj("sectionErr")
				waiter.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(v)) })
				waiter.Sync(s, func(vm.AsyncSteps, vm.Args) { use(sec) }, func(vm.AsyncSteps, string) { use(secErr) })
			}()
			waiter.Execute()
			l.RunUntilIdle()
			p.expect(t, "queued", nil, "value", "section", "sectionErr")
			waiter.Cancel()
			p.expect(t, "canceled", []string{"value", "section", "sectionErr"})
			waiter.Release()
			if hold.Valid() {
				hold.Success()
			}
			holder.Release()
			clk.Advance(2 * time.Second)
			l.RunUntilIdle()
		})
	}
}

// A root whose run took more slots than its first table holds, released
// into the pool, keeps none of that run's closures or values.
func TestRetainPooledRoot(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	root := l.NewSteps()
	func() {
		for _, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
			o := p.obj(name)
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(o)) })
		}
	}()
	root.Execute()
	l.RunUntilIdle()
	p.expect(t, "after the run", []string{"s1", "s2", "s3", "s4", "s5"})
	root.Release()
	p.expect(t, "pooled", []string{"s1", "s2", "s3", "s4", "s5"})
	if s := l.Stats(); s.PooledRoots != 1 || s.ArenaInUse != 0 {
		t.Fatalf("stats: %+v", s)
	}
	again := l.NewSteps() // the pooled root, whose table has moved
	func() {
		a, b := p.obj("again1"), p.obj("again2")
		again.Add(func(as vm.AsyncSteps, _ vm.Args) { use(a) })
		again.Add(func(as vm.AsyncSteps, _ vm.Args) { use(b) })
	}()
	p.expect(t, "queued on the pooled root", nil, "again1", "again2")
	again.Execute()
	l.RunUntilIdle()
	p.expect(t, "second run", []string{"again1", "again2"})
	again.Release()
}

// Branch closures, their handlers and the parallel step's handler go once
// the parallel step has ended, by success or by an error that cancels the
// other branches.
func TestRetainParallel(t *testing.T) {
	l, _ := semLoop()
	p := newRetProbe()
	var h vm.AsyncSteps
	root := l.NewSteps()
	func() {
		b1, b1Err, b2, b2Cancel, pErr := p.obj("b1"), p.obj("b1Err"), p.obj("b2"), p.obj("b2Cancel"), p.obj("pErr")
		par := root.Parallel(func(as vm.AsyncSteps, _ string) {
			use(pErr)
			as.Success()
		})
		par.Add(func(as vm.AsyncSteps, _ vm.Args) {
			use(b1)
			as.Error("E")
		}, func(vm.AsyncSteps, string) { use(b1Err) })
		par.Add(func(as vm.AsyncSteps, _ vm.Args) {
			use(b2)
			as.SetCancel(func(vm.AsyncSteps) { use(b2Cancel) })
		})
		ok1, ok2 := p.obj("ok1"), p.obj("ok2")
		par2 := root.Parallel()
		par2.Add(func(as vm.AsyncSteps, _ vm.Args) { use(ok1) })
		par2.Repeat(2, func(as vm.AsyncSteps, i int) { use(ok2) })
	}()
	root.Add(retWait(&h))
	root.Execute()
	l.RunUntilIdle()
	if !h.Valid() {
		t.Fatal("the flow did not reach its last step")
	}
	p.expect(t, "after the parallel steps", []string{"b1", "b1Err", "b2", "b2Cancel", "pErr", "ok1", "ok2"})
	root.Release()
}

// Values on their way to a flow that is canceled or released before its
// next turn go when the run queue drops the turn: one value in the queue's
// entry, more in a spill entry.
func TestRetainDroppedTurns(t *testing.T) {
	for _, end := range []string{"cancel", "release"} {
		for _, n := range []int{1, 2} {
			l, _ := semLoop()
			p := newRetProbe()
			a := l.NewSteps()
			var names []string
			func() {
				var vals []vm.Value
				for i := range n {
					name := end + string(rune('A'+i))
					names = append(names, name)
					vals = append(vals, vm.Any(p.obj(name)))
				}
				// The step after a's first waits for its turn behind b's:
				// the values go to the run queue.
				a.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vals...) })
				a.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("ran") })
			}()
			b := l.NewSteps()
			b.Add(func(vm.AsyncSteps, vm.Args) {
				if end == "cancel" {
					a.Cancel()
				} else {
					a.Release()
				}
			})
			a.Execute()
			f := b.Promise()
			p.expect(t, end+" queued", nil, names...)
			l.RunUntilIdle()
			semOK(t, f)
			p.expect(t, end, names)
			if s := l.Stats(); s.RunningRoots != 0 || s.Queued != 0 || s.ArenaInUse != 0 {
				t.Fatalf("%s: stats %+v", end, s)
			}
		}
	}
}

// A Deferred whose clock reading panics schedules nothing: the panic
// reaches its caller, and the callback goes with it. It used to stay in
// the loop's table, never to run or be freed.
func TestRetainDeferredWhoseClockPanics(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	faulty := &panicClock{ManualClock: clk}
	l := vm.NewLoop(vm.WithClock(faulty))
	p := newRetProbe()
	faulty.failIn(t, func() {
		o := p.obj("deferred")
		l.Deferred(time.Millisecond, func() { use(o) })
	})
	p.expect(t, "after the panic", []string{"deferred"})
	semClean(t, l)
}
