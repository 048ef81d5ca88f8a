//go:build cgo

package ffi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/cengine"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/internal/specflow"
	"github.com/stepvm/stepvm/vm"
)

// Go code on a foreign AsyncSteps engine: ffi.Wrap of a root of the tiny C
// engine in internal/cengine, driven by its event queue.

// fsay returns a Go step that prints line to the engine's trace.
func fsay(line string) vm.ExecFunc {
	return func(vm.AsyncSteps, vm.Args) { cengine.Say(line) }
}

// foreignRun is how a flow on the C engine ended.
type foreignRun struct {
	trace   []string
	result  int
	code    string
	misuses int
}

// runForeign builds a flow on a new root of the C engine, executes it until
// no event is left, frees the root and checks that Go holds nothing more
// for the engine than before.
func runForeign(t *testing.T, build func(root vm.AsyncSteps)) foreignRun {
	t.Helper()
	cengine.Reset()
	live := ffi.ForeignLive()
	p := cengine.NewRoot()
	root := ffi.Wrap(p)
	if !root.Valid() || ffi.Binary(root) != p {
		t.Fatal("a wrapped root is not valid, or Binary does not give its pointer back")
	}
	build(root)
	root.Execute()
	cengine.Run()
	var run foreignRun
	run.result, run.code = cengine.Result(p)
	cengine.Free(p)
	cengine.Run()
	run.trace = cengine.Trace()
	run.misuses, _ = cengine.Misuses()
	if root.Valid() {
		t.Error("the handle on a freed root is valid")
	}
	if n := ffi.ForeignLive(); n != live {
		t.Errorf("Go holds %d objects for the engine after the flow was freed, want %d", n, live)
	}
	return run
}

// expect fails t unless the flow printed lines and ended with result and
// code, and the engine refused none of Go's calls: a refusal made outside
// a step fails no flow, so the count is the only sign of it.
func (r foreignRun) expect(t *testing.T, result int, code string, lines ...string) {
	t.Helper()
	expectLines(t, "foreign flow", r.trace, lines...)
	if r.result != result || r.code != code {
		t.Errorf("flow ended %d %q, want %d %q", r.result, r.code, result, code)
	}
	if r.misuses != 0 {
		t.Errorf("the engine refused %d calls during the flow", r.misuses)
	}
}

// TestForeignSpecFlows runs the specification's examples (package
// specflow) as Go code on the C engine. The engine runs a parallel step's
// branches one after the other, so the examples whose branches interleave
// (Parallel, ParallelAbort) are left out.
func TestForeignSpecFlows(t *testing.T) {
	for _, sf := range []specflow.Flow{specflow.Levels, specflow.ErrorHandling, specflow.StepsInErrorHandler, specflow.Loops} {
		t.Run(sf.Name, func(t *testing.T) {
			run := runForeign(t, func(root vm.AsyncSteps) { sf.Build(root, cengine.Say) })
			result := cengine.Done
			if sf.Err != "" {
				result = cengine.Failed
			}
			run.expect(t, result, sf.Err, sf.Want...)
		})
	}
}

func TestForeignLoops(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			n := 0
			as.Loop(func(as vm.AsyncSteps) {
				n++
				cengine.Say(fmt.Sprint("loop ", n))
				if n == 3 {
					as.Break()
				}
			})
			as.Repeat(5, func(as vm.AsyncSteps, i int) {
				switch i {
				case 1:
					as.Continue()
				case 3:
					as.Break()
				}
				cengine.Say(fmt.Sprint("repeat ", i))
			})
			// Break of the outer loop from a sub-step of an inner iteration.
			outer := 0
			as.Loop(func(as vm.AsyncSteps) {
				outer++
				vm.ForEach(as, []string{"a", "b", "c"}, func(as vm.AsyncSteps, i int, v string) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						cengine.Say(fmt.Sprint("outer ", outer, " inner ", v))
						if outer == 2 && v == "b" {
							as.Break("outer")
						}
					})
				}, "inner")
			}, "outer")
		})
		root.Add(fsay("after the loops"))
	})
	run.expect(t, cengine.Done, "",
		"loop 1", "loop 2", "loop 3",
		"repeat 0", "repeat 2",
		"outer 1 inner a", "outer 1 inner b", "outer 1 inner c",
		"outer 2 inner a", "outer 2 inner b",
		"after the loops")
}

