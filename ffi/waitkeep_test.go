//go:build cgo

package ffi_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// A flow whose C step waits for an external event stays alive while C may
// complete it, even when Go keeps no handle of it: C's record of the step
// is the only reference, and the garbage collector cannot see it (a Go
// vm.Resumer keeps its flow the same way).
func TestWaitingCStepKeepsItsFlow(t *testing.T) {
	l := vm.NewLoop()
	defer l.Close()
	var got string
	f := func() *vm.Future {
		root := l.NewSteps()
		ctest.AddWait(ffi.Binary(root))
		root.Add(func(_ vm.AsyncSteps, args vm.Args) { got = args.String(0) })
		return root.Promise()
	}() // the program keeps no handle of the root
	l.RunUntilIdle()
	rec := ctest.Waiting()
	for range 20 {
		runtime.GC()
		runtime.Gosched()
		l.RunUntilIdle() // applies what root cleanups would have posted
	}
	if s := l.Stats(); s.LiveRoots != 1 || s.RunningRoots != 1 {
		t.Fatalf("the waiting flow is gone: %+v", s)
	}
	ctest.Complete(rec, "late")
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatal("the flow did not complete")
	}
	if _, err := f.Wait(context.Background()); err != nil || got != "late" {
		t.Fatalf("flow = %v, %q; want success with \"late\"", err, got)
	}
}

// The last step of a Go flow, which waits with a timeout, a cancel handler
// and stack memory, completed by C through its record between passes, on
// the loop's goroutine (complete's in-line end of a run is not for a frame
// with stack memory, which every record's frame has): the flow ends once
// with the value, its timer stops, its cancel handler does not run, its
// stack memory's destroy function runs once, the record turns stale, and
// the loop is back to its baseline. A late completion through the record
// finds it stale and changes nothing.
func TestLastStepCompletedThroughRecord(t *testing.T) {
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	base := l.Stats()
	var rec unsafe.Pointer
	var got string
	destroyed, canceled := 0, 0
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			rec = ffi.Binary(as)
			as.StackRaw(8, func(unsafe.Pointer) { destroyed++ })
			as.SetCancel(func(vm.AsyncSteps) { canceled++ })
			as.SetTimeout(time.Second)
		})
	}, func(as vm.AsyncSteps, code string) { got = "handler " + code })
	f := root.Promise()
	l.RunUntilIdle()
	if s := l.Stats(); s.Timers != 1 || rec == nil {
		t.Fatalf("the step does not wait: %+v", s)
	}
	ctest.Complete(rec, "through the record")
	l.RunUntilIdle()
	args, err := result(t, f)
	if err != nil || args.String(0) != "through the record" || got != "" {
		t.Fatalf("flow = %v, %v, %q", err, args, got)
	}
	if destroyed != 1 || canceled != 0 {
		t.Errorf("destroy ran %d times, cancel handler %d; want 1 and 0", destroyed, canceled)
	}
	if ctest.IsValid(rec) {
		t.Error("the record of the ended step is valid")
	}
	ctest.Complete(rec, "late")
	clk.Advance(2 * time.Second)
	l.RunUntilIdle()
	root.Release()
	l.RunUntilIdle()
	if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || s.LiveRoots != base.LiveRoots {
		t.Errorf("stats: %+v; baseline %+v", s, base)
	}
	if destroyed != 1 || canceled != 0 || ffi.RecordsInUse(l) != 0 {
		t.Errorf("after the end: destroy %d, cancel %d, records in use %d", destroyed, canceled, ffi.RecordsInUse(l))
	}
}

