package vm_test

import (
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Get, Set, Exists and Unset on the flow's state, seen by every step.
func TestSemStateAccessors(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	st := root.State()
	if st == nil {
		t.Fatal("State of a new root is nil")
	}
	if _, ok := st.Get("missing"); ok || st.Exists("missing") {
		t.Fatal("a missing key exists")
	}
	st.Unset("missing") // harmless
	st.Set("pre", "set before Execute")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		v, ok := as.State().Get("pre")
		log.add("pre=%v %v", v, ok)
		as.State().Set("n", 1)
		as.State().Set("nil", nil)
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			n, _ := as.State().Get("n")
			as.State().Set("n", n.(int)+1)
			log.add("nil exists=%v", as.State().Exists("nil"))
		})
	})
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		n, _ := as.State().Get("n")
		log.add("n=%v", n)
		as.State().Unset("pre")
		log.add("pre exists=%v", as.State().Exists("pre"))
		if as.State() != root.State() {
			log.add("step and root see different states")
		}
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "pre=set before Execute true", "nil exists=true", "n=2", "pre exists=false")
	// The state stays readable after completion.
	if v, ok := root.State().Get("n"); !ok || v != 2 {
		t.Fatalf("after completion n = %v %v", v, ok)
	}
	keys := root.State().Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"n", "nil"}) {
		t.Fatalf("Keys = %v", keys)
	}
}

// State of an invalid handle is nil (FTN12 2.2.1).
func TestSemStateInvalidHandle(t *testing.T) {
	if (vm.AsyncSteps{}).State() != nil {
		t.Fatal("State of the zero AsyncSteps is not nil")
	}
	l, _ := semLoop()
	root := l.NewSteps()
	root.Release()
	if root.State() != nil {
		t.Fatal("State of a released root is not nil")
	}
}

// CopyFrom copies the model's state variables the target lacks, and keeps
// the ones it has.
func TestSemCopyFromState(t *testing.T) {
	l, _ := semLoop()
	model := l.NewSteps()
	model.State().Set("shared", "model")
	model.State().Set("only model", 1)
	root := l.NewSteps()
	root.State().Set("shared", "root")
	root.State().Set("only root", 2)
	root.CopyFrom(model)
	st := root.State()
	for k, want := range map[string]any{"shared": "root", "only model": 1, "only root": 2} {
		if v, ok := st.Get(k); !ok || v != want {
			t.Errorf("%q = %v %v, want %v", k, v, ok, want)
		}
	}
	if model.State().Exists("only root") {
		t.Fatal("CopyFrom wrote to the model's state")
	}
	// The copy is a copy: changing it later leaves the model alone.
	st.Set("only model", 100)
	if v, _ := model.State().Get("only model"); v != 1 {
		t.Fatalf("model's variable changed to %v", v)
	}
}

// CopyFrom copies the steps of the model (with their sub-step structure
// and error handlers); the model itself is never executed and can be run
// on its own later, as many times as it is copied.
func TestSemCopyFromSteps(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	model.Add(func(as vm.AsyncSteps, a vm.Args) {
		log.add("model step 1 got %d", a.Len())
		as.Error("ModelErr")
	}, func(as vm.AsyncSteps, code string) {
		log.add("model handler %s", code)
		as.Success(vm.Str("recovered"))
	})
	model.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("model step 2 got %s", a.String(0)) })
	model.Parallel().Add(log.step("model branch a")).Add(log.step("model branch b"))

	root := l.NewSteps()
	root.Add(log.step("root first"))
	root.CopyFrom(model)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("root inner")
		as.CopyFrom(model)
		as.Add(log.step("root inner tail"))
	})
	l.RunUntilIdle()
	semExpect(t, &log) // CopyFrom runs nothing
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	once := []string{
		"model step 1 got 0", "model handler ModelErr", "model step 2 got recovered",
		"model branch a", "model branch b",
	}
	want := append([]string{"root first"}, once...)
	want = append(want, "root inner")
	want = append(want, once...)
	want = append(want, "root inner tail")
	semExpect(t, &log, want...)

	// The model still has its steps and runs them once when executed.
	log.lines = nil
	mf := model.Promise()
	l.RunUntilIdle()
	semOK(t, mf)
	semExpect(t, &log, once...)
}

