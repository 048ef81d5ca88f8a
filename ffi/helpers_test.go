//go:build cgo

package ffi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

func newLoop() (*vm.Loop, *vm.ManualClock) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	return vm.NewLoop(vm.WithClock(clk)), clk
}

// say returns a Go step that prints line to the trace the C code prints to.
func say(line string) vm.ExecFunc {
	return func(vm.AsyncSteps, vm.Args) { ctest.Say(line) }
}

// takeTrace returns the trace and starts a new one.
func takeTrace() []string {
	t := ctest.Trace()
	ctest.ResetTrace()
	return t
}

func expectLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Fatalf("%s: trace mismatch\n--- got ---\n%s\n--- want ---\n%s", what, g, w)
	}
}

// runFor runs l on a goroutine of its own until f resolves, as a program
// that completes steps from other threads does, and returns f's error once
// Run has returned.
func runFor(l *vm.Loop, f *vm.Future) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	_, err := f.Wait(ctx)
	cancel()
	<-done
	return err
}

// result returns the outcome of a flow whose Future must have resolved.
func result(t *testing.T, f *vm.Future) (vm.Args, error) {
	t.Helper()
	select {
	case <-f.Done():
	default:
		t.Fatal("the flow has not completed")
	}
	return f.Wait(context.Background())
}

// expectError checks that a flow failed with code and info.
func expectError(t *testing.T, f *vm.Future, code, info string) {
	t.Helper()
	_, err := result(t, f)
	e, ok := err.(*vm.Error)
	if !ok || e.Code != code || e.Info != info {
		t.Fatalf("flow error = %#v, want %s: %s", err, code, info)
	}
}

// expectObjectCleanupNow fails t unless exactly one cleanup of a custom
// object has run since before, without waiting for the collector.
func expectObjectCleanupNow(t *testing.T, before int) {
	t.Helper()
	if n := ctest.ObjectCleanups() - before; n != 1 {
		t.Errorf("%d cleanups, want 1", n)
	}
}
