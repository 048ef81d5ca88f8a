package vm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Regression tests for bugs found by the test suites and the fuzzer. Each
// names the entry of the bug list it guards.

// BUG-S1: misuse from a loop callback fails the flow it names instead of
// being swallowed as a callback panic.
func TestRegressMisuseFromImmediate(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		as.Tool().Immediate(func() { as.Add(func(vm.AsyncSteps, vm.Args) {}) })
	})
	f := root.Promise()
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatalf("flow still waiting; Stats().Panics=%d", l.Stats().Panics)
	}
	if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) {
		t.Fatalf("err = %v, want InternalError", err)
	}
	if root.State().ErrorInfo() == "" {
		t.Fatal("no ErrorInfo for the misuse")
	}
}

// BUG-S2: Success twice in the root's last step is InternalError, as it is
// in any other step.
func TestRegressMisuseInLastStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   vm.ExecFunc
	}{
		{"Success twice", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Success() }},
		{"Error after Success", func(as vm.AsyncSteps, _ vm.Args) { as.Success(); as.Error("X") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
			root := l.NewSteps()
			root.Add(tc.fn)
			f := root.Promise()
			l.RunUntilIdle()
			if _, err := f.Wait(t.Context()); !errors.Is(err, vm.ErrInternal) {
				t.Fatalf("err = %v, want InternalError", err)
			}
		})
	}
}
