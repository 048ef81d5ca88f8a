package vm_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Tests of claims the package documentation makes that no other test
// checks, one claim (or a table of alike claims) each, in the order of
// vm/doc.go's sections and then of the identifiers.

// A parallel step succeeds with no values, whatever its branches succeed
// with.
func TestDocParallelSucceedsWithNoValues(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel()
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(2), vm.Int(3)) })
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %d values", a.Len()) })
	}, "next got 0 values")
}

// The zero AsyncSteps: Valid reports false, State and Tool return nil, and
// every other call panics with an *Error of code InternalError.
func TestDocZeroAsyncSteps(t *testing.T) {
	var z vm.AsyncSteps
	if z.Valid() || z.State() != nil || z.Tool() != nil {
		t.Fatalf("zero handle: Valid %v, State %v, Tool %v", z.Valid(), z.State(), z.Tool())
	}
	fn := func(vm.AsyncSteps, vm.Args) {}
	calls := map[string]func(){
		"Add":          func() { z.Add(fn) },
		"Await":        func() { z.Await(func(context.Context) (vm.Value, error) { return vm.Value{}, nil }) },
		"Break":        func() { z.Break() },
		"Cancel":       func() { z.Cancel() },
		"Clone":        func() { z.Clone() },
		"Continue":     func() { z.Continue() },
		"CopyFrom":     func() { z.CopyFrom(z) },
		"Error":        func() { z.Error("E") },
		"Execute":      func() { z.Execute() },
		"Loop":         func() { z.Loop(func(vm.AsyncSteps) {}) },
		"NewInstance":  func() { z.NewInstance() },
		"Parallel":     func() { z.Parallel() },
		"Promise":      func() { z.Promise() },
		"Release":      func() { z.Release() },
		"Repeat":       func() { z.Repeat(1, func(vm.AsyncSteps, int) {}) },
		"Resumer":      func() { z.Resumer() },
		"SetCancel":    func() { z.SetCancel(func(vm.AsyncSteps) {}) },
		"SetTimeout":   func() { z.SetTimeout(time.Second) },
		"Stack":        func() { vm.Stack[int](z) },
		"StackRaw":     func() { z.StackRaw(8, nil) },
		"Success":      func() { z.Success() },
		"SuccessStep":  func() { z.SuccessStep() },
		"Sync":         func() { z.Sync(vm.NewMutex(1, 0), fn) },
		"WaitExternal": func() { z.WaitExternal() },
		"ForEach":      func() { vm.ForEach(z, []int{1}, func(vm.AsyncSteps, int, int) {}) },
		"ForEachMap":   func() { vm.ForEachMap(z, map[int]int{1: 1}, func(vm.AsyncSteps, int, int) {}) },
		"MakeLoop":     func() { z.MakeLoop(func(vm.AsyncSteps) {}) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				p := recover()
				e, ok := p.(*vm.Error)
				if !ok || e.Code != vm.InternalError {
					t.Fatalf("panic %v (%T), want an InternalError *Error", p, p)
				}
			}()
			call()
		})
	}
}

// Kind.String names each kind, and "kind?" a value that is not one.
func TestDocKindString(t *testing.T) {
	want := map[vm.Kind]string{vm.KindNone: "none", vm.KindInt: "int", vm.KindUint: "uint", vm.KindFloat: "float",
		vm.KindBool: "bool", vm.KindString: "string", vm.KindBytes: "bytes", vm.KindAny: "any", vm.KindAny + 1: "kind?", 255: "kind?"}
	for k, w := range want {
		if g := k.String(); g != w {
			t.Errorf("Kind(%d).String() = %q, want %q", k, g, w)
		}
	}
}