// CopyFrom of a running model copies what the model still has queued at
// level 0 and leaves the model alone.
func TestSemCopyFromRunningModel(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	model.Add(func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
	model.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("queued step of the model") })
	mf := model.Promise()
	l.RunUntilIdle() // the model waits in its first step; its second is still queued
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.CopyFrom(model) })
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); err != nil {
		t.Fatalf("flow error = %v", err)
	}
	semExpect(t, &log, "queued step of the model") // only what was still queued
	semPending(t, mf)                              // the model itself is untouched
	model.Cancel()
}

// Clone returns a new root with the steps and state of the original; the
// two run and change state independently.
func TestSemClone(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	orig := l.NewSteps()
	orig.State().Set("who", "orig")
	orig.State().Set("count", 0)
	orig.Add(func(as vm.AsyncSteps, _ vm.Args) {
		who, _ := as.State().Get("who")
		n, _ := as.State().Get("count")
		as.State().Set("count", n.(int)+1)
		log.add("step of %v", who)
		as.Success(vm.Str(who.(string)))
	})
	clone := orig.Clone()
	if !clone.Valid() {
		t.Fatal("Clone is invalid")
	}
	clone.State().Set("who", "clone")
	cf := clone.Promise()
	l.RunUntilIdle()
	if a := semOK(t, cf); a.String(0) != "clone" {
		t.Fatalf("clone result %v", a.Values())
	}
	semExpect(t, &log, "step of clone")
	if v, _ := orig.State().Get("count"); v != 0 {
		t.Fatalf("running the clone changed the original's state: count=%v", v)
	}
	of := orig.Promise()
	l.RunUntilIdle()
	if a := semOK(t, of); a.String(0) != "orig" {
		t.Fatalf("original result %v", a.Values())
	}
	semExpect(t, &log, "step of clone", "step of orig")
	if v, _ := clone.State().Get("count"); v != 1 {
		t.Fatalf("clone count = %v, want 1", v)
	}
}

// A cancel handler that Release runs may Clone the root being released:
// the clone gets the steps still queued and the state, before Release
// clears them, and runs on its own; the state does not reach the next
// roots drawn from the pool.
func TestSemCloneDuringRelease(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	root := l.NewSteps()
	root.State().Set("who", "orig")
	var clone vm.AsyncSteps
	root.Loop(func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { clone = root.Clone() })
		})
	}, "outer")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		who, _ := as.State().Get("who")
		log.add("queued step of %v", who)
	})
	root.Execute()
	l.RunUntilIdle()
	root.State().Set("late", true)
	root.Release()
	if !clone.Valid() {
		t.Fatal("Clone from the cancel handler is invalid")
	}
	cf := clone.Promise()
	l.RunUntilIdle()
	semOK(t, cf)
	semExpect(t, &log, "queued step of orig")
	if !clone.State().Exists("late") {
		t.Fatal("the clone lacks a variable the model had when it was cloned")
	}
	clone.Release()

	for range 2 { // both roots from the pool, the released one among them
		next := l.NewSteps()
		defer next.Release()
		if st := next.State(); len(st.Keys()) != 0 {
			t.Fatalf("pooled root kept state: %v", st.Keys())
		}
	}
	if st := l.Stats(); st.PooledRoots != 0 || st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 {
		t.Fatalf("stats after: %+v", st)
	}
}

