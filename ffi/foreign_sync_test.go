//go:build cgo

package ffi_test

import (
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/cengine"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
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

// A FutoInSync implemented in C, synced on through its Go adapter's own
// Sync method with a handle on a foreign flow, goes to the engine's
// addSync, as Sync through the handle does: with this engine, which has
// none, that is a misuse that says so.
func TestForeignFlowSyncsCPrimitiveDirectly(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			ffi.WrapSync(ctest.CMutex()).Sync(as, fsay("never"), nil)
		}, func(as vm.AsyncSteps, code string) {
			cengine.Say("handled " + code + ": " + cengine.LastErrorInfo())
		})
	})
	run.expect(t, cengine.Failed, vm.InternalError,
		"handled InternalError: Sync: the foreign AsyncSteps does not implement it")
}

// A FutoInSync record that was released stays expired while other records
// are made: a C library that kept it reaches no other primitive.
func TestReleasedSyncRecordIsNotReused(t *testing.T) {
	m1, m2 := vm.NewMutex(1, 0), vm.NewMutex(1, 0)
	p1 := ffi.Sync(m1)
	ffi.ReleaseSync(p1)
	p2 := ffi.Sync(m2)
	defer ffi.ReleaseSync(p2)
	if s := ffi.WrapSync(p1); s != nil {
		t.Fatalf("a released record names %p (the new primitive is %p)", s, m2)
	}
	if ffi.WrapSync(p2) != vm.ISync(m2) {
		t.Fatal("the new record does not name its primitive")
	}
}

// A Go step of a foreign flow that NewInstance made frees its own root:
// its cancel handler runs and adds steps, its function goes on and
// succeeds with values and a Go value; every late call is the engine's
// misuse, the flow ends once, and Go holds nothing more for the engine.
func TestForeignInstanceFreedFromItsOwnStep(t *testing.T) {
	cengine.Reset()
	live := ffi.ForeignLive()
	p := cengine.NewRoot()
	root := ffi.Wrap(p)
	inst := root.NewInstance()
	type payload struct{ n int }
	inst.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(as vm.AsyncSteps) {
			cengine.Say("canceled")
			as.Add(fsay("never"))
			inst.Add(fsay("never either"))
		})
		inst.Add(fsay("not while running"))
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			inst.Release()
			cengine.Say("released")
			as.Success(vm.Str("gone"), vm.Any(&payload{1}))
			as.Add(fsay("never"))
		})
	})
	inst.Add(fsay("next"))
	inst.Execute()
	cengine.Run()
	if inst.Valid() {
		t.Error("a freed instance is valid")
	}
	cengine.Free(p)
	cengine.Run()
	expectLines(t, "trace", cengine.Trace(), "canceled", "released")
	if n := ffi.ForeignLive(); n != live {
		t.Errorf("Go holds %d objects for the engine, want %d", n, live)
	}
}