// The Value accessors convert as their docs say, the wrong kinds included.
func TestDocValueAccessors(t *testing.T) {
	type conv struct {
		i     int64
		u     uint64
		f     float64
		b     bool
		s     string
		bytes []byte
		a     any
	}
	for _, tc := range []struct {
		name string
		v    vm.Value
		want conv
	}{
		{"none", vm.Value{}, conv{0, 0, 0, false, "", nil, nil}},
		{"int", vm.Int(-3), conv{-3, math.MaxUint64 - 2, -3, true, "-3", nil, int64(-3)}},
		{"uint", vm.Uint(math.MaxUint64), conv{-1, math.MaxUint64, math.MaxUint64, true, "18446744073709551615", nil, uint64(math.MaxUint64)}},
		{"float", vm.Float(-2.75), conv{-2, math.MaxUint64 - 1, -2.75, true, "-2.75", nil, -2.75}},
		{"negative zero", vm.Float(math.Copysign(0, -1)), conv{0, 0, math.Copysign(0, -1), false, "-0", nil, math.Copysign(0, -1)}},
		{"bool", vm.Bool(true), conv{1, 1, 1, true, "true", nil, true}},
		{"string", vm.Str("ab"), conv{0, 0, 0, true, "ab", []byte("ab"), "ab"}},
		{"empty string", vm.Str(""), conv{0, 0, 0, false, "", nil, ""}},
		{"bytes", vm.Bytes([]byte("xy")), conv{0, 0, 0, true, "xy", []byte("xy"), []byte("xy")}},
		{"any nil", vm.Any(nil), conv{0, 0, 0, false, "<nil>", nil, nil}},
		{"any", vm.Any(struct{}{}), conv{0, 0, 0, true, "<any>", nil, struct{}{}}},
		{"any stringer", vm.Any(time.Second), conv{0, 0, 0, true, "1s", nil, time.Second}},
	} {
		v, w := tc.v, tc.want
		if v.Int() != w.i || v.Uint() != w.u || v.Float() != w.f || v.Bool() != w.b || v.String() != w.s ||
			string(v.Bytes()) != string(w.bytes) || v.Bytes() == nil && w.bytes != nil {
			t.Errorf("%s: Int %d Uint %d Float %g Bool %v String %q Bytes %q; want %+v",
				tc.name, v.Int(), v.Uint(), v.Float(), v.Bool(), v.String(), v.Bytes(), w)
		}
		if b, ok := w.a.([]byte); ok {
			if g, ok := v.Any().([]byte); !ok || string(g) != string(b) {
				t.Errorf("%s: Any %v, want %v", tc.name, v.Any(), w.a)
			}
		} else if v.Any() != w.a {
			t.Errorf("%s: Any %#v, want %#v", tc.name, v.Any(), w.a)
		}
	}
	if !vm.Float(math.NaN()).Bool() {
		t.Error("a NaN float is not true")
	}
}

// Args accessors out of range, below as well as past Len, give the zero
// Value's conversions.
func TestDocArgsOutOfRange(t *testing.T) {
	a := vm.ForeignArgs([]vm.Value{vm.Int(5)})
	for _, i := range []int{-1, 1, vm.MaxArgs, math.MaxInt, math.MinInt} {
		if a.Get(i).Kind() != vm.KindNone || a.Any(i) != nil || a.Bool(i) || a.BytesAt(i) != nil || a.Float(i) != 0 ||
			a.Int(i) != 0 || a.String(i) != "" || a.Uint(i) != 0 {
			t.Errorf("index %d: %v", i, a.Get(i))
		}
	}
	if a.Len() != 1 || a.Int(0) != 5 {
		t.Fatalf("Len %d, Int(0) %d", a.Len(), a.Int(0))
	}
	if n := vm.ForeignArgs(make([]vm.Value, 6)).Len(); n != vm.MaxArgs {
		t.Fatalf("ForeignArgs of 6 values: Len %d", n)
	}
}

