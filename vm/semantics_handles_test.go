package vm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Valid: a root until Release, a step handle until its step ends, never the
// zero value.
func TestSemValid(t *testing.T) {
	if (vm.AsyncSteps{}).Valid() {
		t.Fatal("the zero AsyncSteps is valid")
	}
	l, _ := semLoop()
	root := l.NewSteps()
	if !root.Valid() {
		t.Fatal("a new root is invalid")
	}
	var log semLog
	var first, sub vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		first = as
		log.add("inside: %v", as.Valid())
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			sub = as
			log.add("parent while its sub-step runs: %v", first.Valid())
		})
	})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("ended step: %v, ended sub-step: %v", first.Valid(), sub.Valid())
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "inside: true", "parent while its sub-step runs: true", "ended step: false, ended sub-step: false")
	if !root.Valid() {
		t.Fatal("a completed root is invalid")
	}
	if first.Valid() {
		t.Fatal("a step handle is valid after its flow completed")
	}
	if root.Tool() != l {
		t.Fatal("Tool() is not the loop")
	}
	root.Release()
	if root.Valid() {
		t.Fatal("a released root is valid")
	}
	copyOfRoot := root
	if copyOfRoot.Valid() {
		t.Fatal("a copy of a released root handle is valid")
	}
}

// A completed root stays readable, accepts new steps and runs again; only
// the new steps run.
func TestSemRootReuseAfterCompletion(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("run 1")
		as.State().Set("run", 1)
		as.Error("First", "first run failed")
	})
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, f, "First")
	if v, _ := root.State().Get("run"); v != 1 || root.State().ErrorInfo() != "first run failed" {
		t.Fatalf("state after completion: run=%v info=%q", v, root.State().ErrorInfo())
	}
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		v, _ := as.State().Get("run")
		log.add("run 2 sees run=%v", v)
		as.Success(vm.Int(2))
	})
	f = root.Promise()
	l.RunUntilIdle()
	if a := semOK(t, f); a.Int(0) != 2 {
		t.Fatalf("second run result %v", a.Values())
	}
	root.Add(log.step("run 3"))
	root.Execute()
	l.RunUntilIdle()
	semExpect(t, &log, "run 1", "run 2 sees run=1", "run 3")
}

// semOp is one call through a handle whose step (or root) has ended.
type semOp struct {
	name string
	call func(h vm.AsyncSteps)
}

var semStaleStepOps = []semOp{
	{"Success", func(h vm.AsyncSteps) { h.Success(vm.Str("stale")) }},
	{"Error", func(h vm.AsyncSteps) { h.Error("Stale", "stale") }},
	{"Add", func(h vm.AsyncSteps) { h.Add(func(as vm.AsyncSteps, _ vm.Args) { as.State().Set("stale ran", true) }) }},
	{"Parallel", func(h vm.AsyncSteps) { h.Parallel() }},
	{"SuccessStep", func(h vm.AsyncSteps) { h.SuccessStep(vm.Int(1)) }},
	{"SetTimeout", func(h vm.AsyncSteps) { h.SetTimeout(time.Millisecond) }},
	{"SetCancel", func(h vm.AsyncSteps) { h.SetCancel(func(vm.AsyncSteps) {}) }},
	{"WaitExternal", func(h vm.AsyncSteps) { h.WaitExternal() }},
	{"Loop", func(h vm.AsyncSteps) { h.Loop(func(as vm.AsyncSteps) { as.Break() }) }},
	{"Break", func(h vm.AsyncSteps) { h.Break() }},
	{"NewInstance", func(h vm.AsyncSteps) { h.NewInstance() }},
	{"Stack", func(h vm.AsyncSteps) { vm.Stack[int64](h) }},
	{"StackRaw", func(h vm.AsyncSteps) { h.StackRaw(8, nil) }},
}

var semStaleRootOps = []semOp{
	{"root Add", func(h vm.AsyncSteps) { h.Add(func(as vm.AsyncSteps, _ vm.Args) { as.State().Set("stale ran", true) }) }},
	{"root Execute", func(h vm.AsyncSteps) { h.Execute() }},
	{"root CopyFrom", func(h vm.AsyncSteps) { h.CopyFrom(h.Tool().NewSteps()) }},
	{"root NewInstance", func(h vm.AsyncSteps) { h.NewInstance() }},
}