func TestForeignErrorLeavesLoop(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(10, func(as vm.AsyncSteps, i int) {
				cengine.Say(fmt.Sprint("iteration ", i))
				if i == 1 {
					as.Error("Stop", "in the loop")
				}
			})
		}, func(as vm.AsyncSteps, code string) {
			cengine.Say("handled " + code)
			as.Success(vm.Int(7))
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			cengine.Say(fmt.Sprint("next got ", args.Int(0)))
		})
	})
	run.expect(t, cengine.Done, "", "iteration 0", "iteration 1", "handled Stop", "next got 7")
}

// Values cross both ways: C success values reach Go steps as Args, Go
// Success values reach C steps as FutoInArgs, and a Go value passes from
// Go step to Go step through the engine unchanged.
func TestForeignValues(t *testing.T) {
	type payload struct{ n int }
	x := &payload{5}
	cleanups := cengine.ObjectCleanups()
	run := runForeign(t, func(root vm.AsyncSteps) {
		p := ffi.Binary(root)
		cengine.AddEmit(p)
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			o, ok := args.Any(3).(*ffi.Object)
			if !ok {
				t.Fatalf("argument 3 is %#v, want an *ffi.Object", args.Get(3))
			}
			cengine.Say(fmt.Sprintf("Go got %d %d %v %s %d %d %v", args.Len(), args.Int(0), args.Float(1),
				args.String(2), o.Data(), o.Len(), o.Pointer() != 0))
			o.Release() // lent: the engine cleans it up
			as.Success(vm.Int(-3), vm.Uint(9), vm.Float(1.5), vm.Str("hi"))
		})
		cengine.AddCheck(p)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Bool(true), vm.Bytes([]byte("abc")), vm.Any(x), vm.Str(""))
		})
		cengine.AddCheck(p)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(x), vm.Str("s")) })
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			cengine.Say(fmt.Sprint("Go value back: ", args.Any(0) == any(x), " ", args.String(1)))
		})
	})
	run.expect(t, cengine.Done, "",
		"Go got 4 -7 2.5 héllo 42 1 true",
		"C got int64 -3",
		"C got uint64 9",
		"C got double 1.5",
		"C got string hi (2, NUL-terminated 1)",
		"C got bool 1",
		"C got bytes abc (3)",
		"C got custom object, cleanup set",
		"C got string  (0, NUL-terminated 1)",
		"Go value back: true s")
	if n := cengine.ObjectCleanups() - cleanups; n != 1 {
		t.Errorf("the C object was cleaned up %d times, want 1", n)
	}
}

// A Go step waits for an external event: one the C engine's queue delivers,
// then one Go delivers from outside the engine's calls.
func TestForeignExternalWait(t *testing.T) {
	var waiting vm.AsyncSteps
	cengine.Reset()
	live := ffi.ForeignLive()
	p := cengine.NewRoot()
	root := ffi.Wrap(p)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		cengine.CompleteLater(ffi.Binary(as), 42)
	})
	root.Add(func(as vm.AsyncSteps, args vm.Args) {
		cengine.Say(fmt.Sprint("C event gave ", args.Int(0)))
		waiting = as
		as.WaitExternal()
	})
	root.Add(func(as vm.AsyncSteps, args vm.Args) {
		cengine.Say("Go gave " + args.String(0))
		waiting = as
		as.SetCancel(func(vm.AsyncSteps) { cengine.Say("cancel handler") })
	}, func(as vm.AsyncSteps, code string) {
		cengine.Say("failed: " + code)
		as.Success()
	})
	root.Add(fsay("end"))
	root.Execute()
	cengine.Run()
	if !waiting.Valid() {
		t.Fatal("the waiting step's handle is not valid")
	}
	waiting.Success(vm.Str("hello"))
	cengine.Run()
	waiting.Error("Gone", "from Go") // returns: the step waits, it is not running
	cengine.Run()
	if r, _ := cengine.Result(p); r != cengine.Done {
		t.Errorf("result %d, want done", r)
	}
	cengine.Free(p)
	expectLines(t, "trace", cengine.Trace(), "C event gave 42", "Go gave hello", "cancel handler", "failed: Gone", "end")
	if n := ffi.ForeignLive(); n != live {
		t.Errorf("Go holds %d objects for the engine, want %d", n, live)
	}
}

