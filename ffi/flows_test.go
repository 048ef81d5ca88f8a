//go:build cgo

package ffi_test

import (
	"strings"
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// Scenarios of flows.c.
const (
	flowPassArgs = iota + 1
	flowValuesAfterSuccess
	flowCodeAfterSuccess
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

// The values a C step receives, and the code its error handler receives,
// stay readable for the whole call, also once success has ended the step
// and the root's memory that step held has been taken again.
func TestLentValuesOutliveTheStep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		which int
		want  string
	}{
		{"step", flowValuesAfterSuccess, "after success: 100 " + strings.Repeat("x", 100)},
		{"handler", flowCodeAfterSuccess, "code after success: CodeOfAnErrorLongerThanAFewBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			captureFrom(t, func(root vm.AsyncSteps) { ctest.Flow(ffi.Binary(root), tc.which) })
			expectLines(t, "C", takeTrace(), tc.want)
		})
	}
}

// A C state variable whose allocate function cancels, frees or fails
// its root through the root's record is cleaned up once, and, the root
// freed, lands in no State: not in that of the next root the pool hands
// out.
func TestStateAllocateEndsRoot(t *testing.T) {
	for mode, name := range []string{"cancel", "free", "error"} {
		t.Run(name, func(t *testing.T) {
			l, _ := newLoop()
			host := l.NewSteps()
			ctest.FlowEnding(ffi.Binary(host), mode)
			l.RunUntilIdle()
			next := l.NewSteps()
			if v, ok := next.State().Get("ending"); ok {
				t.Errorf("the next root's State holds %v", v)
			}
			ctest.FlowFree()
			l.RunUntilIdle()
			if a, c := ctest.FlowCounts(); a != 1 || c != 1 {
				t.Errorf("allocations %d, cleanups %d; want 1, 1", a, c)
			}
			next.Release()
			host.Release()
		})
	}
}
