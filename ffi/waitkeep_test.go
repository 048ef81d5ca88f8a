//go:build cgo

package ffi_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// A flow whose C step waits for an external event stays alive while C may
// complete it, even when Go keeps no handle of it: C's record of the step
// is the only reference, and the garbage collector cannot see it (a Go
// vm.Resumer keeps its flow the same way).
func TestWaitingCStepKeepsItsFlow(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	var got string
	f := func() *vm.Future {
		root := l.NewSteps()
		ctest.AddWait(ffi.Binary(root))
		root.Add(func(_ vm.AsyncSteps, args vm.Args) { got = args.String(0) })
		return root.Promise()
	}() // the program keeps no handle of the root
	l.RunUntilIdle()
	rec := ctest.Waiting()
	for range 20 {
		runtime.GC()
		runtime.Gosched()
		l.RunUntilIdle() // applies what root cleanups would have posted
	}
	if s := l.Stats(); s.LiveRoots != 1 || s.RunningRoots != 1 {
		t.Fatalf("the waiting flow is gone: %+v", s)
	}
	ctest.Complete(rec, "late")
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatal("the flow did not complete")
	}
	if _, err := f.Wait(context.Background()); err != nil || got != "late" {
		t.Fatalf("flow = %v, %q; want success with \"late\"", err, got)
	}
}
