//go:build cgo

package ffi_test

import (
	"fmt"
	"time"
	"unsafe"

	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// Bad input from C fails the C step's flow with InternalError and a
// descriptive ErrorInfo, as the same misuse from Go does, and leaves the
// other flows of the loop alone.
func TestMisuseFromCStep(t *testing.T) {
	const gone = " through a FutoInAsyncSteps whose step or root has ended"
	for _, tc := range []struct {
		scenario   int
		name       string
		code, info string
	}{
		{1, "NULL bsi", vm.InternalError, "add with a NULL FutoInAsyncSteps"},
		{2, "NULL step function", vm.InternalError, "add with a NULL step function"},
		{3, "unknown type tag", vm.InternalError, "success: argument 0: unknown type tag 0x3f"},
		{4, "length beyond the data", vm.InternalError, "success: argument 1: string length 10 is beyond its data (a NUL at 3)"},
		{5, "handle of a finished step", vm.InternalError, "success" + gone},
		{6, "freed root", vm.InternalError, "add" + gone},
		{7, "success after add", vm.InternalError, "Success after sub-steps were added: the step completes when they do"},
		{8, "calls after handle_error", "First", "the first error"},
		{9, "foreign FutoInAsyncSteps", vm.InternalError, "add with a FutoInAsyncSteps that is not stepvm's"},
		{10, "NULL loop body", vm.InternalError, "loop with a NULL body"},
		{11, "break outside of a loop", vm.InternalError, "Break outside of a loop"},
		{12, "accessor of a finished step", vm.InternalError, "add" + gone},
		{13, "NULL array", vm.InternalError, "success: argument 0: NULL array of length 5"},
		{14, "array of strings", vm.InternalError, "success: argument 0: unknown type tag 0x12 (arrays of base type 2 are not supported)"},
		{15, "NULL cancel handler", vm.InternalError, "setCancel with a NULL cancel handler"},
		{16, "NULL error code", vm.InternalError, "handle_error with a NULL code"},
		{17, "success twice", vm.InternalError, "success" + gone},
		{18, "execute on a step", vm.InternalError, "Execute on a handle that is not a live root"},
		{19, "addSync without a FutoInSync", vm.InternalError, "addSync with a NULL FutoInSync"},
		{20, "NULL allocate", vm.InternalError, "stateVariable v with a NULL allocate function"},
		{21, "NULL scheduled callback", vm.InternalError, "sched_immediate or sched_deferred with a NULL callback"},
		{22, "NULL repeat body", vm.InternalError, "repeat with a NULL body"},
		{25, "type pointer that is an integer", vm.InternalError, "success: argument 1: type at address 0x10, which is not a pointer"},
		{26, "type pointer that is an integer, refused", vm.InternalError, "success" + gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, _ := newLoop()
			healthy := l.NewSteps()
			healthy.Repeat(3, func(as vm.AsyncSteps, i int) { ctest.AddSay(ffi.Binary(as), "healthy") })
			hf := healthy.Promise()

			root := l.NewSteps()
			ctest.Misuse(ffi.Binary(root), tc.scenario, 0)
			root.Add(say("after the misuse"))
			f := root.Promise()
			l.RunUntilIdle()

			expectError(t, f, tc.code, tc.info)
			if _, err := result(t, hf); err != nil {
				t.Fatalf("the healthy flow failed: %v", err)
			}
			expectLines(t, "trace", takeTrace(), "healthy", "healthy", "healthy")
			root.Release()
			healthy.Release()
		})
	}
}

// After handle_error, a C function's calls do nothing, but for those that
// let go of something: a free of a root it made, and a sched_cancel, are
// carried out. Ignored, the root would be left to no one and the callback
// would run after the program canceled it.
func TestLettingGoAfterError(t *testing.T) {
	for _, tc := range []struct {
		scenario int
		name     string
		line     string
	}{
		{23, "free", "freed after the error: valid 0"},
		{24, "sched_cancel", "canceled after the error: valid 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, clk := newLoop()
			root := l.NewSteps()
			ctest.Misuse(ffi.Binary(root), tc.scenario, 0)
			f := root.Promise()
			l.RunUntilIdle()
			clk.Advance(time.Second)
			l.RunUntilIdle()
			expectError(t, f, "First", "the first error")
			expectLines(t, "trace", takeTrace(), tc.line)
			root.Release()
			if s := l.Stats(); s.LiveRoots != 0 || s.Timers != 0 {
				t.Fatalf("%d live roots and %d timers left, want none", s.LiveRoots, s.Timers)
			}
		})
	}
}

