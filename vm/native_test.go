package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// A foreign binding's end hook runs once the run is over, for the roots
// the binding attached a value to, with the error code no handler settled
// ("" for a run that succeeded). A hook that executes the root again (a
// retry from C's unhandled-error handler) starts a clean run that
// completes, rather than one whose root frame the end of the failed run
// then wipes, leaving it running for good.
func TestNativeEndedHookMayRestart(t *testing.T) {
	var log []string
	vm.SetNativeRootHooks(nil, func(root vm.AsyncSteps, code string) {
		log = append(log, "hook "+code)
		if len(log) == 1 {
			root.Add(func(vm.AsyncSteps, vm.Args) { log = append(log, "retry") })
			root.Execute()
		}
	})
	defer vm.SetNativeRootHooks(nil, nil)
	l := vm.NewLoop()
	defer l.Close()
	plain := l.NewSteps() // no native value: the hook is not the binding's to run
	plain.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Plain") })
	plain.Execute()
	l.RunUntilIdle()
	root := l.NewSteps()
	vm.SetNativeRootValue(root, "binding's")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") })
	root.Add(func(vm.AsyncSteps, vm.Args) { log = append(log, "never") })
	root.Execute()
	l.RunUntilIdle()
	if len(log) != 3 || log[0] != "hook Boom" || log[1] != "retry" || log[2] != "hook " {
		t.Fatalf("trace %q, want the hook, the retried run's step, the hook again", log)
	}
	if s := l.Stats(); s.RunningRoots != 0 || s.Queued != 0 {
		t.Fatalf("after the retry: %+v, want nothing running or queued", s)
	}
	plain.Release()
	root.Release()
	semClean(t, l)
	if n := l.Stats().LiveRoots; n != 0 {
		t.Fatalf("%d roots live after Release", n)
	}
}

// RootID names the flow a handle belongs to: the main thread (the root's
// own handle too) or one parallel branch, each its own (FTN12 1.11.4:
// sync primitives treat branches as separate owners), the same for every
// step of that flow, and new for the next use of a pooled root.
func TestNativeRootIDPerFlow(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	root := l.NewSteps()
	ids := map[string]uint64{}
	record := func(name string) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) { ids[name] = vm.RootID(as) }
	}
	root.Add(record("main"))
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		p := as.Parallel()
		for _, b := range []string{"a", "b"} {
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ids[b] = vm.RootID(as)
				as.Add(record(b + " sub"))
			})
		}
	})
	root.Add(record("main after"))
	mainID := vm.RootID(root)
	root.Execute()
	l.RunUntilIdle()
	if mainID == 0 || ids["main"] != mainID || ids["main after"] != mainID {
		t.Fatalf("main thread ids %x, %x, root %x: want one, not 0", ids["main"], ids["main after"], mainID)
	}
	if ids["a"] == ids["b"] || ids["a"] == mainID || ids["b"] == mainID || ids["a"] == 0 || ids["b"] == 0 {
		t.Fatalf("branch ids %x, %x, main %x: want three distinct", ids["a"], ids["b"], mainID)
	}
	if ids["a sub"] != ids["a"] || ids["b sub"] != ids["b"] {
		t.Fatalf("a sub-step's id differs from its branch's: %v", ids)
	}
	root.Release()
	next := l.NewSteps() // the same root, from the pool
	defer next.Release()
	if vm.RootID(next) == mainID {
		t.Fatal("a pooled root's next use has the id of its previous one")
	}
	if vm.RootID(root) != 0 {
		t.Fatal("a released root's handle has an id")
	}
}