// semStaleSetup runs a flow whose first step keeps its handle, releases
// its root, and starts a new flow on the root the pool hands out next (the
// same memory): its first step waits, then a second step records what it
// got. It returns the stale step and root handles and the new flow.
func semStaleSetup(t *testing.T, l *vm.Loop, log *semLog) (staleStep, staleRoot, fresh vm.AsyncSteps, res *vm.Resumer, f *vm.Future) {
	t.Helper()
	old := l.NewSteps()
	old.Add(func(as vm.AsyncSteps, _ vm.Args) {
		staleStep = as
		as.WaitExternal()
	})
	old.Execute()
	l.RunUntilIdle()
	pooled := l.Stats().PooledRoots
	old.Release()
	staleRoot = old
	if l.Stats().PooledRoots != pooled+1 {
		t.Fatal("Release did not pool the root")
	}

	fresh = l.NewSteps() // the root just pooled
	if l.Stats().PooledRoots != pooled {
		t.Fatal("NewSteps did not take the pooled root")
	}
	res = new(vm.Resumer)
	fresh.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("fresh step 1")
		*res = as.Resumer()
		as.WaitExternal()
	}, func(as vm.AsyncSteps, code string) { log.add("fresh handler %s", code) })
	fresh.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("fresh step 2 got %s", a.String(0)) })
	f = fresh.Promise()
	l.RunUntilIdle()
	semExpect(t, log, "fresh step 1")
	return staleStep, staleRoot, fresh, res, f
}

// semStaleCheckUntouched completes the fresh flow normally and checks that
// nothing stale reached it.
func semStaleCheckUntouched(t *testing.T, l *vm.Loop, clk *vm.ManualClock, log *semLog, fresh vm.AsyncSteps, res *vm.Resumer, f *vm.Future) {
	t.Helper()
	clk.Advance(time.Second) // a stale SetTimeout must not fire
	l.RunUntilIdle()
	semExpect(t, log, "fresh step 1")
	semPending(t, f)
	if !res.Success(vm.Str("fresh")) {
		t.Fatal("the fresh flow's Resumer returned false")
	}
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, log, "fresh step 1", "fresh step 2 got fresh")
	if fresh.State().Exists("stale ran") {
		t.Fatal("a step added through a stale handle ran in the fresh flow")
	}
}

// Calls through a stale handle made from outside the loop's callbacks do
// not touch the flow that now uses the memory.
func TestSemStaleHandleFromOutside(t *testing.T) {
	for _, op := range append(append([]semOp{}, semStaleStepOps...), semStaleRootOps...) {
		t.Run(op.name, func(t *testing.T) {
			l, clk := semLoop()
			var log semLog
			staleStep, staleRoot, fresh, res, f := semStaleSetup(t, l, &log)
			if staleStep.Valid() || staleRoot.Valid() {
				t.Fatal("stale handles report Valid")
			}
			if staleStep.State() != nil || staleRoot.State() != nil {
				t.Fatal("State through a stale handle is not nil")
			}
			h := staleStep
			if strings.HasPrefix(op.name, "root ") {
				h = staleRoot
			}
			op.call(h)
			semStaleCheckUntouched(t, l, clk, &log, fresh, res, f)
		})
	}
}

// Calls through a stale handle made inside a running step of another flow
// fail THAT flow with InternalError, and do not touch the flow that now
// uses the memory.
func TestSemStaleHandleFromAnotherFlow(t *testing.T) {
	for _, op := range append(append([]semOp{}, semStaleStepOps...), semStaleRootOps...) {
		t.Run(op.name, func(t *testing.T) {
			l, clk := semLoop()
			var log semLog
			staleStep, staleRoot, fresh, res, f := semStaleSetup(t, l, &log)
			h := staleStep
			if strings.HasPrefix(op.name, "root ") {
				h = staleRoot
			}
			caller := l.NewSteps()
			var clog semLog
			caller.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if as.State() == nil || h.State() != nil {
					clog.add("State wrong")
				}
				op.call(h)
				clog.add("returned")
			}, func(as vm.AsyncSteps, code string) {
				clog.add("caller handler %s", code)
				if as.State().ErrorInfo() == "" {
					clog.add("empty ErrorInfo")
				}
			})
			caller.Add(clog.step("caller next never"))
			cf := caller.Promise()
			l.RunUntilIdle()
			semFail(t, cf, vm.InternalError)
			semExpect(t, &clog, "caller handler InternalError")
			semStaleCheckUntouched(t, l, clk, &log, fresh, res, f)
		})
	}
}

