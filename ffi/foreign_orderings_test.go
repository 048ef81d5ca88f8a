//go:build cgo

package ffi_test

import (
	"strings"
	"testing"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/cengine"
	"github.com/stepvm/stepvm/vm"
)

// fswallow runs f and recovers whatever it panics with: the mistake of a
// Go function that recovers the unwinding of Error, Break, Continue or a
// misuse report and carries on.
func fswallow(f func()) {
	defer func() { _ = recover() }()
	f()
}

// A Go function the foreign engine runs that swallows the unwinding of
// Error, Break, Continue or a misuse report, then returns, has broken their
// contract as it would in a stepvm flow: the flow fails with InternalError,
// and goes on neither as if the function had succeeded nor as its code
// would have it.
func TestForeignSwallowedUnwindingIsInternalError(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(root vm.AsyncSteps)
	}{
		{"Error in a step", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { fswallow(func() { as.Error("E") }) })
		}},
		{"Error then Success", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				fswallow(func() { as.Error("E") })
				as.Success(vm.Int(1))
			})
		}},
		{"Error in an error handler", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
				func(as vm.AsyncSteps, _ string) { fswallow(func() { as.Error("F") }) })
		}},
		{"Break in a Repeat", func(root vm.AsyncSteps) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				cengine.Say("iteration")
				fswallow(func() { as.Break() })
			})
		}},
		{"misuse in a step", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { fswallow(func() { as.Add(nil) }) })
		}},
		{"misuse in a Repeat body", func(root vm.AsyncSteps) {
			root.Repeat(3, func(as vm.AsyncSteps, _ int) {
				cengine.Say("iteration")
				fswallow(func() { as.Resumer() })
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := runForeign(t, func(root vm.AsyncSteps) {
				c.build(root)
				root.Add(fsay("after"))
			})
			if run.result != cengine.Failed || run.code != vm.InternalError {
				t.Fatalf("flow ended %d %q, trace %q; want failed InternalError", run.result, run.code, run.trace)
			}
			for i, line := range run.trace {
				if line != "iteration" || i > 0 {
					t.Fatalf("the flow went on: %q", run.trace)
				}
			}
			if info := cengine.LastErrorInfo(); !strings.Contains(info, "IsUnwinding") && !strings.Contains(c.name, "misuse") {
				t.Errorf("the error's info %q does not say what went wrong", info)
			}
		})
	}
}

// The functions of package vm for bindings take a foreign handle for no
// root of theirs: RootOf gives the zero handle, not the stand-in root as a
// valid root of a loop (an Add through it crashed on the stand-in's
// missing loop and arena), and RootID gives 0 rather than one id shared by
// every foreign flow.
func TestForeignHandleHasNoNativeRoot(t *testing.T) {
	check := func(what string, as vm.AsyncSteps) {
		t.Helper()
		r := vm.RootOf(as)
		if r.Valid() || vm.IsRoot(r) {
			t.Fatalf("%s: RootOf gives a valid root", what)
		}
		if id := vm.RootID(as); id != 0 {
			t.Errorf("%s: RootID %#x, want 0", what, id)
		}
		vm.SetNativeRootValue(as, what)
		if v := vm.NativeRootValue(as); v != nil {
			t.Errorf("%s: NativeRootValue %v, want nil", what, v)
		}
	}
	run := runForeign(t, func(root vm.AsyncSteps) {
		check("root", root)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			check("step", as)
			check("accessor", as.Parallel())
		})
		root.Add(fsay("after"))
	})
	run.expect(t, cengine.Done, "", "after")
}

// A Go function the foreign engine runs that unwinds with Error or Break
// and, in a deferred function, misuses its handle under a recover that
// swallows the report: the flow fails with InternalError and the report's
// info, as it does on stepvm (TestSemMisuseSwallowedWhileUnwinding), not
// with the Error's code or the loop's Break. So does one whose misuse
// after an Error unwinds it unswallowed.
func TestForeignMisuseSwallowedWhileUnwinding(t *testing.T) {
	fail := func(as vm.AsyncSteps) {
		defer fswallow(func() { as.Success() })
		as.Error("E")
	}
	for _, c := range []struct {
		name  string
		build func(root vm.AsyncSteps)
	}{
		{"step", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { fail(as) })
		}},
		{"error handler", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First") },
				func(as vm.AsyncSteps, _ string) { fail(as) })
		}},
		{"Repeat body", func(root vm.AsyncSteps) {
			root.Repeat(3, func(as vm.AsyncSteps, _ int) { fail(as) })
		}},
		{"Break in a Repeat body", func(root vm.AsyncSteps) {
			root.Repeat(3, func(as vm.AsyncSteps, _ int) {
				defer fswallow(func() { as.Success() })
				as.Break()
			})
		}},
		{"Error, then misuse unswallowed", func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				defer func() {
					if vm.IsUnwinding(recover()) {
						as.Add(nil)
					}
				}()
				as.Error("E")
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := runForeign(t, func(root vm.AsyncSteps) {
				c.build(root)
				root.Add(fsay("after"))
			})
			if run.result != cengine.Failed || run.code != vm.InternalError || len(run.trace) != 0 {
				t.Fatalf("flow ended %d %q, trace %q; want failed InternalError", run.result, run.code, run.trace)
			}
			if info := cengine.LastErrorInfo(); !strings.Contains(info, "Success after") && !strings.Contains(info, "nil step function") {
				t.Errorf("the error's info %q is not the misuse report's", info)
			}
		})
	}
}

// Stack of a T of no size and of a T with pointers on the C engine: a
// live step gets memory for both, the destroy function that keeps the
// latter reachable goes when the step ends, and through the handle of a
// step that has ended both get nil, the engine counts the misuse, and Go
// keeps nothing for it.
func TestForeignStackOfNoSizeAndPointers(t *testing.T) {
	var kept vm.AsyncSteps
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			kept = as
			z, p := vm.Stack[struct{}](as), vm.Stack[*string](as)
			if z == nil || p == nil || *p != nil {
				t.Fatalf("Stack on a live foreign step: %p %p", z, p)
			}
			s := "kept"
			*p = &s
			as.Add(func(vm.AsyncSteps, vm.Args) { cengine.Say(**p) })
		})
	})
	run.expect(t, cengine.Done, "", "kept")
	live := ffi.ForeignLive()
	before, _ := cengine.Misuses()
	if z, p := vm.Stack[struct{}](kept), vm.Stack[*string](kept); z != nil || p != nil {
		t.Fatalf("Stack through the handle of an ended step: %p %p", z, p)
	}
	if after, last := cengine.Misuses(); after-before != 2 {
		t.Errorf("the engine saw %d misuses (last %q), want 2", after-before, last)
	}
	if n := ffi.ForeignLive(); n != live {
		t.Errorf("Go holds %d objects for the engine, want %d", n, live)
	}
}
