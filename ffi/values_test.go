//go:build cgo

package ffi_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// received runs root, whose last step must be added by the caller, and
// returns the values its capture step saw.
func captureFrom(t *testing.T, build func(root vm.AsyncSteps)) []vm.Value {
	t.Helper()
	l, _ := newLoop()
	root := l.NewSteps()
	build(root)
	var got []vm.Value
	root.Add(func(as vm.AsyncSteps, args vm.Args) { got = args.Values() })
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	root.Release()
	return got
}

func TestValuesFromC(t *testing.T) {
	ctest.ResetTrace()
	type want struct {
		kind vm.Kind
		v    any
	}
	for _, tc := range []struct {
		group    int
		want     []want
		cleanups int
	}{
		{0, []want{{vm.KindBool, true}, {vm.KindInt, int64(-8)}, {vm.KindInt, int64(-1600)}, {vm.KindInt, int64(-320000)}}, 4},
		{1, []want{{vm.KindInt, int64(-6400000000)}, {vm.KindUint, uint64(200)}, {vm.KindUint, uint64(60000)}, {vm.KindUint, uint64(4000000000)}}, 4},
		{2, []want{{vm.KindUint, uint64(18000000000000000000)}, {vm.KindFloat, 1.5}, {vm.KindFloat, -2.75}}, 3},
		{3, []want{{vm.KindString, "utf-8 ✓"}, {vm.KindString, "héllo 😀"}, {vm.KindString, "wörld 🚀"}, {vm.KindString, ""}}, 4},
		{4, []want{{vm.KindBytes, []byte{0, 1, 2, 255}}, {vm.KindAny, []int32{-1, 2, -3}}, {vm.KindAny, []float64{0.5, -2.25}}, {vm.KindAny, []bool{true, false, true}}}, 4},
		{6, []want{{vm.KindAny, []bool{true, false, true}}, {vm.KindBool, true}}, 2},
	} {
		ctest.ResetCleanups()
		got := captureFrom(t, func(root vm.AsyncSteps) { ctest.Emit(ffi.Binary(root), tc.group) })
		if len(got) != len(tc.want) {
			t.Fatalf("group %d: %d values, want %d", tc.group, len(got), len(tc.want))
		}
		for i, w := range tc.want {
			if got[i].Kind() != w.kind || !reflect.DeepEqual(got[i].Any(), w.v) {
				t.Errorf("group %d value %d = %v %#v, want %v %#v", tc.group, i, got[i].Kind(), got[i].Any(), w.kind, w.v)
			}
			// A bool is one of two Values: a byte of 2 must not make a third
			// (its Int would be 2).
			if b := got[i]; b.Kind() == vm.KindBool && b != vm.Bool(b.Bool()) {
				t.Errorf("group %d value %d: a bool that is not vm.Bool(%v) (Int %d)", tc.group, i, b.Bool(), b.Int())
			}
		}
		if n := ctest.Cleanups(); n != tc.cleanups {
			t.Errorf("group %d: %d cleanups, want %d (each once, at success)", tc.group, n, tc.cleanups)
		}
	}
	expectLines(t, "C", takeTrace()) // success took every value: none left in the C args
}

// A custom object becomes an *ffi.Object owned by Go; its cleanup runs
// exactly once.
func TestCustomObject(t *testing.T) {
	ctest.ResetCleanups()
	got := captureFrom(t, func(root vm.AsyncSteps) { ctest.Emit(ffi.Binary(root), 5) })
	if len(got) != 2 || got[0].Kind() != vm.KindNone {
		t.Fatalf("values = %v, want a hole and an object", got)
	}
	o, ok := got[1].Any().(*ffi.Object)
	if !ok {
		t.Fatalf("value 1 = %#v, want *ffi.Object", got[1].Any())
	}
	if s := ctest.String(o.Data(), o.Len()); s != "object" {
		t.Errorf("object data = %q", s)
	}
	if ctest.Cleanups() != 0 {
		t.Fatal("cleanup ran while Go owns the object")
	}
	o.Release()
	o.Release()
	if n := ctest.Cleanups(); n != 1 {
		t.Fatalf("%d cleanups, want 1", n)
	}

	// Lent to a C step that does not pass it on, it is cleaned up when the
	// step returns; passed on, it stays the same object.
	ctest.ResetCleanups()
	ctest.ResetTrace()
	captureFrom(t, func(root vm.AsyncSteps) {
		ctest.Emit(ffi.Binary(root), 5)
		ctest.CheckArgs(ffi.Binary(root))
	})
	expectLines(t, "C", takeTrace(), "0: none", "1: object", "2: none", "3: none")
	if n := ctest.Cleanups(); n != 1 {
		t.Fatalf("lent and dropped: %d cleanups, want 1", n)
	}
	ctest.ResetCleanups()
	var first *ffi.Object
	got = captureFrom(t, func(root vm.AsyncSteps) {
		ctest.Emit(ffi.Binary(root), 5)
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			first = args.Any(1).(*ffi.Object)
			as.Success(args.Get(1))
		})
		ctest.Forward(ffi.Binary(root))
	})
	if got[0].Any() != first || ctest.Cleanups() != 0 {
		t.Fatalf("forwarded object = %v (want %p), %d cleanups", got[0].Any(), first, ctest.Cleanups())
	}
	first.Release()
	if n := ctest.Cleanups(); n != 1 {
		t.Fatalf("%d cleanups, want 1", n)
	}
}

