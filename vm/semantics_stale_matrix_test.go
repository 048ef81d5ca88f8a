package vm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The stale-handle matrix: every call that takes an AsyncSteps, through
// every kind of handle that has outlived what it named, from every place a
// call can come from. The memory the handle names serves a victim flow by
// then (its own later steps, its next run, or a flow on the reused root),
// which waits in a step that the victim added last, and so most likely in
// the stale step's node. Nothing the stale call does may reach the victim.

// staleEnv is what one cell of the matrix calls with.
type staleEnv struct {
	l   *vm.Loop
	m   *vm.Mutex
	th  *vm.Throttle
	lm  *vm.Limiter
	log *semLog // the victim's
}

// staleOp is one call through h. report tells whether it is misuse (an
// InternalError of a flow it is called from) or a query, which reports
// nothing and returns its answer, phrased so that "false" is the right
// one for an invalid handle.
type staleOp struct {
	name   string
	report bool
	call   func(e *staleEnv, h vm.AsyncSteps) string // what it returned, for a query
}

// staleRan logs, in the victim's trace, that something added through a
// stale handle ran.
func staleRan(e *staleEnv, what string) { e.log.add("stale %s ran", what) }

var staleOps = func() []staleOp {
	exec := func(e *staleEnv) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) { staleRan(e, "step") }
	}
	body := func(e *staleEnv) func(vm.AsyncSteps) {
		return func(as vm.AsyncSteps) { staleRan(e, "loop"); as.Break() }
	}
	rep := func(e *staleEnv) func(vm.AsyncSteps, int) {
		return func(vm.AsyncSteps, int) { staleRan(e, "repeat") }
	}
	misuse := func(name string, f func(e *staleEnv, h vm.AsyncSteps)) staleOp {
		return staleOp{name, true, func(e *staleEnv, h vm.AsyncSteps) string { f(e, h); return "" }}
	}
	query := func(name string, f func(e *staleEnv, h vm.AsyncSteps) string) staleOp {
		return staleOp{name, false, f}
	}
	return []staleOp{
		misuse("Add", func(e *staleEnv, h vm.AsyncSteps) { h.Add(exec(e)) }),
		misuse("AddNative", func(e *staleEnv, h vm.AsyncSteps) { vm.AddNative(h, exec(e), nil, vm.NativeWords{A: 1, B: 2}) }),
		misuse("Await", func(e *staleEnv, h vm.AsyncSteps) {
			h.Await(func(context.Context) (vm.Value, error) { return vm.Int(1), nil })
		}),
		misuse("Parallel", func(e *staleEnv, h vm.AsyncSteps) {
			if p := h.Parallel(); p.Valid() {
				e.log.add("stale Parallel returned a valid accessor")
			}
		}),
		misuse("Loop", func(e *staleEnv, h vm.AsyncSteps) { h.Loop(body(e)) }),
		misuse("MakeLoop", func(e *staleEnv, h vm.AsyncSteps) { h.MakeLoop(body(e), "L") }),
		misuse("Repeat", func(e *staleEnv, h vm.AsyncSteps) { h.Repeat(2, rep(e)) }),
		misuse("ForEach", func(e *staleEnv, h vm.AsyncSteps) {
			vm.ForEach(h, []int{1}, func(vm.AsyncSteps, int, int) { staleRan(e, "ForEach") })
		}),
		misuse("ForEachMap", func(e *staleEnv, h vm.AsyncSteps) {
			vm.ForEachMap(h, map[string]int{"k": 1}, func(vm.AsyncSteps, string, int) { staleRan(e, "ForEachMap") })
		}),
		misuse("SuccessStep", func(e *staleEnv, h vm.AsyncSteps) { h.SuccessStep(vm.Str("stale")) }),
		misuse("Sync Mutex", func(e *staleEnv, h vm.AsyncSteps) { h.Sync(e.m, exec(e)) }),
		misuse("Mutex.Sync", func(e *staleEnv, h vm.AsyncSteps) { e.m.Sync(h, exec(e), nil) }),
		misuse("Sync Throttle", func(e *staleEnv, h vm.AsyncSteps) { h.Sync(e.th, exec(e)) }),
		misuse("Sync Limiter", func(e *staleEnv, h vm.AsyncSteps) { h.Sync(e.lm, exec(e)) }),
		misuse("Success", func(e *staleEnv, h vm.AsyncSteps) { h.Success(vm.Str("stale")) }),
		misuse("Error", func(e *staleEnv, h vm.AsyncSteps) { h.Error("Stale", "stale") }),
		misuse("Break", func(e *staleEnv, h vm.AsyncSteps) { h.Break() }),
		misuse("Continue", func(e *staleEnv, h vm.AsyncSteps) { h.Continue("L") }),
		misuse("SetTimeout", func(e *staleEnv, h vm.AsyncSteps) { h.SetTimeout(time.Millisecond) }),
		misuse("SetCancel", func(e *staleEnv, h vm.AsyncSteps) { h.SetCancel(func(vm.AsyncSteps) { staleRan(e, "cancel") }) }),
		misuse("WaitExternal", func(e *staleEnv, h vm.AsyncSteps) { h.WaitExternal() }),
		misuse("Resumer", func(e *staleEnv, h vm.AsyncSteps) {
			if h.Resumer().Success(vm.Str("stale")) {
				e.log.add("stale Resumer accepted")
			}
		}),
		misuse("Stack", func(e *staleEnv, h vm.AsyncSteps) {
			if vm.Stack[int64](h) != nil || vm.Stack[string](h) != nil {
				e.log.add("stale Stack returned memory")
			}
		}),
		misuse("StackRaw", func(e *staleEnv, h vm.AsyncSteps) {
			if h.StackRaw(8, func(unsafe.Pointer) { staleRan(e, "destroy") }) != nil {
				e.log.add("stale StackRaw returned memory")
			}
		}),
		misuse("NewInstance", func(e *staleEnv, h vm.AsyncSteps) {
			if h.NewInstance().Valid() {
				e.log.add("stale NewInstance returned a root")
			}
		}),
		misuse("Execute", func(e *staleEnv, h vm.AsyncSteps) { h.Execute() }),
		misuse("Promise", func(e *staleEnv, h vm.AsyncSteps) {
			select {
			case <-h.Promise().Done():
			default:
				e.log.add("stale Promise pending")
			}
		}),
		misuse("Cancel", func(e *staleEnv, h vm.AsyncSteps) { h.Cancel() }),
		misuse("Release", func(e *staleEnv, h vm.AsyncSteps) { h.Release() }),
		misuse("Clone", func(e *staleEnv, h vm.AsyncSteps) {
			if h.Clone().Valid() {
				e.log.add("stale Clone returned a root")
			}
		}),
		misuse("CopyFrom target", func(e *staleEnv, h vm.AsyncSteps) {
			m := e.l.NewSteps()
			defer m.Release()
			m.Add(exec(e))
			h.CopyFrom(m)
		}),
		// The model is a stale handle: the target, a new root, is idle
		// (from outside that is ignored) or the calling step.
		misuse("CopyFrom model", func(e *staleEnv, h vm.AsyncSteps) {
			c := e.l.NewSteps()
			defer c.Release()
			c.CopyFrom(h)
			if c.State().Exists("victim") {
				e.log.add("stale CopyFrom copied the victim's state")
			}
		}),
		query("Valid", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(h.Valid()) }),
		query("State", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(h.State() != nil) }),
		query("Tool", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(h.Tool() != e.l) }),
		query("RootOf", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(vm.RootOf(h).Valid()) }),
		query("RootID", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(vm.RootID(h) != 0) }),
		query("IsRoot", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(vm.IsRoot(h)) }),
		query("IsFrame", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(vm.IsFrame(h)) }),
		query("FrameAlloc", func(e *staleEnv, h vm.AsyncSteps) string {
			return fmt.Sprint(vm.FrameAlloc(h, 8, func(unsafe.Pointer) { staleRan(e, "FrameAlloc destroy") }) != nil)
		}),
		query("NativeRootValue", func(e *staleEnv, h vm.AsyncSteps) string {
			vm.SetNativeRootValue(h, "stale")
			return fmt.Sprint(vm.NativeRootValue(h) != nil)
		}),
		query("TakeNativeWords", func(e *staleEnv, h vm.AsyncSteps) string {
			return fmt.Sprint(vm.TakeNativeWords(h) != vm.NativeWords{})
		}),
		query("ForeignOf", func(e *staleEnv, h vm.AsyncSteps) string { return fmt.Sprint(vm.ForeignOf(h) != nil) }),
	}
}()