func TestForeignState(t *testing.T) {
	var st *vm.State
	run := runForeign(t, func(root vm.AsyncSteps) {
		st = root.State()
		st.Set("from", "root")
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if as.State() != st {
				t.Error("a step sees another State than the root")
			}
			as.State().Set("n", 1)
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				v, _ := as.State().Get("n")
				as.State().Set("n", v.(int)+1)
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				v, _ := as.State().Get("n")
				as.State().Set("n", v.(int)+1)
			})
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			v, _ := as.State().Get("n")
			f, _ := as.State().Get("from")
			cengine.Say(fmt.Sprint("n ", v, " from ", f))
		})
	})
	run.expect(t, cengine.Done, "", "n 3 from root")
}

func TestForeignStack(t *testing.T) {
	destroyed := 0
	var raw unsafe.Pointer
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			n := vm.Stack[int64](as)
			s := vm.Stack[struct{ s string }](as)
			if n == nil || *n != 0 || s == nil {
				t.Fatal("Stack on a foreign step")
			}
			*n, s.s = 7, "kept"
			raw = as.StackRaw(16, func(p unsafe.Pointer) {
				if p == raw {
					destroyed++
				}
			})
			if raw == nil {
				t.Fatal("StackRaw on a foreign step")
			}
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				cengine.Say(fmt.Sprint(*n, " ", s.s, " ", destroyed))
			})
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { cengine.Say(fmt.Sprint("destroyed ", destroyed)) })
	})
	run.expect(t, cengine.Done, "", "7 kept 0", "destroyed 1")
}

// Go and C steps mix in one foreign flow; Binary gives a Go step's C
// pointer to C code, which adds to it.
func TestForeignMixed(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			cengine.Say("Go")
			cengine.AddSay(ffi.Binary(as), "C sub-step")
			as.Add(fsay("Go sub-step"))
		})
		cengine.AddFail(ffi.Binary(root), "CFailure")
		root.Add(fsay("skipped"))
	})
	run.expect(t, cengine.Failed, "CFailure", "Go", "C sub-step", "Go sub-step")
}

// Wrap of a running Go step's own pointer is a handle that is not the
// running function's: its Error is handle_error from C's point of view,
// taking effect when the step returns, and it returns.
func TestForeignWrapInsideStep(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			ffi.Wrap(ffi.Binary(as)).Error("ViaWrap")
			cengine.Say("Error through a second handle returned")
		}, func(as vm.AsyncSteps, code string) {
			cengine.Say("handled " + code)
		})
	})
	run.expect(t, cengine.Failed, "ViaWrap", "Error through a second handle returned", "handled ViaWrap")
}

func TestForeignNewInstance(t *testing.T) {
	cengine.Reset()
	live := ffi.ForeignLive()
	p := cengine.NewRoot()
	root := ffi.Wrap(p)
	inst := root.NewInstance()
	if !inst.Valid() || ffi.Binary(inst) == p {
		t.Fatal("NewInstance of a foreign root")
	}
	inst.Add(fsay("instance step"))
	inst.Execute()
	cengine.Run()
	inst.Release()
	if inst.Valid() {
		t.Error("a released instance is valid")
	}
	root.Release() // not made by NewInstance: ignored outside a step
	if !root.Valid() {
		t.Error("Release freed a root Go did not create")
	}
	cengine.Free(p)
	expectLines(t, "trace", cengine.Trace(), "instance step")
	if n := ffi.ForeignLive(); n != live {
		t.Errorf("Go holds %d objects for the engine, want %d", n, live)
	}
}