// A handle of one loop's task, canceled through a record of another loop
// driven by the same goroutine, cancels that task (it used to zero the
// handle and leave the callback to run).
func TestSchedCancelThroughAnotherLoopsRecord(t *testing.T) {
	ctest.ResetTrace()
	la, clk := newLoop()
	lb, _ := newLoop()
	ra, rb := la.NewSteps(), lb.NewSteps()
	ctest.AddCross(ffi.Binary(ra), ctest.CrossCancel, ffi.Binary(rb))
	f := ra.Promise()
	la.RunUntilIdle()
	clk.Advance(time.Second)
	la.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	expectLines(t, "trace", takeTrace(), "valid through the other record 1", "canceled through the other record: valid 0")
	if s := la.Stats(); s.Timers != 0 {
		t.Fatalf("%d timers left, want none", s.Timers)
	}
	ra.Release()
	rb.Release()
}

// A C step of one loop that calls through a record of a loop another
// goroutine drives fails with InternalError, and that loop's flow is not
// touched. A sched_cancel through such a record still cancels the task of
// the step's own loop that its handle names: a canceled callback must not
// run.
func TestCallsThroughRecordOfLoopElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		mode       int
	}{
		{"add", "add through a FutoInAsyncSteps of another loop, whose goroutine this is not", ctest.CrossAdd},
		{"sched_is_valid", "sched_is_valid through a FutoInAsyncSteps of another loop, whose goroutine this is not", ctest.CrossCancel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			rbs := make(chan vm.AsyncSteps)
			stop := make(chan struct{})
			done := make(chan error)
			go func() {
				lb, _ := newLoop()
				rb := lb.NewSteps()
				ctest.AddWait(ffi.Binary(rb))
				fb := rb.Promise()
				lb.RunUntilIdle()
				rbs <- rb
				<-stop
				lb.RunUntilIdle()
				if s := lb.Stats(); s.RunningRoots != 1 {
					done <- fmt.Errorf("the other loop has %d running roots, want its waiting one", s.RunningRoots)
					return
				}
				rb.Cancel()
				lb.RunUntilIdle()
				<-fb.Done()
				rb.Release()
				done <- nil
			}()
			rb := <-rbs
			la, clk := newLoop()
			ra := la.NewSteps()
			ctest.AddCross(ffi.Binary(ra), tc.mode, ffi.Binary(rb))
			f := ra.Promise()
			la.RunUntilIdle()
			clk.Advance(time.Second)
			la.RunUntilIdle()
			close(stop)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			expectError(t, f, vm.InternalError, tc.info)
			want := []string{"added through the other record"}
			if tc.mode == ctest.CrossCancel {
				want = []string{"valid through the other record 0", "canceled through the other record: valid 0"}
			}
			expectLines(t, "trace", takeTrace(), want...)
			ra.Release()
		})
	}
}

// A record stays detectably stale while hundreds of other records are
// released and reused after it.
func TestStaleRecordAfterReuse(t *testing.T) {
	l, _ := newLoop()
	for range 3 { // fill the loop's quarantine
		root := l.NewSteps()
		ctest.AddNops(ffi.Binary(root), 300)
		root.Execute()
		l.RunUntilIdle()
		root.Release()
	}
	root := l.NewSteps()
	ctest.Misuse(ffi.Binary(root), 5, 400)
	f := root.Promise()
	l.RunUntilIdle()
	expectError(t, f, vm.InternalError, "success through a FutoInAsyncSteps whose step or root has ended")
}