// staleKind makes a stale handle. build returns the victim's root, to
// which the victim's steps are added next (after any the kind added, which
// run first and leave *h stale), and h. hook is the victim's own call
// site, which a kind whose memory is reused by the next iteration of a
// loop calls there too.
type staleKind struct {
	name string
	// The victim runs in h's node (the victim's step, or the sub-step it
	// waits in, which is wide, an AddNative's, when wide is set), as the
	// test checks: a stale handle whose memory holds the running step.
	reuses, wide bool
	build        func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, hook func(as vm.AsyncSteps)) (victim vm.AsyncSteps, h *vm.AsyncSteps)
}

// staleRerun runs a root whose one step keeps its handle and ends as end
// says, and returns the root, idle again, for the victim's run.
func staleRerun(l *vm.Loop, clk *vm.ManualClock, step vm.ExecFunc, onError vm.ErrorFunc, after func(r vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
	r := l.NewSteps()
	h := new(vm.AsyncSteps)
	r.Add(func(as vm.AsyncSteps, a vm.Args) { *h = as; step(as, a) }, onError)
	r.Execute()
	l.RunUntilIdle()
	after(r)
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	return r, h
}

// staleReused releases root r, whose handle h is kept, and returns the
// root the pool hands out next: r's memory.
func staleReused(t *testing.T, l *vm.Loop, r vm.AsyncSteps) vm.AsyncSteps {
	pooled := l.Stats().PooledRoots
	r.Release()
	v := l.NewSteps()
	if l.Stats().PooledRoots != pooled {
		t.Fatal("the victim's root is not the released one")
	}
	return v
}

var staleKinds = []staleKind{
	{"ended by success", true, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) { *h = as; as.Success() })
		return v, h
	}},
	{"ended by error", true, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) { *h = as; as.Error("Gone") },
			func(as vm.AsyncSteps, _ string) { as.Success() })
		return v, h
	}},
	{"ended by timeout", true, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) { *h = as; as.SetTimeout(0) },
			func(as vm.AsyncSteps, _ string) { as.Success() })
		return v, h
	}},
	{"ended by a sibling's abort", true, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		p := v.Parallel(func(as vm.AsyncSteps, _ string) { as.Success() })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { *h = as; as.SetCancel(func(vm.AsyncSteps) {}) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
		return v, h
	}},
	{"previous run, canceled", true, false, func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		return staleRerun(l, clk, func(as vm.AsyncSteps, _ vm.Args) { as.SetCancel(func(vm.AsyncSteps) {}) }, nil,
			func(r vm.AsyncSteps) { r.Cancel() })
	}},
	{"previous run, succeeded", true, false, func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		return staleRerun(l, clk, func(vm.AsyncSteps, vm.Args) {}, nil, func(vm.AsyncSteps) {})
	}},
	{"previous run, timed out", true, false, func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		return staleRerun(l, clk, func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) }, nil, func(vm.AsyncSteps) {})
	}},
	{"released step, root reused", true, false, func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		r, h := staleRerun(l, clk, func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() }, nil, func(vm.AsyncSteps) {})
		return staleReused(t, l, r), h
	}},
	{"released root, reused", false, false, func(t *testing.T, l *vm.Loop, clk *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		r, _ := staleRerun(l, clk, func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() }, nil, func(vm.AsyncSteps) {})
		h := r
		return staleReused(t, l, r), &h
	}},
	{"released idle root, reused", false, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		r := l.NewSteps()
		r.Add(func(vm.AsyncSteps, vm.Args) {})
		h := r
		return staleReused(t, l, r), &h
	}},
	{"parallel accessor, ended", true, true, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) {
			*h = as.Parallel()
			h.Add(func(vm.AsyncSteps, vm.Args) {})
		})
		return v, h
	}},
	{"parallel accessor, never run", true, true, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Skip") })
			*h = as.Parallel()
			h.Add(func(vm.AsyncSteps, vm.Args) {})
		}, func(as vm.AsyncSteps, _ string) { as.Success() })
		return v, h
	}},
	{"parallel accessor of a released root", true, true, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		r := l.NewSteps()
		h := r.Parallel()
		h.Add(func(vm.AsyncSteps, vm.Args) {})
		r.Execute()
		l.RunUntilIdle()
		return staleReused(t, l, r), &h
	}},
	{"iteration, in the next one", false, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, hook func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(2, func(as vm.AsyncSteps, i int) {
				if i == 0 {
					*h = as
					return
				}
				if vm.HandleNode(as) != vm.HandleNode(*h) {
					t.Error("the next iteration has a frame of its own")
				}
				hook(as)
			})
		})
		return v, h
	}},
	{"iteration of an ended loop", false, false, func(t *testing.T, l *vm.Loop, _ *vm.ManualClock, _ func(vm.AsyncSteps)) (vm.AsyncSteps, *vm.AsyncSteps) {
		v, h := l.NewSteps(), new(vm.AsyncSteps)
		v.Loop(func(as vm.AsyncSteps) {
			*h = as
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Break() })
		})
		return v, h
	}},
}