// A clone that releases its own root from inside its step, error handler,
// loop iteration or parallel branch, then clones the model again, gets the
// same pooled root back and executes it before the old step returns: the
// old run ends canceled (its Stack destroyed once), the new one runs the
// model's steps once, from the start, in later turns.
func TestSemCloneReusesOwnRootFromItsStep(t *testing.T) {
	for _, where := range []string{"step", "handler", "iteration", "branch"} {
		t.Run(where, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			model := l.NewSteps()
			model.Repeat(2, func(as vm.AsyncSteps, i int) {
				as.StackRaw(8, func(unsafe.Pointer) { log.add("model destroy %d", i) })
			})
			model.SuccessStep(vm.Str("model done"))
			c := model.Clone()
			var again vm.AsyncSteps
			var againF *vm.Future
			reuse := func(as vm.AsyncSteps) {
				as.StackRaw(8, func(unsafe.Pointer) { log.add("old destroy") })
				old := vm.RootID(c)
				c.Release()
				again = model.Clone()
				againF = again.Promise()
				const addr = 1<<48 - 1 // RootID's root frame address, without the epoch
				if vm.RootID(again)&addr != old&addr {
					t.Error("the clone did not get the released root back from the pool")
				}
				log.add("reused")
			}
			switch where {
			case "step":
				c.Add(func(as vm.AsyncSteps, _ vm.Args) { reuse(as) })
			case "handler":
				c.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
					func(as vm.AsyncSteps, _ string) { reuse(as) })
			case "iteration":
				c.Loop(func(as vm.AsyncSteps) { reuse(as) })
			case "branch":
				p := c.Parallel()
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { reuse(as) })
				p.Add(log.step("sibling never"))
			}
			c.Add(log.step("old never"))
			f := c.Promise()
			l.RunUntilIdle()
			if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("old run: %v", err)
			}
			if a := semOK(t, againF); a.String(0) != "model done" {
				t.Fatalf("new run: %v", a.Values())
			}
			semExpect(t, &log, "model destroy 0", "model destroy 1", "old destroy", "reused",
				"model destroy 0", "model destroy 1")
			again.Release()
			model.Release()
			semClean(t, l)
		})
	}
}

// The next user of a pooled root finds nothing of the previous one's State
// (variables, ErrorInfo, LastException, AsyncStack), however that one
// ended: failed and released; released while it waited, its cancel
// handler and destroy callback writing variables and panicking during the
// Release; released from its own error handler; spawned and failed, its
// handler panicking.
func TestSemPooledRootStateIsClean(t *testing.T) {
	const addr = 1<<48 - 1 // RootID's root frame address, without the epoch
	fails := func(as vm.AsyncSteps, _ vm.Args) {
		as.State().Set("step", 1)
		as.Loop(func(as vm.AsyncSteps) {
			as.Add(func(vm.AsyncSteps, vm.Args) { panic(&vm.Error{Code: "P", Info: "p"}) })
		}, "L")
	}
	for _, how := range []string{"failed", "released while waiting", "released from its handler", "spawned"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			var old uint64
			switch how {
			case "spawned":
				l.Spawn(func(as vm.AsyncSteps, a vm.Args) {
					old = vm.RootID(vm.RootOf(as))
					fails(as, a)
				}, func(vm.AsyncSteps, string) { panic("handler") })
				l.RunUntilIdle()
			default:
				root := l.NewSteps()
				old = vm.RootID(root)
				switch how {
				case "failed":
					root.Add(fails)
				case "released while waiting":
					root.Add(fails, func(as vm.AsyncSteps, _ string) { as.Success() })
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.StackRaw(8, func(unsafe.Pointer) { root.State().Set("destroy", 1); panic("destroy") })
						as.SetCancel(func(as vm.AsyncSteps) { as.State().Set("cancel", 1); panic("cancel") })
					})
				case "released from its handler":
					root.Add(fails, func(as vm.AsyncSteps, _ string) {
						as.State().Set("handler", 1)
						root.Release()
					})
				}
				f := root.Promise()
				l.RunUntilIdle()
				if how != "released from its handler" {
					root.Release()
				}
				semResult(t, f)
			}
			next := l.NewSteps()
			if vm.RootID(next)&addr != old&addr {
				t.Fatal("the next root is not the pooled one")
			}
			st := next.State()
			if keys := st.Keys(); len(keys) != 0 || st.ErrorInfo() != "" || st.LastException() != nil || len(st.AsyncStack()) != 0 {
				t.Fatalf("the pooled root's State: variables %q, ErrorInfo %q, LastException %v, AsyncStack %d entries",
					keys, st.ErrorInfo(), st.LastException(), len(st.AsyncStack()))
			}
			next.Release()
			semNextRootWorks(t, l)
			semClean(t, l)
		})
	}
}