// Error.Error, errors.Is on codes, RaisedError and PanicError as their docs
// say.
func TestDocErrorTypes(t *testing.T) {
	if g := (&vm.Error{Code: "C"}).Error(); g != "C" {
		t.Errorf("Error() = %q", g)
	}
	if g := (&vm.Error{Code: "C", Info: "i"}).Error(); g != "C: i" {
		t.Errorf("Error() = %q", g)
	}
	if !errors.Is(&vm.Error{Code: vm.Timeout, Info: "x"}, vm.ErrTimeout) || errors.Is(vm.ErrCanceled, vm.ErrInternal) {
		t.Error("errors.Is does not match on Code alone")
	}
	var e *vm.Error
	if errors.As(vm.ErrCanceled, &e) {
		t.Error("ErrCanceled is an *Error")
	}
	if errors.Is(vm.ErrTimeout, e) { // a nil *Error: no code to match
		t.Error("a Timeout is a nil *Error")
	}
	for _, tc := range []struct {
		in   *vm.Error
		want vm.Error
	}{
		{&vm.Error{Info: "i"}, vm.Error{Code: vm.InternalError, Info: "i"}},
		{&vm.Error{Code: "C", Info: "i"}, vm.Error{Code: "C", Info: "i"}},
	} {
		if g := vm.RaisedError(tc.in); g == nil || *g != tc.want {
			t.Errorf("RaisedError(%v) = %v, want %v", tc.in, g, tc.want)
		}
	}
	if g := vm.RaisedError(nil); g == nil || g.Code != vm.InternalError {
		t.Errorf("RaisedError(nil) = %v", g)
	}
	inner := errors.New("inner")
	if p := (&vm.PanicError{Value: inner}); p.Error() != "panic: inner" || !errors.Is(p, inner) {
		t.Errorf("PanicError of an error: %q, Is %v", p.Error(), errors.Is(p, inner))
	}
	if p := (&vm.PanicError{Value: 42}); p.Error() != "panic: 42" || p.Unwrap() != nil {
		t.Errorf("PanicError of 42: %q, Unwrap %v", p.Error(), p.Unwrap())
	}
}

// Loop.Cancel and IsValid of a Handle another loop scheduled, of the zero
// Handle, and of one that ran or was canceled.
func TestDocLoopHandleOfAnotherLoop(t *testing.T) {
	a, _ := semLoop()
	b, _ := semLoop()
	ran := 0
	ha := a.Immediate(func() { ran++ })
	hb := b.Immediate(func() { ran += 10 })
	if b.IsValid(ha) || a.IsValid(hb) || a.IsValid(vm.Handle{}) || !a.IsValid(ha) {
		t.Fatal("IsValid accepts another loop's handle, or refuses its own")
	}
	b.Cancel(ha)
	a.Cancel(hb)
	a.Cancel(vm.Handle{})
	a.RunUntilIdle()
	b.RunUntilIdle()
	if ran != 11 {
		t.Fatalf("ran = %d: a Cancel through another loop unscheduled a callback", ran)
	}
	a.Cancel(ha) // ran already
	h := a.Deferred(time.Millisecond, func() { ran = -1 })
	a.Cancel(h)
	a.Cancel(h) // canceled already
	if a.IsValid(h) || a.Stats().Timers != 0 {
		t.Fatalf("after Cancel: valid %v, %+v", a.IsValid(h), a.Stats())
	}
}

// WithRootPool(0) keeps no root; Spawn's root goes to the pool when its flow
// completes; Stats count them.
func TestDocRootPoolAndSpawn(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))), vm.WithRootPool(0))
	r := l.NewSteps()
	r.Release()
	if s := l.Stats(); s.PooledRoots != 0 || s.LiveRoots != 0 {
		t.Fatalf("after a Release into a pool of 0: %+v", s)
	}
	l2, _ := semLoop()
	done := false
	l2.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.Add(func(vm.AsyncSteps, vm.Args) { done = true }) })
	if s := l2.Stats(); s.RunningRoots != 1 || s.LiveRoots != 1 {
		t.Fatalf("spawned: %+v", s)
	}
	l2.RunUntilIdle()
	if s := l2.Stats(); !done || s.RunningRoots != 0 || s.LiveRoots != 0 || s.PooledRoots != 1 {
		t.Fatalf("spawned flow done %v: %+v", done, s)
	}
	semClean(t, l2)
}

// The zero Resumer's calls return false.
func TestDocZeroResumer(t *testing.T) {
	var z vm.Resumer
	if z.Success() || z.Error("E", "") {
		t.Fatal("the zero Resumer accepted a completion")
	}
}

// Repeat with a count of 0 or less runs nothing, and the flow goes on.
func TestDocRepeatNonPositive(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(n, func(as vm.AsyncSteps, i int) { log.add("iteration %d", i) })
			root.Add(log.step("after"))
		}, "after")
	}
}

