//go:build cgo

package ffi_test

import (
	"fmt"
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
	flowNestedRepeat
	flowHandlerControl
	flowParallelCancelAdds
	flowParallelCleanupAdds
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

// Loops, error handlers and parallel steps driven from C, with stack
// memory in each: loop control from a sub-step of an inner loop and from
// error handlers reaches the labelled loop, stack memory is cleaned up as
// each iteration, handler and branch ends, innermost first, and a branch
// a cancel handler or stack cleanup adds while the parallel step unwinds
// does not run. Each flow completes once and leaves nothing behind.
func TestLoopsAndParallelFromC(t *testing.T) {
	var inner []string
	for i := range 3 {
		inner = append(inner, fmt.Sprintf("cleanup inner %d.0", i), fmt.Sprintf("cleanup inner %d.1", i), fmt.Sprintf("cleanup outer %d", i))
	}
	var handled []string
	for i := range 3 {
		handled = append(handled, "handler Fail", "cleanup handler", fmt.Sprintf("cleanup iteration %d", i))
	}
	parallel := []string{"cleanup B", "cancel A", "cleanup A", "parallel handler Boom"}
	for _, tc := range []struct {
		name  string
		which int
		want  []string
	}{
		{"nested", flowNestedRepeat, inner},
		{"handler", flowHandlerControl, handled},
		{"cancel-adds", flowParallelCancelAdds, parallel},
		{"cleanup-adds", flowParallelCleanupAdds, parallel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, _ := newLoop()
			base := l.Stats()
			root := l.NewSteps()
			ctest.Flow(ffi.Binary(root), tc.which)
			root.Add(say("after"))
			f := root.Promise()
			l.RunUntilIdle()
			if _, err := result(t, f); err != nil {
				t.Fatal(err)
			}
			expectLines(t, "C", takeTrace(), append(tc.want, "after")...)
			root.Release()
			if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || s.LiveRoots != base.LiveRoots {
				t.Errorf("stats %+v, baseline %+v", s, base)
			}
		})
	}
}
