package vm_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// A release hook's panic that the panic handler lets out, when the release
// is made inside a step, is that step's panic: its flow fails and the pass
// goes on. The pass must keep staging the timers its timer callbacks set:
// inPass went down with the handler's panic as if it had left the pass,
// and a Deferred(0) that re-armed itself then fired again and again in the
// same pass, which never ended.
func TestHandlerPanicInsideStepKeepsThePass(t *testing.T) {
	vm.SetNativeRootHooks(func(vm.AsyncSteps) { panic("hook") }, nil)
	defer vm.SetNativeRootHooks(nil, nil)
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(v any) { panic(v) }))
	defer l.Close()
	fires := 0
	var rearm func()
	rearm = func() {
		if fires++; fires < 100 {
			l.Deferred(0, rearm)
		}
	}
	l.Deferred(0, rearm)
	other := l.NewSteps()
	root := l.NewSteps()
	root.Add(func(vm.AsyncSteps, vm.Args) { other.Release() })
	f := root.Promise()
	l.Iterate()
	if fires != 1 {
		t.Fatalf("the self-arming Deferred(0) fired %d times in one pass, want once", fires)
	}
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, "hook")
	vm.SetNativeRootHooks(nil, nil)
	root.Release()
	for fires < 100 {
		l.Iterate()
	}
	semClean(t, l)
}

// The end hook of a flow that ends in its own turn runs in the dispatch,
// with the flow's last values in the loop's registers; a panic that the
// panic handler lets out leaves the pass from there. The registers must not
// carry the turn over: the values stayed, and the next flow's first step,
// which is passed none, got them.
func TestHandlerPanicOutOfDispatchLeavesNoValues(t *testing.T) {
	vm.SetNativeRootHooks(nil, func(vm.AsyncSteps, string) { panic("ended") })
	defer vm.SetNativeRootHooks(nil, nil)
	l := vm.NewLoop(vm.WithPanicHandler(func(v any) { panic(v) }))
	defer l.Close()
	root := l.NewSteps()
	vm.SetNativeRootValue(root, "binding's")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(7), vm.Int(8)) })
	f := root.Promise()
	func() {
		defer func() {
			if p := recover(); p != "ended" {
				t.Fatalf("RunUntilIdle panicked with %v, want the hook's panic", p)
			}
		}()
		l.RunUntilIdle()
	}()
	if a := semOK(t, f); a.Len() != 2 || a.Int(0) != 7 {
		t.Fatalf("result %v, want 7, 8", a.Values())
	}
	vm.SetNativeRootHooks(nil, nil)
	root.Release()
	next := l.NewSteps()
	got := -1
	next.Add(func(_ vm.AsyncSteps, args vm.Args) { got = args.Len() })
	g := next.Promise()
	l.RunUntilIdle()
	semOK(t, g)
	if got != 0 {
		t.Fatalf("the first step of the next flow got %d values, want none", got)
	}
	next.Release()
	semClean(t, l)
}

