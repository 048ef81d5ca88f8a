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