// Misuse from C code that Go calls directly, outside any step, has no
// running flow to fail. What ffi finds wrong itself (a NULL or foreign
// record, a NULL step function) is ignored there, and the root stays
// usable: ffi cannot tell whether such a call runs on the loop's goroutine.
// What the VM finds wrong in a call on the root it is setting up (success
// or handle_error through the root's record) fails the root's next run, as
// the same misuse from Go does.
func TestMisuseOutsideSteps(t *testing.T) {
	const breakInfo = "Break or Continue outside of a step's execution"
	for scenario, info := range map[int]string{
		1: "", // add through a NULL record
		2: "", // add with a NULL step function
		3: "Success through a root's handle: only a running step can succeed",
		4: breakInfo,
		5: "", // add through a record of another implementation
		6: "Error through a root's handle: only a running step can fail",
		7: breakInfo,
	} {
		ctest.ResetTrace()
		l, _ := newLoop()
		root := l.NewSteps()
		ctest.MisuseOutside(ffi.Binary(root), scenario)
		root.Add(say("still fine"))
		f := root.Promise()
		l.RunUntilIdle()
		if info == "" {
			if _, err := result(t, f); err != nil {
				t.Fatalf("scenario %d: %v", scenario, err)
			}
			expectLines(t, "trace", takeTrace(), "still fine")
			continue
		}
		expectError(t, f, vm.InternalError, info)
		expectLines(t, "trace", takeTrace())
	}
}

// C code that a Go step calls directly cannot unwind the step: breakLoop
// through the iteration's record there has no ffi call to carry it to the
// VM. The flow fails with InternalError rather than loop for good.
func TestBreakFromDirectCallFailsFlow(t *testing.T) {
	l, _ := newLoop()
	root := l.NewSteps()
	root.Loop(func(as vm.AsyncSteps) {
		ctest.Say("iteration")
		ctest.MisuseOutside(ffi.Binary(as), 4) // breakLoop
	})
	ctest.ResetTrace()
	f := root.Promise()
	l.RunUntilIdle()
	expectError(t, f, vm.InternalError, "the step's function returned after Error, Break or Continue: "+
		"their panic did not reach the VM (a recover must re-panic what IsUnwinding reports)")
	expectLines(t, "trace", takeTrace(), "iteration")
	root.Release()
}

// So do handle_error from C that a plain Go step calls directly (the step
// would otherwise succeed implicitly) and continueLoop from C that a Repeat
// body calls (the loop would otherwise run its three iterations).
func TestErrorAndContinueFromDirectCallFailFlow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(root vm.AsyncSteps)
		trace []string
	}{
		{"handle_error", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ctest.Say("step")
				ctest.MisuseOutside(ffi.Binary(as), 6)
			})
		}, []string{"step"}},
		{"continueLoop", func(root vm.AsyncSteps) {
			root.Repeat(3, func(as vm.AsyncSteps, _ int) {
				ctest.Say("iteration")
				ctest.MisuseOutside(ffi.Binary(as), 7)
			})
		}, []string{"iteration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newLoop()
			root := l.NewSteps()
			tc.build(root)
			root.Add(say("after"))
			ctest.ResetTrace()
			f := root.Promise()
			l.RunUntilIdle()
			expectError(t, f, vm.InternalError, "the step's function returned after Error, Break or Continue: "+
				"their panic did not reach the VM (a recover must re-panic what IsUnwinding reports)")
			expectLines(t, "trace", takeTrace(), tc.trace...)
			root.Release()
		})
	}
}

// A record outlives what it names as a record: calls through it are
// detected, never acted on.
func TestRecordExpiry(t *testing.T) {
	l, _ := newLoop()
	root := l.NewSteps()
	var step unsafe.Pointer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		step = ffi.Binary(as)
		if !ctest.IsValid(step) || ffi.Wrap(step) != as {
			t.Error("a running step's record is not valid")
		}
	})
	p := ffi.Binary(root)
	if ffi.Binary(root) != p {
		t.Error("a root has two records")
	}
	root.Execute()
	l.RunUntilIdle()
	if ctest.IsValid(step) || ffi.Wrap(step).Valid() {
		t.Error("the record of a finished step is still valid")
	}
	if !ctest.IsValid(p) || ffi.Wrap(p) != root {
		t.Error("the root's record is not valid")
	}
	root.Release()
	if ctest.IsValid(p) {
		t.Error("the record of a released root is still valid")
	}
	if ffi.Binary(root) != nil || ffi.Binary(vm.AsyncSteps{}) != nil {
		t.Error("Binary of an invalid handle is not nil")
	}
	if ffi.Wrap(nil).Valid() || ffi.Wrap(ctest.Foreign()).Valid() {
		t.Error("Wrap of nil or of a foreign FutoInAsyncSteps is valid")
	}
}