// ForEach takes the length when called and reads each element when its
// iteration runs.
func TestDocForEachReads(t *testing.T) {
	s := []int{1, 2, 3}
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		vm.ForEach(root, s, func(as vm.AsyncSteps, i, v int) {
			log.add("%d=%d", i, v)
			if i == 0 {
				s[2] = 30
				s = append(s, 4)
			}
		})
	}, "0=1", "1=2", "2=30")
}

// TakeNativeWords hands the words back once, to the running step only;
// CopyFrom copies them with the step.
func TestDocNativeWords(t *testing.T) {
	l, _ := semLoop()
	model := l.NewSteps()
	var got []vm.NativeWords
	var kept vm.AsyncSteps
	vm.AddNative(model, func(as vm.AsyncSteps, _ vm.Args) {
		got = append(got, vm.TakeNativeWords(as), vm.TakeNativeWords(as), vm.TakeNativeWords(vm.RootOf(as)))
		kept = as
	}, nil, vm.NativeWords{A: 1, B: 2})
	cp := l.NewSteps()
	cp.CopyFrom(model)
	for _, r := range []vm.AsyncSteps{model, cp} {
		f := r.Promise()
		l.RunUntilIdle()
		semOK(t, f)
	}
	want := []vm.NativeWords{{1, 2}, {}, {}, {1, 2}, {}, {}}
	if len(got) != len(want) {
		t.Fatalf("words %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("words %v, want %v", got, want)
		}
	}
	if w := vm.TakeNativeWords(kept); w != (vm.NativeWords{}) {
		t.Fatalf("through an ended step's handle: %v", w)
	}
	model.Release()
	cp.Release()
	semClean(t, l)
}

// IsRoot, IsFrame, RootOf, FrameAlloc and NativeRootValue on each kind of
// handle: a root, a running step, a parallel accessor, a started parallel
// step, a cancel handler's step, and one no longer valid.
func TestDocHandleKinds(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	vm.SetNativeRootValue(root, "v")
	type probe struct {
		isRoot, isFrame, rootOK, alloc bool
		native                         any
	}
	got := map[string]probe{}
	destroyed := map[string]int{}
	look := func(name string, as vm.AsyncSteps) {
		p := vm.FrameAlloc(as, 8, func(unsafe.Pointer) { destroyed[name]++ })
		got[name] = probe{vm.IsRoot(as), vm.IsFrame(as), vm.RootOf(as) == root, p != nil, vm.NativeRootValue(as)}
	}
	var stale vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { stale = as })
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		look("step", as)
		p := as.Parallel()
		look("accessor", p)
		p.Add(func(br vm.AsyncSteps, _ vm.Args) { look("branch", br) })
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			look("stale", stale)
			as.SetCancel(func(c vm.AsyncSteps) { look("cancel handler", c) })
		})
	})
	f := root.Promise()
	l.RunUntilIdle()
	look("root", root)
	root.Cancel()
	l.RunUntilIdle()
	if _, err := semResult(t, f); err != vm.ErrCanceled {
		t.Fatal(err)
	}
	want := map[string]probe{
		"root":           {true, false, true, false, "v"},
		"step":           {false, true, true, true, "v"},
		"accessor":       {false, false, true, false, "v"},
		"branch":         {false, true, true, true, "v"},
		"stale":          {false, false, false, false, nil},
		"cancel handler": {false, true, true, true, "v"},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
		// The memory of a frame's allocation is destroyed once, with its
		// frame, which has ended by now.
		if n := destroyed[k]; w.alloc && n != 1 || !w.alloc && n != 0 {
			t.Errorf("%s: the allocation's destroy callback ran %d times", k, n)
		}
	}
	root.Release()
	semClean(t, l)
}

// A root reused from the pool starts with a cleared State: no variables,
// no ErrorInfo, LastException or AsyncStack, no native value... (which
// survives Release).
func TestDocStateClearedByRelease(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.State().Set("k", 1)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E", "info") })
	f := root.Promise()
	l.RunUntilIdle()
	semFail(t, f, "E")
	root.Release()
	next := l.NewSteps()
	st := next.State()
	if len(st.Keys()) != 0 || st.Exists("k") || st.ErrorInfo() != "" || st.LastException() != nil || len(st.AsyncStack()) != 0 {
		t.Fatalf("reused root's state: keys %v info %q last %v stack %v", st.Keys(), st.ErrorInfo(), st.LastException(), st.AsyncStack())
	}
	next.Release()
}

