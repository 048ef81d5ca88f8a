//go:build cgo

package ffi_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// success takes its values whether it is accepted or refused: a custom
// object C passes through a NULL or stale record, or after handle_error in
// the same call, is taken (the FutoInArgs emptied) and its cleanup runs
// exactly once, at once. Refused, such values used to be left in the
// caller's FutoInArgs, and their cleanups never ran. The commonest case is
// a C library's I/O completing after the step timed out, on a thread of
// its own. A success accepted from another thread that the loop drops, as
// the step ended before the loop took it, has the object cleaned up as the
// loop drops it (it used to wait for the garbage collector).
func TestRefusedSuccessTakesValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, l *vm.Loop, clk *vm.ManualClock) bool // reports what the C code saw: taken
	}{
		{"NULL record, no call", func(t *testing.T, l *vm.Loop, _ *vm.ManualClock) bool {
			root := l.NewSteps()
			defer root.Release()
			return ctest.CompleteObject(ffi.Binary(root), nil)
		}},
		{"stale record, between passes", func(t *testing.T, l *vm.Loop, _ *vm.ManualClock) bool {
			root := l.NewSteps()
			ctest.AddWait(ffi.Binary(root))
			root.Execute()
			l.RunUntilIdle()
			rec := ctest.Waiting()
			root.Cancel()
			l.RunUntilIdle()
			root.Release()
			return ctest.CompleteObject(rec, rec)
		}},
		{"late, from another thread, after a timeout", func(t *testing.T, l *vm.Loop, clk *vm.ManualClock) bool {
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetTimeout(time.Second)
				ctest.AddWait(ffi.Binary(as))
			})
			f := root.Promise()
			l.RunUntilIdle()
			rec := ctest.Waiting()
			clk.Advance(2 * time.Second)
			l.RunUntilIdle()
			expectError(t, f, vm.Timeout, "")
			root.Release()
			taken := make(chan bool)
			go func() { taken <- ctest.CompleteObject(rec, rec) }()
			return <-taken
		}},
		{"accepted from another thread, then dropped as the step ends first", func(t *testing.T, l *vm.Loop, _ *vm.ManualClock) bool {
			root, f, rec := waitingCStep(l)
			taken := make(chan bool)
			go func() { taken <- ctest.CompleteObject(rec, rec) }()
			ok := <-taken
			root.Cancel() // before the loop takes the completion, which it then drops
			l.RunUntilIdle()
			if _, err := result(t, f); err != vm.ErrCanceled {
				t.Fatalf("flow error %v, want ErrCanceled", err)
			}
			root.Release()
			return ok
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clk := newLoop()
			base := l.Stats()
			before := ctest.ObjectCleanups()
			taken := tc.run(t, l, clk)
			l.RunUntilIdle()
			if n := ctest.ObjectCleanups() - before; !taken || n != 1 {
				t.Errorf("taken %v, %d cleanups; want taken, 1", taken, n)
			}
			if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || ffi.RecordsInUse(l) != 0 {
				t.Errorf("stats %+v, baseline %+v, records in use %d", s, base, ffi.RecordsInUse(l))
			}
		})
	}
}