// A foreign binding's release hook that releases the root again, or
// executes it, does neither: the root is being released. (Releasing it
// again recursed without end; executing it left a pooled root running, and
// counted in RunningRoots for good.) So does the panic handler that hears
// of the hook's panic, which runs while that Release is under way. (It ran
// with the root no longer marked as being released: its Release ran the
// hook again, whose panic reached the handler again, until the stack
// overflowed; its Execute started a run that the Release then dropped.)
func TestNativeReleasedHookCannotRestartOrRelease(t *testing.T) {
	for _, spawned := range []bool{false, true} {
		for _, from := range []string{"hook", "panic handler"} {
			calls := 0
			again := func(root vm.AsyncSteps) {
				calls++
				root.Release()
				root.Add(func(vm.AsyncSteps, vm.Args) { t.Error("a step of a released root ran") })
				root.Execute()
			}
			var hooked vm.AsyncSteps
			if from == "hook" {
				vm.SetNativeRootHooks(again, nil)
			} else {
				vm.SetNativeRootHooks(func(root vm.AsyncSteps) { hooked = root; panic("hook") }, nil)
			}
			l := vm.NewLoop(vm.WithPanicHandler(func(any) { again(hooked) }))
			if spawned {
				l.Spawn(func(vm.AsyncSteps, vm.Args) {}) // released by the end of its run
			} else {
				root := l.NewSteps()
				root.Add(func(vm.AsyncSteps, vm.Args) {})
				root.Execute()
				l.RunUntilIdle()
				root.Release()
			}
			l.RunUntilIdle()
			vm.SetNativeRootHooks(nil, nil)
			if calls != 1 {
				t.Fatalf("spawned %v, from the %s: ran %d times", spawned, from, calls)
			}
			semClean(t, l)
			semPooledOnce(t, l)
			l.Close()
		}
	}
}

// A binding's hook that panics goes to the loop's panic handler, as an
// Immediate does, rather than out of the Release (or the run's end) that
// ran it: the release completes, the run's end is not left halfway, and
// the pass goes on. The VM's own release of a spawned root runs inside a
// pass, where such a panic would leave the pass with inPass raised.
func TestNativeHookPanicGoesToPanicHandler(t *testing.T) {
	for _, which := range []string{"released", "ended"} {
		t.Run(which, func(t *testing.T) {
			hook := func(vm.AsyncSteps) { panic("hook " + which) }
			if which == "released" {
				vm.SetNativeRootHooks(hook, nil)
			} else {
				vm.SetNativeRootHooks(nil, func(root vm.AsyncSteps, _ string) { hook(root) })
			}
			defer vm.SetNativeRootHooks(nil, nil)
			var got []any
			clock := vm.NewManualClock(time.Unix(0, 0))
			l := vm.NewLoop(vm.WithClock(clock), vm.WithPanicHandler(func(v any) { got = append(got, v) }))
			defer l.Close()
			ran := 0
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
				vm.SetNativeRootValue(as, "binding's")
				ran++
			})
			l.Spawn(func(vm.AsyncSteps, vm.Args) { ran++ })
			root := l.NewSteps()
			vm.SetNativeRootValue(root, "binding's")
			root.Add(func(vm.AsyncSteps, vm.Args) { ran++ })
			root.Execute()
			l.RunUntilIdle()
			root.Release()
			if ran != 3 {
				t.Fatalf("%d steps ran, want 3", ran)
			}
			want := 3 // released: every root's release runs the hook
			if which == "ended" {
				want = 2 // the roots with a native value
			}
			if len(got) != want {
				t.Fatalf("panic handler got %v, want %d panics", got, want)
			}
			semClean(t, l)
			if s := l.Stats(); s.LiveRoots != 0 || s.PooledRoots != 3 {
				t.Fatalf("after the releases: %+v, want no live roots and three pooled", s)
			}
			// The loop is whole: a timer set now fires when due.
			fired := false
			l.Deferred(time.Millisecond, func() { fired = true })
			l.RunUntilIdle()
			clock.Advance(time.Millisecond)
			l.RunUntilIdle()
			if !fired {
				t.Fatal("a timer set after the hooks' panics did not fire")
			}
		})
	}
}

// A spawned root whose end hook executes it again, at every end: the
// release that ends a spawned root's life cancels the restarted run, whose
// end the hook hears once more (refused then: the root is being released),
// and the root goes back to the pool once.
func TestNativeEndedHookRestartsSpawnedRoot(t *testing.T) {
	for _, code := range []string{"", "Boom"} {
		var log []string
		vm.SetNativeRootHooks(nil, func(root vm.AsyncSteps, code string) {
			log = append(log, "hook "+code)
			root.Add(func(vm.AsyncSteps, vm.Args) { log = append(log, "restarted run") })
			root.Execute()
		})
		l := vm.NewLoop()
		l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
			vm.SetNativeRootValue(as, "binding's")
			if code != "" {
				as.Error(code)
			}
		})
		l.RunUntilIdle()
		vm.SetNativeRootHooks(nil, nil)
		if len(log) != 2 || log[0] != "hook "+code || log[1] != "hook " {
			t.Fatalf("error %q: trace %q, want the hook, then the hook of the canceled restart", code, log)
		}
		semClean(t, l)
		semPooledOnce(t, l)
		l.Close()
	}
}

