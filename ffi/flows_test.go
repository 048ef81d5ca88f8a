//go:build cgo

package ffi_test

import (
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// Scenarios of flows.c.
const (
	flowPassArgs = iota + 1
)

// A C step may succeed with the FutoInArgs it received, cast to non-const,
// as they are: success empties them, also when there were none.
func TestSuccessWithReceivedArgs(t *testing.T) {
	got := captureFrom(t, func(root vm.AsyncSteps) {
		ctest.Flow(ffi.Binary(root), flowPassArgs)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Str("two")) })
		ctest.Flow(ffi.Binary(root), flowPassArgs)
	})
	if len(got) != 2 || got[0].Int() != 1 || got[1].String() != "two" {
		t.Fatalf("values = %v", got)
	}
}