// A C step whose success is refused (after its handle_error, through a
// NULL or stale record, with a value it cannot read) loses its values all
// the same: a custom object of
// its own is cleaned up once, at once; the values it was lent (a string, a
// custom object), passed back, stay stepvm's, untouched, and the custom
// object among them is cleaned up once, as the step returns without having
// passed it on.
func TestRefusedSuccessInCStep(t *testing.T) {
	var stale unsafe.Pointer
	{
		l, _ := newLoop()
		root := l.NewSteps()
		ctest.AddWait(ffi.Binary(root))
		root.Execute()
		l.RunUntilIdle()
		stale = ctest.Waiting()
		root.Cancel()
		l.RunUntilIdle()
		root.Release()
	}
	const nullInfo = "success with a NULL FutoInAsyncSteps"
	const staleInfo = "success through a FutoInAsyncSteps whose step or root has ended"
	for _, tc := range []struct {
		name   string
		mode   int
		target unsafe.Pointer
		code   string
		info   string
	}{
		{"after handle_error", ctest.RefusedAfterError, nil, "Failed", "before success"},
		{"NULL record", ctest.RefusedThroughTarget, nil, vm.InternalError, nullInfo},
		{"stale record", ctest.RefusedThroughTarget, stale, vm.InternalError, staleInfo},
		{"unreadable value", ctest.RefusedBadValue, nil, vm.InternalError, "success: argument 0: unknown type tag 0x12 (arrays of base type 2 are not supported)"},
		{"lent, after an unreadable value", ctest.RefusedLentAfterBadValue, nil, vm.InternalError, "success: argument 0: unknown type tag 0x12 (arrays of base type 2 are not supported)"},
		{"lent, before an unreadable value", ctest.RefusedLentBeforeBadValue, nil, vm.InternalError, "success: argument 3: unknown type tag 0x12 (arrays of base type 2 are not supported)"},
		{"lent, after handle_error", ctest.RefusedLentAfterError, nil, "Failed", "before success"},
		{"lent, NULL record", ctest.RefusedLentThroughTarget, nil, vm.InternalError, nullInfo},
		{"lent, stale record", ctest.RefusedLentThroughTarget, stale, vm.InternalError, staleInfo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lent := tc.mode >= ctest.RefusedLentAfterError && tc.mode != ctest.RefusedBadValue
			l, _ := newLoop()
			base := l.Stats()
			ctest.ResetTrace()
			ctest.ResetCleanups()
			before := ctest.ObjectCleanups()
			root := l.NewSteps()
			if lent {
				ctest.Emit(ffi.Binary(root), 5) // a custom object
				root.Add(func(as vm.AsyncSteps, args vm.Args) { as.Success(vm.Str("lent"), args.Get(1)) })
			}
			ctest.AddRefusedSuccess(ffi.Binary(root), tc.mode, tc.target)
			f := root.Promise()
			l.RunUntilIdle()
			expectError(t, f, tc.code, tc.info)
			root.Release()
			l.RunUntilIdle()
			switch {
			case tc.mode == ctest.RefusedLentAfterBadValue || tc.mode == ctest.RefusedLentBeforeBadValue:
				expectLines(t, "C", takeTrace(), "taken 1")
				if n, m := ctest.Cleanups(), ctest.ObjectCleanups()-before; n != 1 || m != 1 {
					t.Errorf("lent object: %d cleanups, unreadable value: %d; want 1 each", n, m)
				}
			case lent:
				expectLines(t, "C", takeTrace(), "lent kept 1")
				if n := ctest.Cleanups(); n != 1 {
					t.Errorf("lent object: %d cleanups, want 1", n)
				}
			default:
				expectLines(t, "C", takeTrace(), "taken 1")
				if n := ctest.ObjectCleanups() - before; n != 1 {
					t.Errorf("%d cleanups, want 1", n)
				}
			}
			if s := l.Stats(); s.RunningRoots != 0 || s.ArenaInUse != base.ArenaInUse || ffi.RecordsInUse(l) != 0 {
				t.Errorf("stats %+v, baseline %+v, records in use %d", s, base, ffi.RecordsInUse(l))
			}
		})
	}
}

// A custom object C passes to success from another thread through the
// record of a Go step that does not wait is taken, and the step fails
// (the misuse of its Resumer): the object's cleanup runs once.
func TestRefusedSuccessFromAfarOfStepThatDoesNotWait(t *testing.T) {
	l, _ := newLoop()
	before := ctest.ObjectCleanups()
	var rec unsafe.Pointer
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		rec = ffi.Binary(as)
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.WaitExternal() })
	})
	f := root.Promise()
	l.RunUntilIdle()
	taken := make(chan bool)
	go func() { taken <- ctest.CompleteObject(rec, rec) }()
	if !<-taken {
		t.Fatal("success left the object to C")
	}
	l.RunUntilIdle()
	if _, err := result(t, f); err == nil {
		t.Fatal("the flow succeeded")
	}
	expectObjectCleanupNow(t, before) // by the loop that refused it, not the collector
	root.Release()
}

// A C step of one loop passes a custom object it was lent on to the
// waiting step of a loop another goroutine runs: the object goes on as it
// is, as to a step of its own loop, and its cleanup runs once, when the
// receiver releases it. It used to become a second Object of the same C
// object, cleaned up when the lending step returned and again by the
// receiver.
func TestLentObjectPassedToAnotherLoopsThread(t *testing.T) {
	ctest.ResetCleanups()
	ctest.ResetTrace()
	recs := make(chan unsafe.Pointer)
	got := make(chan any, 1)
	done := make(chan error)
	go func() {
		l := vm.NewLoop()
		root := l.NewSteps()
		ctest.AddWait(ffi.Binary(root))
		root.Add(func(_ vm.AsyncSteps, args vm.Args) { got <- args.Get(0).Any() })
		f := root.Promise()
		l.RunUntilIdle()
		recs <- ctest.Waiting()
		done <- runFor(l, f)
	}()
	target := <-recs
	l, _ := newLoop()
	root := l.NewSteps()
	ctest.Emit(ffi.Binary(root), 5) // a custom object
	root.Add(func(as vm.AsyncSteps, args vm.Args) { as.Success(args.Get(1)) })
	ctest.AddRefusedSuccess(ffi.Binary(root), ctest.RefusedLentThroughTarget, target)
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	root.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o, ok := (<-got).(*ffi.Object)
	if !ok {
		t.Fatal("the other loop's step got no Object")
	}
	if n := ctest.Cleanups(); n != 0 {
		t.Fatalf("%d cleanups while the other loop's flow holds the object", n)
	}
	o.Release()
	if n := ctest.Cleanups(); n != 1 {
		t.Fatalf("%d cleanups, want 1", n)
	}
}