// staleCallers are the places a stale call comes from: the driving
// goroutine, a loop callback, the steps and handlers of another flow, and
// the victim's own step (inside), which then fails instead.
var staleCallers = []string{"outside", "Immediate", "another flow's step", "another flow's error handler",
	"another flow's cancel handler", "another flow's destroy callback", "inside"}

func TestSemStaleMatrix(t *testing.T) {
	for _, k := range staleKinds {
		for _, c := range staleCallers {
			for _, op := range staleOps {
				t.Run(k.name+"/"+c+"/"+op.name, func(t *testing.T) { staleCell(t, k, c, op) })
			}
		}
	}
}

func staleCell(t *testing.T, k staleKind, caller string, op staleOp) {
	l, clk := semLoop()
	defer l.Close()
	var log semLog
	e := &staleEnv{l: l, m: vm.NewMutex(1, vm.Unbounded), th: vm.NewThrottle(l, 1, time.Second, vm.Unbounded),
		lm: vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: vm.Unbounded, Rate: 1, Period: time.Second, Burst: vm.Unbounded}), log: &log}
	var h *vm.AsyncSteps
	var answer string
	called, sameNode := false, false
	hook := func(as vm.AsyncSteps) {
		if caller != "inside" || called {
			return
		}
		called = true
		if h.Valid() {
			t.Error("the handle is valid where the victim calls it")
		}
		answer = op.call(e, *h)
		log.add("inside returned")
	}
	v, hp := k.build(t, l, clk, hook)
	h = hp
	v.State().Set("victim", true)
	var res vm.Resumer
	v.Add(func(as vm.AsyncSteps, _ vm.Args) {
		sameNode = sameNode || vm.HandleNode(as) == vm.HandleNode(*h)
		hook(as)
		var words vm.NativeWords
		if k.wide {
			words.A = 1
		}
		vm.AddNative(as, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("victim waits")
			hook(as)
			sameNode = sameNode || vm.HandleNode(as) == vm.HandleNode(*h)
			res = as.Resumer()
			as.WaitExternal()
		}, nil, words)
	}, func(as vm.AsyncSteps, code string) { log.add("victim handler %s", code) })
	v.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("victim next got %s", a.String(0)) })
	f := v.Promise()
	l.RunUntilIdle()
	if h.Valid() || h.State() != nil {
		t.Fatal("the stale handle is valid")
	}

	if caller == "inside" {
		if staleInside(t, l, clk, e, op, f, answer) {
			if !res.Success(vm.Str("fresh")) {
				t.Fatal("the victim's Resumer refused")
			}
			l.RunUntilIdle()
			semOK(t, f)
		}
		staleEnd(t, l, e, v)
		return
	}
	semExpect(t, &log, "victim waits")
	if k.reuses && !sameNode {
		t.Fatal("the victim does not run in the stale handle's node")
	}
	before, cbs := l.Stats(), vm.CallbacksInUse(l)
	staleFromCaller(t, l, e, caller, op, *h)
	if st := l.Stats(); st.Timers != before.Timers || st.RunningRoots != before.RunningRoots ||
		st.ArenaInUse != before.ArenaInUse || st.LiveRoots != before.LiveRoots || st.Panics != 0 || vm.CallbacksInUse(l) != cbs {
		t.Fatalf("the stale call changed the loop: before %+v (%d callbacks), after %+v (%d)", before, cbs, st, vm.CallbacksInUse(l))
	}
	clk.Advance(time.Hour) // a timeout set through h must not fire
	l.RunUntilIdle()
	semExpect(t, &log, "victim waits")
	semPending(t, f)
	if vm.NativeRootValue(v) != nil {
		t.Fatal("the victim's native value was set through the stale handle")
	}
	if !res.Success(vm.Str("fresh")) {
		t.Fatal("the victim's Resumer refused")
	}
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "victim waits", "victim next got fresh")
	staleEnd(t, l, e, v)
}

