package fuzz

import (
	"testing"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// TestTypedStacksCoverSizes checks that the harness has a type for vm.Stack
// of every size a program may ask.
func TestTypedStacksCoverSizes(t *testing.T) {
	if len(typedStacks) != len(prog.StackSizes) {
		t.Errorf("%d types of vm.Stack for %d sizes", len(typedStacks), len(prog.StackSizes))
	}
	for _, n := range prog.StackSizes {
		if _, ok := typedStacks[n]; !ok {
			t.Errorf("no type of %d bytes for vm.Stack", n)
		}
	}
}
