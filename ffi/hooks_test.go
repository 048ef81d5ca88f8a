//go:build cgo

package ffi

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// rootReleased, the hook the VM calls as a root is released, does its
// part exactly once: a second call (a root freed from C, then released
// again) changes nothing.
func TestRootReleasedOnce(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	p := Binary(root)
	ctest.ResetCounters()
	ctest.Features(p, 1)
	root.Execute()
	l.RunUntilIdle()
	rootReleased(root)
	if n := ctest.Counter(2); n != 1 {
		t.Fatalf("state cleanups = %d, want 1", n)
	}
	if ctest.IsValid(p) {
		t.Fatal("the record of a released root is still valid")
	}
	root.Release() // the VM calls rootReleased again
	rootReleased(root)
	if n := ctest.Counter(2); n != 1 {
		t.Fatalf("state cleanups = %d after more releases, want 1", n)
	}
}
