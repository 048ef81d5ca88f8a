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