// A Go step that waits through its handle (SetTimeout, WaitExternal) and
// hands C its record is completed by C from another thread: the loop takes
// the step's Resumer when the completion arrives, as C's waitExternal
// would have made the record take it. Success and handle_error alike; a
// late one, after the step ended, changes nothing. The completion used to
// be refused, unheard, and the flow waited for its timeout.
func TestGoStepCompletedThroughRecordFromAnotherThread(t *testing.T) {
	for _, how := range []string{"success", "handle_error", "WaitExternal"} {
		t.Run(how, func(t *testing.T) {
			clk := vm.NewManualClock(time.Unix(0, 0))
			l := vm.NewLoop(vm.WithClock(clk))
			var rec unsafe.Pointer
			var got string
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				rec = ffi.Binary(as)
				if how == "WaitExternal" {
					as.WaitExternal()
				} else {
					as.SetTimeout(time.Second)
				}
			}, func(as vm.AsyncSteps, code string) {
				got = code
				as.Success(vm.Str("handled"))
			})
			f := root.Promise()
			l.RunUntilIdle()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if how == "handle_error" {
					ctest.Fail(rec, "Remote")
				} else {
					ctest.Complete(rec, "from afar")
				}
			}()
			<-done
			l.RunUntilIdle()
			args, err := result(t, f)
			want, wantCode := "from afar", ""
			if how == "handle_error" {
				want, wantCode = "handled", "Remote"
			}
			if err != nil || args.String(0) != want || got != wantCode {
				t.Fatalf("flow = %v, %v, handler saw %q; want %q, %q", err, args, got, want, wantCode)
			}
			go func() { ctest.Complete(rec, "late") }()
			clk.Advance(2 * time.Second)
			l.RunUntilIdle()
			root.Release()
			l.RunUntilIdle()
			if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || ffi.RecordsInUse(l) != 0 {
				t.Errorf("stats %+v, records in use %d", s, ffi.RecordsInUse(l))
			}
		})
	}
}

// C completes from another thread, with a custom object, through a record
// that names no step (a root's, a parallel accessor's) of a flow that
// waits: the flow fails with InternalError, as that of a Go step that does
// not wait does, whether the thread runs no C call or a C step of another
// loop. The completion used to go to the loop, which found no step to
// take a Resumer of and dropped it, unheard: the flow waited on. From
// another loop's C step, it had failed that step before the loop began to
// take such completions.
func TestCompletionFromAfarThroughRecordOfNoStep(t *testing.T) {
	for _, rec := range []string{"root", "accessor"} {
		for _, from := range []string{"thread", "C step of another loop"} {
			t.Run(rec+", "+from, func(t *testing.T) {
				l, _ := newLoop()
				before := ctest.ObjectCleanups()
				var p unsafe.Pointer
				root := l.NewSteps()
				if rec == "root" {
					p = ffi.Binary(root)
					root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
				} else {
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						par := as.Parallel()
						p = ffi.Binary(par)
						par.Add(func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
					})
				}
				f := root.Promise()
				l.RunUntilIdle()
				done := make(chan error)
				go func() {
					if from == "thread" {
						ctest.CompleteObject(p, p)
						done <- nil
						return
					}
					lb, _ := newLoop()
					rb := lb.NewSteps()
					ctest.AddRefusedSuccess(ffi.Binary(rb), ctest.RefusedThroughTarget, p)
					fb := rb.Promise()
					lb.RunUntilIdle()
					_, err := fb.Wait(context.Background())
					done <- err
				}()
				if err := <-done; err != nil {
					t.Fatalf("the other loop's C step failed: %v", err)
				}
				l.RunUntilIdle()
				select {
				case <-f.Done():
				default:
					t.Fatal("the flow waits on: the completion went unheard")
				}
				if _, err := f.Wait(context.Background()); !errors.Is(err, vm.ErrInternal) {
					t.Fatalf("flow = %v, want InternalError", err)
				}
				root.Release()
				expectObjectCleanupNow(t, before) // by the loop that refused the completion
				if s := l.Stats(); s.RunningRoots != 0 || ffi.RecordsInUse(l) != 0 {
					t.Errorf("stats %+v, records in use %d", s, ffi.RecordsInUse(l))
				}
			})
		}
	}
}