// A Go value C keeps past the call it was lent to cannot be passed on by
// a later call, even one lent a Go value at the same position: the later
// value must not go through in its place.
func TestKeptGoValueIsRefused(t *testing.T) {
	l, _ := newLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any("first")) })
	ctest.Keep(ffi.Binary(root))
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any("second")) })
	ctest.PassKept(ffi.Binary(root))
	var got []vm.Value
	root.Add(func(_ vm.AsyncSteps, args vm.Args) { got = args.Values() })
	f := root.Promise()
	l.RunUntilIdle()
	expectError(t, f, vm.InternalError, "success: argument 0: a Go value can only be passed on by the C step it was passed to, during that call")
	if got != nil {
		t.Fatalf("the step after received %v", got)
	}
	root.Release()
}

func TestValuesToC(t *testing.T) {
	ctest.ResetTrace()
	type opaque struct{ n int }
	x, y := &opaque{42}, &opaque{43}
	got := captureFrom(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Int(-5), vm.Uint(7), vm.Float(2.5), vm.Bool(true))
		})
		ctest.CheckArgs(ffi.Binary(root))
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Str("hi"), vm.Bytes([]byte{1, 2, 3}), vm.Any(x))
		})
		ctest.CheckArgs(ffi.Binary(root))
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Any(x), vm.Str("kept"), vm.Any(y))
		})
		ctest.Forward(ffi.Binary(root))
	})
	expectLines(t, "C", takeTrace(),
		"0: int64 -5", "1: uint64 7", "2: double 2.5", "3: bool 1",
		"0: string 2 hi 1", "1: bytes 3 1 3", "2: object", "3: none",
	)
	if len(got) != 3 || got[0].Any() != x || got[1].String() != "kept" || got[2].Any() != y {
		t.Fatalf("forwarded through C: %v", got)
	}
}

// Values lent to a C step that it passes back stay as they are: a string
// with NULs in it too, which a string made by C may not hold before its
// length. (It used to fail the flow: "a NUL at 1".)
func TestValuesPassedBackAsTheyAre(t *testing.T) {
	in := []vm.Value{vm.Str("a\x00b\x00"), vm.Str(""), vm.Bytes([]byte{0, 0}), vm.Uint(math.MaxUint64)}
	got := captureFrom(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(in...) })
		ctest.Forward(ffi.Binary(root))
	})
	if len(got) != len(in) {
		t.Fatalf("passed back through C: %d values, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i].Kind() != in[i].Kind() || !reflect.DeepEqual(got[i].Any(), in[i].Any()) {
			t.Errorf("value %d passed back through C: %v %#v, want %v %#v", i, got[i].Kind(), got[i].Any(), in[i].Kind(), in[i].Any())
		}
	}
}

// A Go value lent to a C step can be passed on after stepvm has run other
// C code during the step's call (a nested call, lent nothing).
func TestGoValueForwardedAfterNestedCall(t *testing.T) {
	type opaque struct{ n int }
	x := &opaque{1}
	before := ctest.NestedCleanups()
	got := captureFrom(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(x), vm.Int(2)) })
		ctest.ForwardNested(ffi.Binary(root))
	})
	if len(got) != 2 || got[0].Any() != x || got[1].Int() != 2 {
		t.Fatalf("forwarded through C: %v", got)
	}
	if n := ctest.NestedCleanups() - before; n != 1 {
		t.Fatalf("%d nested cleanups ran during the step, want 1", n)
	}
}
