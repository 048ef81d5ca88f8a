//go:build cgo

package ffi_test

import (
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/cengine"
	"github.com/stepvm/stepvm/vm"
)

// A foreign engine that calls the lock of a stepvm primitive itself (as its
// addSync would) is refused: the step fails with InternalError rather than
// entering a section nothing guards.
func TestForeignEngineLocksGoPrimitive(t *testing.T) {
	m := ffi.Sync(vm.NewMutex(1, vm.Unbounded))
	defer ffi.ReleaseSync(m)
	run := runForeign(t, func(root vm.AsyncSteps) {
		cengine.AddLock(ffi.Binary(root), m, true)
		root.Add(fsay("inside the section"))
	})
	run.expect(t, cengine.Failed, vm.InternalError, "lock returned", "unlock returned")
}