// A root hook's panic that the panic handler lets out leaves the pass from
// wherever the run ended or the root was released: the dispatch, a timeout,
// a Resumer's completion or a Post in the inbox, an Immediate. Whatever
// else was due in that pass (another flow's steps, which pass values and
// none, Immediates, Posts, timers due at the same time) runs in the next
// passes exactly once, and the loop ends clean.
func TestHandlerPanicFromEveryEndLosesNothing(t *testing.T) {
	for _, c := range []struct{ end, hook string }{
		{"error in turn", "ended"}, {"timeout", "ended"}, {"resumer", "ended"},
		{"cancel from post", "ended"}, {"release from immediate", "ended"},
		{"release from immediate", "released"}, {"spawned, in turn", "released"},
	} {
		t.Run(c.end+"/"+c.hook, func(t *testing.T) {
			clk := vm.NewManualClock(time.Unix(0, 0))
			l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(v any) { panic(v) }))
			defer l.Close()
			ran := map[string]int{}
			var res vm.Resumer
			root := l.NewSteps()
			vm.SetNativeRootValue(root, "binding's")
			body := func(as vm.AsyncSteps, _ vm.Args) {
				switch c.end {
				case "error in turn":
					as.Error("Boom")
				case "spawned, in turn":
					as.Success(vm.Int(1), vm.Int(2))
				case "timeout":
					as.SetTimeout(time.Millisecond)
				case "resumer":
					res = as.Resumer()
					as.WaitExternal()
				default:
					as.WaitExternal()
				}
			}
			inTurn := c.end == "error in turn" || c.end == "spawned, in turn"
			if !inTurn {
				root.Add(body)
				root.Execute()
				l.RunUntilIdle()
			}
			other := l.NewSteps()
			other.Add(func(as vm.AsyncSteps, _ vm.Args) { ran["o1"]++; as.Success(vm.Int(5)) }).
				Add(func(as vm.AsyncSteps, a vm.Args) { ran["o2"] += 1 + 10*(1-a.Len()) }).
				Add(func(as vm.AsyncSteps, a vm.Args) { ran["o3"] += 1 + 10*a.Len() })
			of := other.Promise()
			l.Immediate(func() { ran["immediate"]++ })
			l.Deferred(time.Millisecond, func() { ran["deferred"]++ })
			l.Post(func() { ran["post"]++ })
			switch c.end {
			case "error in turn":
				root.Add(body)
				root.Execute()
			case "spawned, in turn":
				root.Release()
				l.Spawn(func(as vm.AsyncSteps, a vm.Args) {
					vm.SetNativeRootValue(as, "binding's")
					body(as, a)
				})
			case "resumer":
				res.Success()
			case "cancel from post":
				l.Post(root.Cancel)
			case "release from immediate":
				l.Immediate(root.Release)
			}
			l.Deferred(time.Millisecond, func() { ran["deferred 2"]++ })
			clk.Advance(time.Millisecond)
			setPanickingHook(t, c.hook)
			escaped := 0
			for range 3 {
				func() {
					defer func() {
						if recover() != nil {
							escaped++
						}
					}()
					l.RunUntilIdle()
				}()
			}
			vm.SetNativeRootHooks(nil, nil)
			if escaped != 1 {
				t.Fatalf("the handler's panic escaped %d times, want once", escaped)
			}
			for _, k := range []string{"o1", "o2", "o3", "immediate", "deferred", "post", "deferred 2"} {
				if ran[k] != 1 {
					t.Errorf("%s: %d, want 1 (once, with the values passed to it)", k, ran[k])
				}
			}
			semOK(t, of)
			other.Release()
			if c.end != "release from immediate" && c.end != "spawned, in turn" {
				root.Release()
			}
			if s := l.Stats(); s.LiveRoots != 0 || s.PooledRoots != 2 {
				t.Fatalf("%+v, want no live roots and two pooled", s)
			}
			semNextRootWorks(t, l)
			semClean(t, l)
		})
	}
}

// The panic handler is no step's code, wherever the panic it hears of came
// from: a root hook's panic reaches it inside the step that released the
// root, and a misuse the handler makes, and recovers itself, must not fail
// that step's flow.
func TestHandlerMisuseInsideStepIsNotTheSteps(t *testing.T) {
	vm.SetNativeRootHooks(func(vm.AsyncSteps) { panic("hook") }, nil)
	defer vm.SetNativeRootHooks(nil, nil)
	heard := 0
	var l *vm.Loop
	l = vm.NewLoop(vm.WithPanicHandler(func(any) {
		heard++
		func() {
			defer func() { _ = recover() }()
			l.Immediate(nil) // misuse, recovered here
		}()
	}))
	defer l.Close()
	other := l.NewSteps()
	root := l.NewSteps()
	root.Add(func(vm.AsyncSteps, vm.Args) { other.Release() })
	f := root.Promise()
	l.RunUntilIdle()
	if heard != 1 {
		t.Fatalf("the panic handler heard %d panics, want the hook's", heard)
	}
	semOK(t, f)
	vm.SetNativeRootHooks(nil, nil)
	root.Release()
	semClean(t, l)
}
