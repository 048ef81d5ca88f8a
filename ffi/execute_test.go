//go:build cgo

package ffi_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// An execute that stepvm refuses, as misuse, because the root runs does
// not take over the handler of unhandled errors of the run it refused: the
// handler the accepted execute gave still learns how that run ends.
func TestRefusedExecuteKeepsHandler(t *testing.T) {
	for _, fromStep := range []bool{true, false} {
		ctest.ResetTrace()
		l, clk := newLoop()
		target := l.NewSteps()
		target.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(10 * time.Millisecond) })
		p := ffi.Binary(target)
		ctest.ExecuteWithHandler(p)
		l.RunUntilIdle()
		if fromStep {
			other := l.NewSteps()
			ctest.AddExecute(ffi.Binary(other), p)
			f := other.Promise()
			l.RunUntilIdle()
			expectError(t, f, vm.InternalError, "Execute on a root that is still running")
			clk.Advance(10 * time.Millisecond)
			l.RunUntilIdle()
			expectLines(t, "from a step", takeTrace(), "unhandled: Timeout")
		} else {
			ctest.ExecuteRefused(p) // C code Go calls, outside any step: the run fails
			l.RunUntilIdle()
			expectLines(t, "outside steps", takeTrace(), "unhandled: InternalError")
		}
		if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 {
			t.Errorf("stats: %+v", s)
		}
	}
}