// Misuse inside a Go step ends as InternalError of the foreign flow: what
// the engine refuses, what Go cannot forward, and panics.
func TestForeignMisuseInStep(t *testing.T) {
	cases := []struct {
		name    string
		fn      vm.ExecFunc
		code    string
		returns bool // the misuse is the engine's: the Go function goes on
	}{
		{"add after success", func(as vm.AsyncSteps, _ vm.Args) {
			as.Success()
			as.Add(fsay("never"))
		}, vm.InternalError, true},
		{"nil step function", func(as vm.AsyncSteps, _ vm.Args) { as.Add(nil) }, vm.InternalError, false},
		{"Promise", func(as vm.AsyncSteps, _ vm.Args) { as.Promise() }, vm.InternalError, false},
		{"CopyFrom", func(as vm.AsyncSteps, _ vm.Args) { as.CopyFrom(as) }, vm.InternalError, false},
		{"Clone", func(as vm.AsyncSteps, _ vm.Args) { as.Clone() }, vm.InternalError, false},
		{"Resumer", func(as vm.AsyncSteps, _ vm.Args) { as.Resumer() }, vm.InternalError, false},
		{"Await", func(as vm.AsyncSteps, _ vm.Args) {
			as.Await(func(context.Context) (vm.Value, error) { return vm.Int(1), nil })
		}, vm.InternalError, true},
		{"Mutex", func(as vm.AsyncSteps, _ vm.Args) {
			as.Sync(vm.NewMutex(1, vm.Unbounded), fsay("never"))
		}, vm.InternalError, false},
		{"Mutex directly", func(as vm.AsyncSteps, _ vm.Args) {
			vm.NewMutex(1, vm.Unbounded).Sync(as, fsay("never"), nil)
		}, vm.InternalError, false},
		{"SetTimeout unsupported", func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(10) }, vm.InternalError, false},
		{"Break outside a loop", func(as vm.AsyncSteps, _ vm.Args) { as.Break() }, vm.InternalError, false},
		{"Tool", func(as vm.AsyncSteps, _ vm.Args) { as.Tool().Immediate(func() {}) }, vm.InternalError, false},
		{"panic", func(vm.AsyncSteps, vm.Args) { panic("boom") }, vm.InternalError, false},
		{"panic *vm.Error", func(vm.AsyncSteps, vm.Args) { panic(&vm.Error{Code: "Custom"}) }, "Custom", false},
		{"panic *vm.Error with no code", func(vm.AsyncSteps, vm.Args) { panic(&vm.Error{Info: "x"}) }, vm.InternalError, false},
		{"panic nil *vm.Error", func(vm.AsyncSteps, vm.Args) { panic((*vm.Error)(nil)) }, vm.InternalError, false},
		{"Error with no code", func(as vm.AsyncSteps, _ vm.Args) { as.Error("") }, vm.InternalError, false},
	}
	for _, c := range cases {
		run := runForeign(t, func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, args vm.Args) {
				c.fn(as, args)
				cengine.Say("returned")
			}, func(as vm.AsyncSteps, code string) {
				cengine.Say("handled " + code)
			})
		})
		want := []string{"handled " + c.code}
		if c.returns {
			want = append([]string{"returned"}, want...)
		}
		expectLines(t, c.name, run.trace, want...)
		if run.result != cengine.Failed || run.code != c.code {
			t.Errorf("%s: flow ended %d %q, want failed %q", c.name, run.result, run.code, c.code)
		}
	}
}

// A handle kept past its step is refused by the engine (is_valid), and
// calls through it are the engine's misuse: counted and ignored, never a
// crash, never another flow's step.
func TestForeignStaleHandle(t *testing.T) {
	var kept, accessor vm.AsyncSteps
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			kept = as
			accessor = as.Parallel()
		})
		root.Add(fsay("done"))
	})
	run.expect(t, cengine.Done, "", "done")
	if kept.Valid() || accessor.Valid() || kept.State() != nil || ffi.Binary(kept) != nil {
		t.Fatal("a stale foreign handle is valid")
	}
	before, _ := cengine.Misuses()
	kept.Add(fsay("never"))
	kept.Success(vm.Str("leaked?"))
	kept.Error("Never")
	kept.Break()
	accessor.Add(fsay("never"))
	kept.WaitExternal()
	kept.Loop(func(vm.AsyncSteps) {})
	after, last := cengine.Misuses()
	if after-before != 7 {
		t.Errorf("the engine saw %d misuses (last %q), want 7", after-before, last)
	}
	cengine.Run()
	if tr := cengine.Trace(); len(tr) != 0 {
		t.Errorf("stale calls ran something: %q", tr)
	}
}