// staleInside checks the victim after its own step called op: a misuse
// fails it, a query answers and lets it go on (it reports true: the
// victim waits).
func staleInside(t *testing.T, l *vm.Loop, clk *vm.ManualClock, e *staleEnv, op staleOp, f *vm.Future, answer string) bool {
	t.Helper()
	if !op.report {
		staleAnswer(t, op, answer)
		if !slices.Contains(e.log.lines, "inside returned") {
			t.Fatalf("victim trace %q", e.log.lines)
		}
		return true
	}
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	err := semFail(t, f, vm.InternalError)
	semInfoMentions(t, err.Info)
	for _, line := range e.log.lines {
		if line == "inside returned" || strings.HasPrefix(line, "stale") {
			t.Fatalf("victim trace %q", e.log.lines)
		}
	}
	return false
}

func staleAnswer(t *testing.T, op staleOp, got string) {
	t.Helper()
	if got != "false" {
		t.Fatalf("%s through a stale handle answered %s", op.name, got)
	}
}

// staleFromCaller makes the stale call from caller and checks what the
// calling flow, if any, saw.
func staleFromCaller(t *testing.T, l *vm.Loop, e *staleEnv, caller string, op staleOp, h vm.AsyncSteps) {
	t.Helper()
	var clog semLog
	call := func() {
		a := op.call(e, h)
		clog.add("returned")
		if !op.report {
			staleAnswer(t, op, a)
		}
	}
	err := semCallFrom(t, l, caller, call, func(as vm.AsyncSteps, code string) {
		clog.add("caller handler %s", code)
		if as.State().ErrorInfo() == "" {
			clog.add("empty ErrorInfo")
		}
	})
	if caller == "outside" || caller == "Immediate" {
		return
	}
	var ve *vm.Error
	errors.As(err, &ve)
	switch {
	case caller == "another flow's cancel handler":
		// A cancel handler's misuse is only recorded, and a stale handle
		// names no flow to record it in.
		if !errors.Is(err, vm.ErrCanceled) {
			t.Fatalf("caller ended with %v", err)
		}
		semExpect(t, &clog, "returned")
	case caller == "another flow's destroy callback":
		if err != nil {
			t.Fatalf("caller ended with %v", err)
		}
		semExpect(t, &clog, "returned")
	case !op.report && caller == "another flow's error handler":
		if ve == nil || ve.Code != "First" {
			t.Fatalf("caller ended with %v", err)
		}
		semExpect(t, &clog, "returned")
	case !op.report:
		if err != nil {
			t.Fatalf("caller ended with %v", err)
		}
		semExpect(t, &clog, "returned")
	case caller == "another flow's error handler":
		if ve == nil || ve.Code != vm.InternalError {
			t.Fatalf("caller ended with %v", err)
		}
		semInfoMentions(t, ve.Info)
		semExpect(t, &clog)
	default:
		if ve == nil || ve.Code != vm.InternalError {
			t.Fatalf("caller ended with %v", err)
		}
		semExpect(t, &clog, "caller handler InternalError")
	}
}