// A second success from another thread through the record of a step that
// waited, after the first completed it, is refused: the custom object it
// passes is released at once, on the calling thread, not left to the
// collector.
func TestSecondSuccessFromAfarReleasesItsObject(t *testing.T) {
	l, _ := newLoop()
	root, f, rec := waitingCStep(l)
	taken := make(chan bool)
	go func() { taken <- ctest.CompleteObject(rec, rec) && ctest.CompleteObject(rec, rec) }()
	if !<-taken {
		t.Fatal("success left an object to C")
	}
	if n := ctest.CleanupsOf(ctest.LastObject()); n != 1 {
		t.Fatalf("the refused object's cleanup ran %d times, want once", n)
	}
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	root.Release()
}

// A C step of loop B completes a waiting step of loop A, run by another
// goroutine, with a new custom object, and A's next C step returns without
// passing it on: A releases it, on A's goroutine and for A. It used to
// belong to B and enter B's call state from A's goroutine while B ran C
// steps (a data race under -race).
func TestObjectMadeByAnotherLoopReleasedByItsReceiver(t *testing.T) {
	la, _ := newLoop()
	ra := la.NewSteps()
	ctest.AddWait(ffi.Binary(ra))
	ctest.AddNop(ffi.Binary(ra)) // lent the object, which it does not pass on
	fa := ra.Promise()
	la.RunUntilIdle()
	lb := vm.NewLoop()
	rb := lb.NewSteps()
	ctest.AddRefusedSuccess(ffi.Binary(rb), ctest.RefusedThroughTarget, ctest.Waiting())
	ctest.AddNops(ffi.Binary(rb), 20000) // B runs C steps meanwhile
	fb := rb.Promise()
	errb := make(chan error)
	go func() { errb <- runFor(lb, fb) }()
	for {
		la.RunUntilIdle()
		select {
		case <-fa.Done():
		default:
			runtime.Gosched()
			continue
		}
		break
	}
	if err := <-errb; err != nil {
		t.Fatal(err)
	}
	if _, err := result(t, fa); err != nil {
		t.Fatal(err)
	}
	if n := ctest.CleanupsOf(ctest.LastObject()); n != 1 {
		t.Fatalf("the object's cleanup ran %d times, want once", n)
	}
	ra.Release()
	rb.Release()
	lb.Close()
}

// Object.Release called on a goroutine other than its loop's runs the
// cleanup for no loop: it must not enter the loop's call state, which the
// loop's goroutine is using to run C steps (a data race under -race).
func TestObjectReleasedOffItsLoop(t *testing.T) {
	l, _ := newLoop()
	root := l.NewSteps()
	ctest.AddObjectThread(ffi.Binary(root))
	got := make(chan *ffi.Object, 1)
	root.Add(func(_ vm.AsyncSteps, args vm.Args) {
		o, _ := args.Get(0).Any().(*ffi.Object)
		got <- o
	})
	ctest.AddNops(ffi.Binary(root), 20000)
	f := root.Promise()
	released := make(chan uint32)
	go func() {
		o := <-got
		obj := ctest.LastObject()
		if o != nil {
			o.Release()
		}
		released <- obj
	}()
	if err := runFor(l, f); err != nil {
		t.Fatal(err)
	}
	if n := ctest.CleanupsOf(<-released); n != 1 {
		t.Fatalf("the object's cleanup ran %d times, want once", n)
	}
	root.Release()
}

// waitingCStep starts a flow on l whose C step waits for an external
// event, and returns its root, its Future and the step's record.
func waitingCStep(l *vm.Loop) (vm.AsyncSteps, *vm.Future, unsafe.Pointer) {
	root := l.NewSteps()
	ctest.AddWait(ffi.Binary(root))
	f := root.Promise()
	l.RunUntilIdle()
	return root, f, ctest.Waiting()
}