func TestForeignCancel(t *testing.T) {
	cengine.Reset()
	p := cengine.NewRoot()
	root := ffi.Wrap(p)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(as vm.AsyncSteps) {
			cengine.Say("canceled")
			panic("a panic in a cancel handler goes nowhere")
		})
	})
	root.Execute()
	cengine.Run()
	root.Cancel()
	cengine.Run()
	if r, _ := cengine.Result(p); r != cengine.Canceled {
		t.Errorf("result %d, want canceled", r)
	}
	cengine.Free(p)
	expectLines(t, "trace", cengine.Trace(), "canceled")
}

// An engine that calls a Go cancel handler twice runs it once: the second
// call finds it emptied, and the step's owner record drops it as the step
// ends.
func TestForeignCancelHandlerRunsOnce(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		cengine.CancelTwice()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(as vm.AsyncSteps) { cengine.Say("outer canceled") })
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(as vm.AsyncSteps) { cengine.Say("inner canceled") })
			})
		})
	})
	// Still running (Idle) when runForeign frees it: freeing cancels it.
	run.expect(t, cengine.Idle, "", "inner canceled", "outer canceled")
}

func TestWrapRefusesIncompleteTable(t *testing.T) {
	if ffi.Wrap(nil).Valid() {
		t.Error("Wrap(nil) is valid")
	}
	var zero vm.AsyncSteps
	if vm.ForeignOf(zero) != nil || ffi.Binary(zero) != nil {
		t.Error("the zero handle is foreign")
	}
}

// What Go hands the engine for the steps a Go step adds is dropped when that
// step ends, not when the flow does: a long loop holds no growing memory.
func TestForeignLoopMemory(t *testing.T) {
	least, most := -1, 0
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(200, func(as vm.AsyncSteps, i int) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Success(vm.Any(i), vm.Str("x"))
				})
				as.Add(func(as vm.AsyncSteps, args vm.Args) {
					n := ffi.ForeignLive()
					if least < 0 || n < least {
						least = n
					}
					most = max(most, n)
				})
			})
		})
	})
	run.expect(t, cengine.Done, "")
	if least < 0 || most-least > 2 {
		t.Errorf("the Go objects held during the loop range from %d to %d, want a constant", least, most)
	}
}

// An *ffi.Object that a stepvm C step made passes to the foreign engine with
// its cleanup, which then runs exactly once: when the engine drops it.
// A lent one cannot be passed on.
func TestForeignObjectOwnership(t *testing.T) {
	ctest.ResetCleanups()
	got := captureFrom(t, func(root vm.AsyncSteps) { ctest.Emit(ffi.Binary(root), 5) })
	o := got[1].Any().(*ffi.Object)
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(o)) })
		cengine.AddCheck(ffi.Binary(root))
		cengine.AddEmit(ffi.Binary(root))
		root.Add(func(as vm.AsyncSteps, args vm.Args) { as.Success(args.Get(3)) }, func(as vm.AsyncSteps, code string) {
			cengine.Say("passing on a lent object: " + code)
		})
	})
	run.expect(t, cengine.Failed, vm.InternalError, "C got custom object, cleanup set", "passing on a lent object: InternalError")
	if n := ctest.Cleanups(); n != 1 {
		t.Errorf("the object was cleaned up %d times, want 1", n)
	}
	o.Release() // Go let go of it: nothing happens
	if n := ctest.Cleanups(); n != 1 {
		t.Errorf("the object was cleaned up %d times, want 1", n)
	}
}

