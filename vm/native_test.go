package vm_test

import (
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// A foreign binding's failure hook runs once the failed run is over: a
// hook that executes the root again (a retry from C's unhandled-error
// handler) starts a clean run that completes, rather than one whose root
// frame the end of the failed run then wipes, leaving it running for good.
func TestNativeFailedHookMayRestart(t *testing.T) {
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
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") })
	root.Add(func(vm.AsyncSteps, vm.Args) { log = append(log, "never") })
	root.Execute()
	l.RunUntilIdle()
	if len(log) != 2 || log[0] != "hook Boom" || log[1] != "retry" {
		t.Fatalf("trace %q, want the hook, then the retried run's step", log)
	}
	if s := l.Stats(); s.RunningRoots != 0 || s.Queued != 0 {
		t.Fatalf("after the retry: %+v, want nothing running or queued", s)
	}
	root.Release()
	if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 {
		t.Fatalf("after Release: %+v", s)
	}
}