// staleEnd releases the victim and checks that the loop holds nothing and
// the primitives were never entered.
func staleEnd(t *testing.T, l *vm.Loop, e *staleEnv, v vm.AsyncSteps) {
	t.Helper()
	v.Release()
	l.RunUntilIdle()
	semClean(t, l)
	if vm.ResumersInUse(l) != 0 {
		t.Fatalf("%d Resumers in use", vm.ResumersInUse(l))
	}
	c, r := e.lm.Stats()
	for _, s := range []vm.SyncStats{e.m.Stats(), e.th.Stats(), c, r} {
		if s != (vm.SyncStats{}) {
			t.Fatalf("a primitive was entered: %+v", s)
		}
	}
}

// staleForeign is a foreign flow that reports itself valid and serves no
// call: the VM must forward to it or refuse, never take it for its own.
type staleForeign struct{ vm.Foreign }

func (staleForeign) Valid() bool { return true }

// A valid foreign handle names no root of the VM: RootOf gives the zero
// handle (whose calls panic with an *Error, as documented) and RootID 0,
// where a stand-in root with matching epochs once passed for a live VM
// root, every foreign flow had one RootID, and Add, Execute or Release
// through that root dereferenced the arena it does not have.
func TestSemForeignHandleNamesNoRoot(t *testing.T) {
	h := vm.WrapForeign(staleForeign{})
	r := vm.RootOf(h)
	if r != (vm.AsyncSteps{}) || vm.IsRoot(r) || vm.RootID(h) != 0 {
		t.Fatalf("RootOf of a foreign handle: IsRoot %v, valid %v; RootID %x", vm.IsRoot(r), r.Valid(), vm.RootID(h))
	}
	for name, call := range map[string]func(){
		"Add":     func() { r.Add(func(vm.AsyncSteps, vm.Args) {}) },
		"Execute": r.Execute,
		"Release": r.Release,
	} {
		func() {
			defer func() {
				if _, ok := recover().(*vm.Error); !ok {
					t.Errorf("%s through RootOf of a foreign handle did not panic with an *Error", name)
				}
			}()
			call()
		}()
	}
}