// Release and Cancel through a stale root handle leave the new flow on the
// same memory alone.
func TestSemStaleRootReleaseCancel(t *testing.T) {
	for _, op := range []semOp{
		{"Release", func(h vm.AsyncSteps) { h.Release() }},
		{"Cancel", func(h vm.AsyncSteps) { h.Cancel() }},
		{"Promise", func(h vm.AsyncSteps) { h.Promise() }},
	} {
		t.Run(op.name, func(t *testing.T) {
			l, clk := semLoop()
			var log semLog
			_, staleRoot, fresh, res, f := semStaleSetup(t, l, &log)
			op.call(staleRoot)
			if !fresh.Valid() {
				t.Fatal("the fresh root turned invalid")
			}
			semStaleCheckUntouched(t, l, clk, &log, fresh, res, f)
		})
	}
}

// Spawn runs its step on a pooled root and releases it when the flow ends,
// by success or by error.
func TestSemSpawn(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	before := l.Stats().LiveRoots
	var kept vm.AsyncSteps
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
		kept = as
		log.add("spawned")
		as.Add(log.step("spawned sub"))
	})
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
		as.Error("SpawnErr")
	}, func(as vm.AsyncSteps, code string) { log.add("spawn handler %s", code) })
	l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
		as.Repeat(2, func(as vm.AsyncSteps, i int) { log.add("spawn loop %d", i) })
	})
	if l.Stats().RunningRoots != 3 {
		t.Fatalf("RunningRoots = %d after three Spawns", l.Stats().RunningRoots)
	}
	l.RunUntilIdle()
	semExpect(t, &log, "spawned", "spawn handler SpawnErr", "spawned sub", "spawn loop 0", "spawn loop 1")
	st := l.Stats()
	if st.LiveRoots != before || st.RunningRoots != 0 || st.ArenaInUse != 0 {
		t.Fatalf("after spawned flows: %+v", st)
	}
	if kept.Valid() || kept.State() != nil {
		t.Fatal("a handle of a spawned flow is valid after it ended")
	}
}

// Release of a running root cancels it first.
func TestSemReleaseRunning(t *testing.T) {
	l, clk := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { log.add("canceled") })
		as.SetTimeout(time.Second)
	}, func(as vm.AsyncSteps, code string) { log.add("handler must not run") })
	root.Add(log.step("next never"))
	f := root.Promise()
	l.RunUntilIdle()
	root.Release()
	semExpect(t, &log, "canceled")
	if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("Future error %v", err)
	}
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	semExpect(t, &log, "canceled")
	if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 {
		t.Fatalf("after Release: %+v", st)
	}
}

// Release from inside the root's own step ends the flow there.
func TestSemReleaseFromOwnStep(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { log.add("canceled") })
		root.Release()
		log.add("Release returned, valid=%v", as.Valid())
	})
	root.Add(log.step("next never"))
	f := root.Promise()
	l.RunUntilIdle()
	semExpect(t, &log, "canceled", "Release returned, valid=false")
	if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("Future error %v", err)
	}
	if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 {
		t.Fatalf("after Release: %+v", st)
	}
}

// NewInstance returns an independent root on the same loop.
func TestSemNewInstance(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.State().Set("k", 1)
	n := root.NewInstance()
	if !n.Valid() || n.Tool() != l || n.State().Exists("k") {
		t.Fatal("NewInstance is not a fresh root of the same loop")
	}
	n.SuccessStep(vm.Int(5))
	f := n.Promise()
	l.RunUntilIdle()
	if a := semOK(t, f); a.Int(0) != 5 {
		t.Fatalf("result %v", a.Values())
	}
}