// Promise, or Execute, on a running root fails that flow with
// InternalError; Promise's own Future reports InternalError at once.
func TestDocPromiseOnRunningRoot(t *testing.T) {
	for _, how := range []string{"Promise", "Execute"} {
		l, root, f, _ := semResumerWait()
		if how == "Promise" {
			g := root.Promise()
			if _, err := semResult(t, g); err == nil {
				t.Fatal("the second Promise succeeded")
			}
		} else {
			root.Execute()
		}
		l.RunUntilIdle()
		semFail(t, f, vm.InternalError)
		root.Release()
		semClean(t, l)
	}
}

// Resumer from an error handler is misuse and returns the zero Resumer.
func TestDocResumerFromErrorHandler(t *testing.T) {
	var res vm.Resumer
	semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, _ string) {
			defer func() { _ = recover() }()
			res = as.Resumer()
		})
	})
	if res != (vm.Resumer{}) || res.Success() {
		t.Fatal("Resumer from an error handler is not the zero one")
	}
}

// Error through a waiting step's handle from a Deferred callback delivers
// the error and returns.
func TestDocErrorFromTimerReturns(t *testing.T) {
	returned := false
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal()
			as.Tool().Deferred(time.Millisecond, func() {
				as.Error("Late", "from a timer")
				returned = true
			})
		}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
	})
	r.advance(time.Millisecond)
	if !returned {
		t.Fatal("Error from a timer callback did not return")
	}
	e := semFail(t, r.f, "Late")
	if e.Info != "from a timer" {
		t.Fatalf("info %q", e.Info)
	}
	semExpect(t, r.log, "handler Late")
}

// A spawned root is released when its flow completes, once: an end hook
// (SetNativeRootHooks) that releases it itself leaves the release to the
// hook. (The root was released twice: counted out of LiveRoots twice and
// pooled twice, so that two NewSteps handed it out together.)
func TestDocSpawnedRootReleasedByEndHook(t *testing.T) {
	for _, code := range []string{"", "E"} {
		released := 0
		vm.SetNativeRootHooks(func(vm.AsyncSteps) { released++ }, func(root vm.AsyncSteps, _ string) { root.Release() })
		l, _ := semLoop()
		l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
			vm.SetNativeRootValue(vm.RootOf(as), "binding's")
			if code != "" {
				as.Error(code)
			}
		})
		l.RunUntilIdle()
		vm.SetNativeRootHooks(nil, nil)
		if s := l.Stats(); released != 1 || s.LiveRoots != 0 || s.PooledRoots != 1 {
			t.Fatalf("code %q: released %d times, then %+v", code, released, s)
		}
		if a, b := l.NewSteps(), l.NewSteps(); vm.RootID(a) == vm.RootID(b) {
			t.Fatal("the pool handed out one root twice")
		}
		semClean(t, l)
	}
}

// RootID tells the successive uses of a pooled root apart until its 16-bit
// stamp wraps, and the identifiers of flows alive at the same time never
// meet.
func TestDocRootIDOfSuccessiveUses(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	other := l.NewSteps()
	first := vm.RootID(root)
	for i := 1; i < 1<<16; i++ {
		root.Release()
		root = l.NewSteps()
		if id := vm.RootID(root); id == vm.RootID(other) || id == first {
			t.Fatalf("use %d of the pooled root: id %x, first %x, other root's %x", i, id, first, vm.RootID(other))
		}
	}
	root.Release()
	other.Release()
}

// Resumer does not make the step wait: a step that only takes one
// succeeds implicitly, and the Resumer's completions then return false.
func TestDocResumerDoesNotWait(t *testing.T) {
	var res vm.Resumer
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { res = as.Resumer() })
		root.Add(log.step("next"))
	}, "next")
	if res.Success() || res.Error("E", "") {
		t.Fatal("a Resumer of a step that succeeded implicitly accepted a completion")
	}
}