// mallocForeign is a foreign flow whose Stack serves nothing for 0 bytes,
// as an engine built on C's malloc may: NULL.
type mallocForeign struct {
	vm.Foreign
	blocks   [][]byte
	destroys []func(unsafe.Pointer)
}

func (*mallocForeign) Valid() bool { return true }

func (f *mallocForeign) Stack(size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	if size <= 0 {
		return nil
	}
	b := make([]byte, size+8)
	f.blocks = append(f.blocks, b)
	if destroy != nil {
		f.destroys = append(f.destroys, destroy)
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// Stack through a foreign handle serves every T, whatever the engine does
// with an allocation of 0 bytes: a T with Go pointers (on the Go heap,
// kept by a destroy callback the engine holds) and a T of no size. Both
// used to be nil when the engine's Stack(0) was.
func TestSemForeignStackOfZeroBytes(t *testing.T) {
	f := &mallocForeign{}
	h := vm.WrapForeign(f)
	p := vm.Stack[struct{ s string }](h)
	z := vm.Stack[struct{}](h)
	n := vm.Stack[int64](h)
	if p == nil || z == nil || n == nil {
		t.Fatalf("Stack through a foreign handle: %p %p %p", p, z, n)
	}
	if len(f.destroys) != 1 {
		t.Fatalf("%d destroy callbacks registered, want 1 (the T with pointers)", len(f.destroys))
	}
}

// endedForeign is a foreign step that has ended: its Stack, as every
// call, reports misuse to the engine and serves nothing.
type endedForeign struct {
	vm.Foreign
	misuses int
}

func (*endedForeign) Valid() bool { return false }

func (f *endedForeign) Stack(int, func(unsafe.Pointer)) unsafe.Pointer {
	f.misuses++
	return nil
}

// Stack through the foreign handle of a step that has ended is nil for a
// T of no size too, and the engine hears of the call, as it does for any
// T: it judges the handle. A T of no size used to be served without asking
// the engine, memory for a step that no longer exists and no misuse.
func TestSemForeignStackOfNoSizeOnEndedStep(t *testing.T) {
	f := &endedForeign{}
	h := vm.WrapForeign(f)
	if z := vm.Stack[struct{}](h); z != nil {
		t.Fatalf("Stack[struct{}] through an ended foreign step: %p, want nil", z)
	}
	if p := vm.Stack[int64](h); p != nil {
		t.Fatalf("Stack[int64] through an ended foreign step: %p, want nil", p)
	}
	if f.misuses != 2 {
		t.Fatalf("the engine heard of %d calls, want 2", f.misuses)
	}
}
