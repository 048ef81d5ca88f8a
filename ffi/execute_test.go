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

// The handler of unhandled errors that execute gave C learns how the run
// that execute started ends, once: a later run that Go executes (or
// starts with Promise) gave it no handler, and its failure is not
// reported to C's, whose data C may have freed by then. A handler that
// executes the root again gives the retried run a handler of its own.
func TestUnhandledHandlerServesItsRun(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	root := l.NewSteps()
	p := ffi.Binary(root)
	ctest.AddFail(p, "Boom", false)
	ctest.ExecuteWithHandler(p)
	l.RunUntilIdle()
	expectLines(t, "C's run", takeTrace(), "C fails with Boom", "unhandled: Boom")

	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("FromGo") })
	root.Execute()
	l.RunUntilIdle()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("FromPromise") })
	f := root.Promise()
	l.RunUntilIdle()
	expectError(t, f, "FromPromise", "")
	expectLines(t, "Go's runs", takeTrace())

	ctest.AddFail(p, "Boom", false)
	ctest.ExecuteRetrying(p)
	l.RunUntilIdle()
	expectLines(t, "a retry", takeTrace(), "C fails with Boom", "unhandled: Boom", "unhandled: Again")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("FromGo") })
	root.Execute()
	l.RunUntilIdle()
	expectLines(t, "Go's run after the retry", takeTrace())
	if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 {
		t.Errorf("stats: %+v", s)
	}
	root.Release()
	if s := l.Stats(); s.ArenaInUse != 0 {
		t.Errorf("stats after release: %+v", s)
	}
}

// The same holds for a run that C executed and that ended without an
// unhandled error: a later run Go executes does not report to the handler.
func TestUnhandledHandlerAfterCleanEnd(t *testing.T) {
	for _, how := range []string{"Success", "Cancel"} {
		ctest.ResetTrace()
		l, _ := newLoop()
		root := l.NewSteps()
		p := ffi.Binary(root)
		if how == "Cancel" {
			ctest.AddWait(p)
		} else {
			ctest.AddNop(p)
		}
		ctest.ExecuteWithHandler(p)
		l.RunUntilIdle()
		ffi.EndRunBy(l, nil, root, how)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("FromGo") })
		root.Execute()
		l.RunUntilIdle()
		expectLines(t, how+", then Go's run", takeTrace())
		root.Release()
	}
}
