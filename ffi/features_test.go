//go:build cgo

package ffi_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// runC runs a root built by build and reports its error.
func runC(t *testing.T, l *vm.Loop, build func(root vm.AsyncSteps)) vm.AsyncSteps {
	t.Helper()
	root := l.NewSteps()
	build(root)
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestTableComplete(t *testing.T) {
	l, _ := newLoop()
	root := l.NewSteps()
	if !ctest.TableComplete(ffi.Binary(root)) {
		t.Fatal("the function table has NULL entries")
	}
}

func TestStack(t *testing.T) {
	ctest.ResetTrace()
	ctest.ResetCounters()
	l, _ := newLoop()
	runC(t, l, func(root vm.AsyncSteps) {
		ctest.Features(ffi.Binary(root), 0)
		root.Add(func(vm.AsyncSteps, vm.Args) {
			if n := ctest.Counter(0); n != 1 {
				t.Errorf("stack cleanups after the step = %d, want 1", n)
			}
		})
	})
	expectLines(t, "C", takeTrace(), "stack aligned 1 zeroed 1", "0: none", "1: none", "2: none", "3: none")
}

func TestStateVariable(t *testing.T) {
	ctest.ResetTrace()
	ctest.ResetCounters()
	l, _ := newLoop()
	root := runC(t, l, func(root vm.AsyncSteps) {
		ctest.Features(ffi.Binary(root), 1)
		ctest.Features(ffi.Binary(root), 1)
	})
	// The state lives as long as the root: a second run sees the variable.
	ctest.Features(ffi.Binary(root), 1)
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	expectLines(t, "C", takeTrace(), "state 7", "state 8", "state 9")
	if a, c := ctest.Counter(1), ctest.Counter(2); a != 1 || c != 0 {
		t.Fatalf("allocations %d, cleanups %d; want 1, 0 while the root lives", a, c)
	}
	if v, ok := root.State().Get("cvar"); !ok || v == nil {
		t.Fatal("the C state variable is not in the root's State")
	}
	root.Release()
}

// State variables are cleaned up when a root Go owns is released.
func TestStateVariableCleanupAtRelease(t *testing.T) {
	ctest.ResetCounters()
	l, _ := newLoop()
	root := runC(t, l, func(root vm.AsyncSteps) { ctest.Features(ffi.Binary(root), 1) })
	if c := ctest.Counter(2); c != 0 {
		t.Fatalf("cleanups = %d before release", c)
	}
	root.Release()
	if c := ctest.Counter(2); c != 1 {
		t.Fatalf("cleanups = %d after release, want 1", c)
	}
}

// A clone (or a CopyFrom copy) of a root gets its State's variables, but
// not its C state variables, which the original root destroys: the copy
// allocates its own on first use, and destroys it when it is released. The
// clone used to get the original's, which it kept using once the
// original's release had cleaned it up.
func TestStateVariableOfCloneIsItsOwn(t *testing.T) {
	for _, copyFrom := range []bool{false, true} {
		ctest.ResetTrace()
		ctest.ResetCounters()
		l, _ := newLoop()
		root := runC(t, l, func(root vm.AsyncSteps) { ctest.Features(ffi.Binary(root), 1) })
		ctest.Features(ffi.Binary(root), 1) // for the copy to run
		var clone vm.AsyncSteps
		if copyFrom {
			clone = l.NewSteps()
			clone.CopyFrom(root)
		} else {
			clone = root.Clone()
		}
		root.Release()
		f := clone.Promise()
		l.RunUntilIdle()
		if _, err := result(t, f); err != nil {
			t.Fatal(err)
		}
		expectLines(t, "C", takeTrace(), "state 7", "state 7")
		if a, c := ctest.Counter(1), ctest.Counter(2); a != 2 || c != 1 {
			t.Fatalf("CopyFrom %v: allocations %d, cleanups %d; want 2 and 1 (the original's)", copyFrom, a, c)
		}
		clone.Release()
		if c := ctest.Counter(2); c != 2 {
			t.Fatalf("CopyFrom %v: cleanups %d after the copy's release, want 2", copyFrom, c)
		}
	}
}

// A root created from C with newInstance runs, and free releases it and
// its state variables.
func TestNewInstanceAndFree(t *testing.T) {
	ctest.ResetTrace()
	ctest.ResetCounters()
	l, _ := newLoop()
	runC(t, l, func(root vm.AsyncSteps) { ctest.Features(ffi.Binary(root), 4) })
	expectLines(t, "C", takeTrace(), "new instance runs", "state 7")
	before := l.Stats().LiveRoots
	ctest.FreeNew()
	if c := ctest.Counter(2); c != 1 {
		t.Errorf("state cleanups after free = %d, want 1", c)
	}
	if after := l.Stats().LiveRoots; after != before-1 {
		t.Errorf("live roots %d -> %d: free did not release the root", before, after)
	}
}

func TestIdentity(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	runC(t, l, func(root vm.AsyncSteps) { ctest.Features(ffi.Binary(root), 3) })
	expectLines(t, "C", takeTrace(),
		"same thread 1 valid 1 new valid 1 same root 1 other root 1",
		"freed valid 0")
}

func TestSchedule(t *testing.T) {
	ctest.ResetTrace()
	ctest.ResetCounters()
	l, clk := newLoop()
	runC(t, l, func(root vm.AsyncSteps) { ctest.Features(ffi.Binary(root), 2) })
	expectLines(t, "C", takeTrace(), "immediate valid 1", "canceled valid 0")
	if n := ctest.Counter(3); n != 1 {
		t.Fatalf("callbacks = %d, want the immediate one (1)", n)
	}
	clk.Advance(5 * time.Millisecond)
	l.RunUntilIdle()
	if n := ctest.Counter(3); n != 11 {
		t.Fatalf("callbacks = %d, want the immediate and deferred ones, not the canceled (11)", n)
	}
}

// A C step that waits may be completed from a thread the loop does not
// know: the completion travels to the loop like a Resumer's.
func TestForeignThread(t *testing.T) {
	ctest.ResetTrace()
	l := vm.NewLoop()
	root := l.NewSteps()
	ctest.ForeignThread(ffi.Binary(root))
	var got string
	root.Add(func(as vm.AsyncSteps, args vm.Args) { got = args.String(0) })
	err := runFor(l, root.Promise())
	if err != nil || got != "from another thread" {
		t.Fatalf("flow = %v, %q", err, got)
	}
}

// An error no handler settles reaches the handler C gave execute.
func TestUnhandledError(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	root := l.NewSteps()
	ctest.AddFail(ffi.Binary(root), "Boom", false)
	ctest.ExecuteWithHandler(ffi.Binary(root))
	l.RunUntilIdle()
	expectLines(t, "C", takeTrace(), "C fails with Boom", "unhandled: Boom")
}

// A custom object that C passes to success from a thread the loop does not
// know becomes an Object without touching the loop's state, which belongs
// to the loop's goroutine (the race detector reports it otherwise), while
// the loop runs C steps that are lent values; its cleanup runs once.
func TestForeignThreadObject(t *testing.T) {
	l := vm.NewLoop()
	busy := l.NewSteps()
	busy.Loop(func(as vm.AsyncSteps) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(struct{}{})) })
		ctest.AddNop(ffi.Binary(as))
	})
	busy.Execute()
	root := l.NewSteps()
	ctest.AddObjectThread(ffi.Binary(root))
	var got *ffi.Object
	root.Add(func(as vm.AsyncSteps, args vm.Args) { got, _ = args.Any(0).(*ffi.Object) })
	err := runFor(l, root.Promise())
	if err != nil || got == nil || got.Data() != 7 {
		t.Fatalf("flow = %v, object %v", err, got)
	}
	before := ctest.ObjectCleanups()
	got.Release()
	got.Release()
	if n := ctest.ObjectCleanups() - before; n != 1 {
		t.Errorf("object cleanups = %d, want 1", n)
	}
	busy.Release()
}

// A thread the loop does not know keeps calling isValid, is_same_thread,
// success and handle_error through the record of a step that waited, long
// after the step was canceled, while the loop runs other C steps and
// releases their records: the calls find the record stale without reading
// what the loop's goroutine writes there (the race detector reports it
// otherwise), and the other steps run undisturbed. Each thread is done
// before the loop has released 512 records since (its flow and twenty
// others release some 120): a record kept longer may name another step
// (see the package documentation), and a late success would then reach
// that step.
func TestLateForeignCalls(t *testing.T) {
	l := vm.NewLoop()
	const flows = 20
	before := ctest.LateDone()
	for i := range flows {
		root := l.NewSteps()
		ctest.AddLate(ffi.Binary(root))
		root.Execute()
		l.RunUntilIdle()
		root.Cancel()
		l.RunUntilIdle()
		root.Release()
		for range 20 {
			other := l.NewSteps()
			ctest.AddNops(ffi.Binary(other), 5)
			f := other.Promise()
			l.RunUntilIdle()
			if _, err := result(t, f); err != nil {
				t.Fatal(err)
			}
			other.Release()
		}
		for ctest.LateDone()-before <= i {
			time.Sleep(time.Millisecond)
		}
	}
	l.RunUntilIdle()
}
