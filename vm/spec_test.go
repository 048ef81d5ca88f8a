package vm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/specflow"
	"github.com/stepvm/stepvm/vm"
)

// trace collects lines printed by a flow.
type trace struct{ lines []string }

func (t *trace) add(s string) { t.lines = append(t.lines, s) }
func (t *trace) String() string {
	return strings.Join(t.lines, "\n")
}

func expectTrace(t *testing.T, got *trace, want ...string) {
	t.Helper()
	if g, w := got.String(), strings.Join(want, "\n"); g != w {
		t.Fatalf("trace mismatch\n--- got ---\n%s\n--- want ---\n%s", g, w)
	}
}

func newTestLoop() (*vm.Loop, *vm.ManualClock) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	return vm.NewLoop(vm.WithClock(clk)), clk
}

// specRun executes the flow build makes on a fresh loop until the loop is
// idle, and fails t unless the flow traced exactly want.
func specRun(t *testing.T, build func(root vm.AsyncSteps, tr *trace), want ...string) {
	t.Helper()
	l, _ := newTestLoop()
	var tr trace
	root := l.NewSteps()
	build(root, &tr)
	root.Execute()
	l.RunUntilIdle()
	expectTrace(t, &tr, want...)
}

// TestSpecFlows runs the specification's examples (package specflow, which
// ffi's tests run too, next to C versions) and checks each one's trace and
// how its flow ends.
func TestSpecFlows(t *testing.T) {
	for _, sf := range specflow.All {
		t.Run(sf.Name, func(t *testing.T) {
			l, _ := newTestLoop()
			var tr trace
			root := l.NewSteps()
			sf.Build(root, tr.add)
			f := root.Promise()
			l.RunUntilIdle()
			expectTrace(t, &tr, sf.Want...)
			select {
			case <-f.Done():
			default:
				t.Fatal("flow did not complete")
			}
			_, err := f.Wait(t.Context())
			if sf.Err == "" && err != nil {
				t.Fatalf("flow failed: %v", err)
			}
			if e, ok := err.(*vm.Error); sf.Err != "" && (!ok || e.Code != sf.Err) {
				t.Fatalf("flow error = %v, want %s", err, sf.Err)
			}
		})
	}
}

// JS reference README: "Simple steps".
func TestReadmeSimpleSteps(t *testing.T) {
	specRun(t, func(root vm.AsyncSteps, tr *trace) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Str("MyValue"))
		}).Add(func(as vm.AsyncSteps, args vm.Args) {
			if args.String(0) == "MyValue" {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Error("MyError", "Something bad has happened")
				})
			}
			as.SuccessStep()
		}, func(as vm.AsyncSteps, code string) {
			if code == "MyError" {
				as.Success(vm.Str("NotSoBad"))
			}
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			if args.String(0) == "NotSoBad" {
				tr.add("MyError was ignored: " + as.State().ErrorInfo())
			}
			as.State().Set("p1arg", "abc")
			as.State().Set("p2arg", "xyz")
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				tr.add("Parallel Step 1")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					tr.add("Parallel Step 1.1")
					v, _ := as.State().Get("p1arg")
					as.State().Set("p1", v.(string)+"1")
					as.Success()
				})
			}).Add(func(as vm.AsyncSteps, _ vm.Args) {
				tr.add("Parallel Step 2")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					tr.add("Parallel Step 2.1")
					v, _ := as.State().Get("p2arg")
					as.State().Set("p2", v.(string)+"2")
					as.Success()
				})
			})
		}).Add(func(as vm.AsyncSteps, _ vm.Args) {
			p1, _ := as.State().Get("p1")
			p2, _ := as.State().Get("p2")
			tr.add("Parallel 1 result: " + p1.(string))
			tr.add("Parallel 2 result: " + p2.(string))
		})
	},
		"MyError was ignored: Something bad has happened",
		"Parallel Step 1",
		"Parallel Step 2",
		"Parallel Step 1.1",
		"Parallel Step 2.1",
		"Parallel 1 result: abc1",
		"Parallel 2 result: xyz2",
	)
}

// JS reference README: "External event wait".
func TestReadmeExternalEventWait(t *testing.T) {
	l, clk := newTestLoop()
	var tr trace
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Tool().Immediate(func() { as.Success(vm.Str("async success()")) })
		as.SetTimeout(10 * time.Millisecond)
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		tr.add(args.String(0))
		as.SetCancel(func(vm.AsyncSteps) {}) // dummy_service_cancel
		as.SetTimeout(time.Second)
	}, func(as vm.AsyncSteps, code string) {
		tr.add(code + ": " + as.State().ErrorInfo())
	})
	root.Execute()
	l.RunUntilIdle()
	clk.Advance(999 * time.Millisecond)
	l.RunUntilIdle()
	expectTrace(t, &tr, "async success()")
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	expectTrace(t, &tr, "async success()", "Timeout: ")
}

// JS reference README: "Model steps".
func TestReadmeModelSteps(t *testing.T) {
	l, _ := newTestLoop()
	var tr trace
	model := l.NewSteps()
	model.State().Set("var", "Vanilla")
	model.Add(func(as vm.AsyncSteps, _ vm.Args) {
		tr.add("-----")
		tr.add("Hi! I am from model_as")
		v, _ := as.State().Get("var")
		tr.add("State.var: " + v.(string))
		as.State().Set("var", "Dirty")
		as.Success()
	})
	for range 3 {
		root := l.NewSteps()
		root.CopyFrom(model)
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				tr.add(">> The first inner step")
				as.Success()
			})
			as.CopyFrom(model)
			as.SuccessStep()
		})
		root.Execute()
	}
	l.RunUntilIdle()
	var want []string
	for _, v := range []string{"Vanilla", "", "Dirty"} {
		for range 3 {
			if v == "" {
				want = append(want, ">> The first inner step")
				continue
			}
			want = append(want, "-----", "Hi! I am from model_as", "State.var: "+v)
		}
	}
	expectTrace(t, &tr, want...)
}

// JS reference README: "Async Loops".
func TestReadmeAsyncLoops(t *testing.T) {
	specRun(t, func(root vm.AsyncSteps, tr *trace) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(3, func(as vm.AsyncSteps, i int) {
				tr.add("> Repeat: " + vm.Int(int64(i)).String())
			})
			vm.ForEach(as, []int{1, 2, 3}, func(as vm.AsyncSteps, k int, v int) {
				tr.add("> forEach: " + vm.Int(int64(k)).String() + " = " + vm.Int(int64(v)).String())
			})
			vm.ForEachMap(as, map[string]int{"a": 1, "b": 2, "c": 3}, func(as vm.AsyncSteps, k string, v int) {
				tr.add("> forEach: " + k + " = " + vm.Int(int64(v)).String())
			})
		})
	},
		"> Repeat: 0", "> Repeat: 1", "> Repeat: 2",
		"> forEach: 0 = 1", "> forEach: 1 = 2", "> forEach: 2 = 3",
		"> forEach: a = 1", "> forEach: b = 2", "> forEach: c = 3",
	)
}