// A hook runs amid the VM's own work on its root, not at a pass's top
// level as an Immediate does: a panic handler that panics in turn (a
// program that lets such panics out of Run) must not leave that work
// halfway. The release completes before the panic goes on, whether the
// hook was the release hook, or the end hook of a spawned root or of a
// running root that Release cancels. (The root stayed counted live, and
// a second Release of it did nothing.)
func TestNativeHookPanicOutOfPanicHandler(t *testing.T) {
	for _, c := range []struct{ hook, how string }{
		{"released", "Release"}, {"released", "Spawn"},
		{"ended", "Release of a running root"}, {"ended", "Spawn"},
	} {
		t.Run(c.hook+"/"+c.how, func(t *testing.T) {
			setPanickingHook(t, c.hook)
			l := vm.NewLoop(vm.WithPanicHandler(func(v any) { panic(v) }))
			defer l.Close()
			escaped := 0
			try := func(f func()) {
				defer func() {
					if p := recover(); p != nil {
						escaped++
					}
				}()
				f()
			}
			body := func(as vm.AsyncSteps, _ vm.Args) {
				vm.SetNativeRootValue(as, "binding's")
				if c.how != "Spawn" {
					as.WaitExternal()
				}
			}
			if c.how == "Spawn" {
				l.Spawn(body)
				try(l.RunUntilIdle)
			} else {
				root := l.NewSteps()
				root.Add(body)
				root.Execute()
				l.RunUntilIdle()
				try(root.Release)
				try(root.Release) // a no-op: the first one released it
			}
			if escaped != 1 {
				t.Fatalf("the handler's panic escaped %d times, want once", escaped)
			}
			if s := l.Stats(); s.LiveRoots != 0 || s.PooledRoots != 1 {
				t.Fatalf("after the release: %+v, want no live roots and one pooled", s)
			}
			vm.SetNativeRootHooks(nil, nil)
			semNextRootWorks(t, l)
			semClean(t, l)
		})
	}
}

// semPooledOnce fails t unless l has no live or running root and one
// pooled, which the pool hands out once.
func semPooledOnce(t *testing.T, l *vm.Loop) {
	t.Helper()
	if s := l.Stats(); s.LiveRoots != 0 || s.RunningRoots != 0 || s.PooledRoots != 1 {
		t.Fatalf("%+v, want no live or running root and one pooled", s)
	}
	a, b := l.NewSteps(), l.NewSteps()
	if vm.RootID(a) == vm.RootID(b) {
		t.Fatal("the pool handed out one root twice")
	}
	a.Release()
	b.Release()
}

// setPanickingHook makes the release hook ("released") or the end hook
// ("ended") panic with "hook" until t ends.
func setPanickingHook(t *testing.T, which string) {
	hook := func(vm.AsyncSteps) { panic("hook") }
	if which == "released" {
		vm.SetNativeRootHooks(hook, nil)
	} else {
		vm.SetNativeRootHooks(nil, func(root vm.AsyncSteps, _ string) { hook(root) })
	}
	t.Cleanup(func() { vm.SetNativeRootHooks(nil, nil) })
}

// addForeign is a foreign flow that records the steps added to it and the
// misuse reported to it.
type addForeign struct {
	vm.Foreign
	added   int
	misuses []string
}

func (f *addForeign) Add(vm.ExecFunc, vm.ErrorFunc) { f.added++ }
func (f *addForeign) Misuse(info string)            { f.misuses = append(f.misuses, info) }

// AddNative through a foreign handle cannot keep its words: the foreign
// engine stores the step, and TakeNativeWords in it gets zero words. Words
// other than zero are misuse, reported to the engine, not a step added
// without them (whose trampoline would call a null C function); zero
// words add the step, as Add does.
func TestNativeAddNativeOnForeignFlow(t *testing.T) {
	f := &addForeign{}
	h := vm.WrapForeign(f)
	step := func(vm.AsyncSteps, vm.Args) {}
	vm.AddNative(h, step, nil, vm.NativeWords{A: 1, B: 2})
	if f.added != 0 || len(f.misuses) != 1 {
		t.Fatalf("AddNative with words: %d steps added, misuse %q; want none added and one report", f.added, f.misuses)
	}
	semInfoMentions(t, f.misuses[0], "AddNative", "foreign")
	vm.AddNative(h, step, nil, vm.NativeWords{})
	if f.added != 1 || len(f.misuses) != 1 {
		t.Fatalf("AddNative with no words: %d steps added, misuse %q; want one added", f.added, f.misuses)
	}
}