// guard is an ISync built on the public API only, which therefore works on
// any flow, foreign ones included.
type guard struct{}

func (guard) Sync(as vm.AsyncSteps, fn vm.ExecFunc, onError vm.ErrorFunc) {
	as.Add(func(as vm.AsyncSteps, args vm.Args) {
		cengine.Say("enter")
		as.Add(fn, onError)
		as.Add(func(as vm.AsyncSteps, args vm.Args) {
			cengine.Say("leave")
			as.Success(args.Values()...)
		})
	})
}

func TestForeignSuccessStepAndSync(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		root.SuccessStep(vm.Int(5), vm.Str("five"))
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			cengine.Say(fmt.Sprint("got ", args.Int(0), " ", args.String(1)))
		})
		root.Sync(guard{}, func(as vm.AsyncSteps, _ vm.Args) {
			cengine.Say("inside")
			as.Success(vm.Int(6))
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			cengine.Say(fmt.Sprint("after the section ", args.Int(0)))
			// This engine has no addSync: a FutoInSync from C cannot guard it.
			as.Sync(ffi.WrapSync(ctest.CMutex()), fsay("never"))
		}, func(as vm.AsyncSteps, code string) {
			cengine.Say("Sync with a C primitive: " + code)
		})
	})
	run.expect(t, cengine.Failed, vm.InternalError,
		"got 5 five", "enter", "inside", "leave", "after the section 6", "Sync with a C primitive: InternalError")
}

func TestForeignParallelErrorHandler(t *testing.T) {
	run := runForeign(t, func(root vm.AsyncSteps) {
		p := root.Parallel(func(as vm.AsyncSteps, code string) {
			cengine.Say("parallel handler: " + code)
			as.Success()
		})
		p.Add(fsay("branch 1"))
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("BranchFailed") })
		p.Add(fsay("branch 3"))
		root.Add(fsay("after"))
	})
	run.expect(t, cengine.Done, "", "branch 1", "parallel handler: BranchFailed", "after")
}

// FTN12 2.2.2 holds for Go code on a foreign engine as it does on stepvm:
// SetTimeout, SetCancel, WaitExternal and Resumer (unsupported there
// anyway) from a Go error handler that the engine runs are misuse, which
// fails the flow with InternalError however the engine would take the
// call (the C engine lets an error handler configure its failed step), whatever the
// handler does next; the cancel handler it gave never runs, and Go holds
// nothing for the engine once the flow is freed (runForeign).
func TestForeignErrorHandlerCannotWait(t *testing.T) {
	calls := []struct {
		name string
		call func(as vm.AsyncSteps)
	}{
		{"SetTimeout", func(as vm.AsyncSteps) { as.SetTimeout(5 * time.Millisecond) }},
		{"SetCancel", func(as vm.AsyncSteps) {
			as.SetCancel(func(vm.AsyncSteps) { cengine.Say("handler's cancel ran") })
		}},
		{"WaitExternal", func(as vm.AsyncSteps) { as.WaitExternal() }},
		{"Resumer", func(as vm.AsyncSteps) { as.Resumer() }},
	}
	for _, c := range calls {
		for _, then := range []string{"returns", "adds a step", "succeeds"} {
			t.Run(c.name+"/"+then, func(t *testing.T) {
				run := runForeign(t, func(root vm.AsyncSteps) {
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
							cengine.Say("handler " + code)
							c.call(as)
							cengine.Say("handler went on")
							switch then {
							case "adds a step":
								as.Add(fsay("added step"))
							case "succeeds":
								as.Success()
							}
						})
					}, func(as vm.AsyncSteps, code string) {
						cengine.Say("outer handler " + code)
					})
					root.Add(fsay("next"))
				})
				run.expect(t, cengine.Failed, vm.InternalError, "handler E", "outer handler InternalError")
				info := cengine.LastErrorInfo()
				if !strings.Contains(info, c.name) || c.name != "Resumer" && !strings.Contains(info, "error handler") {
					t.Errorf("error info %q does not name %s from an error handler", info, c.name)
				}
			})
		}
	}
}
