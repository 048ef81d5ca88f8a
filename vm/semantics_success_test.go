package vm_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

type semPoint struct{ X, Y int }

// Every kind of Value reaches the next step's Args unchanged.
func TestSemSuccessValueKinds(t *testing.T) {
	anyVal := &semPoint{1, 2}
	cases := []struct {
		name  string
		v     vm.Value
		kind  vm.Kind
		check func(a vm.Args) bool
	}{
		{"int", vm.Int(-42), vm.KindInt, func(a vm.Args) bool { return a.Int(0) == -42 }},
		{"uint", vm.Uint(1 << 63), vm.KindUint, func(a vm.Args) bool { return a.Uint(0) == 1<<63 }},
		{"float", vm.Float(2.5), vm.KindFloat, func(a vm.Args) bool { return a.Float(0) == 2.5 }},
		{"bool", vm.Bool(true), vm.KindBool, func(a vm.Args) bool { return a.Bool(0) }},
		{"false", vm.Bool(false), vm.KindBool, func(a vm.Args) bool { return !a.Bool(0) }},
		{"str", vm.Str("hello"), vm.KindString, func(a vm.Args) bool { return a.String(0) == "hello" }},
		{"empty str", vm.Str(""), vm.KindString, func(a vm.Args) bool { return a.String(0) == "" }},
		{"bytes", vm.Bytes([]byte{1, 2, 3}), vm.KindBytes, func(a vm.Args) bool { return bytes.Equal(a.BytesAt(0), []byte{1, 2, 3}) }},
		{"any", vm.Any(anyVal), vm.KindAny, func(a vm.Args) bool { return a.Any(0) == anyVal }},
		{"any nil", vm.Any(nil), vm.KindAny, func(a vm.Args) bool { return a.Any(0) == nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var gotKind vm.Kind
			var gotLen int
			ok := false
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(c.v) })
			root.Add(func(as vm.AsyncSteps, a vm.Args) {
				gotLen, gotKind, ok = a.Len(), a.Get(0).Kind(), c.check(a)
			})
			f := root.Promise()
			l.RunUntilIdle()
			semOK(t, f)
			if gotLen != 1 || gotKind != c.kind || !ok {
				t.Fatalf("next step got len=%d kind=%v ok=%v, want 1 %v true", gotLen, gotKind, ok, c.kind)
			}
		})
	}
}

// Up to four values of mixed kinds arrive in order; zero values give an
// empty Args.
func TestSemSuccessValueCount(t *testing.T) {
	all := []vm.Value{vm.Int(1), vm.Str("two"), vm.Float(3), vm.Bool(true)}
	for n := 0; n <= vm.MaxArgs; n++ {
		r := semStart(func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(all[:n]...) })
			root.Add(func(as vm.AsyncSteps, a vm.Args) {
				log.add("len=%d", a.Len())
				for i := range a.Len() {
					log.add("%v:%s", a.Get(i).Kind(), a.String(i))
				}
				log.add("past=%v", a.Get(a.Len()).Kind())
			})
		})
		semOK(t, r.f)
		want := []string{"len=" + vm.Int(int64(n)).String()}
		for i := range n {
			want = append(want, all[i].Kind().String()+":"+all[i].String())
		}
		want = append(want, "past=none")
		semExpect(t, r.log, want...)
	}
}

// The values of a step go to the next step only: a step that succeeds
// implicitly passes nothing on.
func TestSemSuccessImplicitPassesNothing(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Int(2)) })
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("second got %d", a.Len()) })
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("third got %d", a.Len()) })
	})
	if semOK(t, r.f).Len() != 0 {
		t.Fatal("flow result has values after an implicit success")
	}
	semExpect(t, r.log, "second got 2", "third got 0")
}

// A step with sub-steps completes with its last sub-step's values; the
// sub-steps pass values to each other.
func TestSemSuccessFromLastSubStep(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("outer")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("sub1")
				as.Success(vm.Int(1))
			})
			as.Add(func(as vm.AsyncSteps, a vm.Args) {
				log.add("sub2 got %d", a.Int(0))
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("sub2.1")
					as.Success(vm.Str("deep"), vm.Int(a.Int(0)+1))
				})
			})
			log.add("outer returns")
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) {
			log.add("next got %s %d", a.String(0), a.Int(1))
			as.Success(a.Get(0), a.Get(1))
		})
	})
	args := semOK(t, r.f)
	semExpect(t, r.log, "outer", "outer returns", "sub1", "sub2 got 1", "sub2.1", "next got deep 2")
	if args.Len() != 2 || args.String(0) != "deep" || args.Int(1) != 2 {
		t.Fatalf("flow result = %v, want [deep 2]", args.Values())
	}
}

// SuccessStep (FTN12 1.12) adds a step that succeeds with its values, at
// level 0 and after sub-steps, overriding the values of the sub-steps.
func TestSemSuccessStep(t *testing.T) {
	t.Run("level0", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.SuccessStep(vm.Str("a"), vm.Int(7))
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("got %d %s %d", a.Len(), a.String(0), a.Int(1)) })
		}, "got 2 a 7")
	})
	t.Run("after sub-steps", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("sub")
					as.Success(vm.Int(1), vm.Int(2), vm.Int(3))
				})
				as.SuccessStep(vm.Int(123))
			})
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("got %d %d", a.Len(), a.Int(0)) })
		}, "sub", "got 1 123")
	})
	t.Run("no values", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
				as.SuccessStep()
			})
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("got %d", a.Len()) })
		}, "got 0")
	})
	t.Run("last step is the result", func(t *testing.T) {
		l, _ := semLoop()
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
		root.SuccessStep(vm.Bool(true), vm.Str("x"))
		f := root.Promise()
		l.RunUntilIdle()
		if a := semOK(t, f); a.Len() != 2 || !a.Bool(0) || a.String(1) != "x" {
			t.Fatalf("result = %v, want [true x]", a.Values())
		}
	})
}

// A step that returns without completing succeeds implicitly unless it
// added sub-steps, set a timeout or a cancel handler, or called
// WaitExternal (FTN12 1.6).
func TestSemImplicitSuccess(t *testing.T) {
	cases := []struct {
		name  string
		body  func(as vm.AsyncSteps, log *semLog)
		waits bool
	}{
		{"returns", func(vm.AsyncSteps, *semLog) {}, false},
		{"reads state", func(as vm.AsyncSteps, _ *semLog) { as.State().Set("k", 1) }, false},
		{"sub-steps", func(as vm.AsyncSteps, log *semLog) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("sub") })
		}, false},
		{"timeout", func(as vm.AsyncSteps, _ *semLog) { as.SetTimeout(time.Second) }, true},
		{"cancel handler", func(as vm.AsyncSteps, _ *semLog) { as.SetCancel(func(vm.AsyncSteps) {}) }, true},
		{"wait external", func(as vm.AsyncSteps, _ *semLog) { as.WaitExternal() }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("step")
				c.body(as, &log)
			})
			root.Add(log.step("next"))
			f := root.Promise()
			l.RunUntilIdle()
			if c.waits {
				semExpect(t, &log, "step")
				semPending(t, f)
				root.Cancel()
				l.RunUntilIdle()
				semExpect(t, &log, "step")
				return
			}
			semOK(t, f)
			if c.name == "sub-steps" {
				semExpect(t, &log, "step", "sub", "next")
			} else {
				semExpect(t, &log, "step", "next")
			}
		})
	}
}

// More than four values is InternalError, for Success and SuccessStep.
func TestSemSuccessTooManyValues(t *testing.T) {
	five := []vm.Value{vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4), vm.Int(5)}
	cases := []struct {
		name string
		body vm.ExecFunc
	}{
		{"Success", func(as vm.AsyncSteps, _ vm.Args) { as.Success(five...) }},
		{"SuccessStep", func(as vm.AsyncSteps, _ vm.Args) { as.SuccessStep(five...) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
				root.Add(c.body, func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					semInfoMentions(t, as.State().ErrorInfo(), "4")
				})
				root.Add(log.step("next"))
			}, "handler InternalError")
		})
	}
}

// Bool of a float is by value: -0 is false, as 0 is (and as Int says), and
// a NaN is true. Bool read the bits, so -0 was true.
func TestSemValueFloatBool(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want bool
	}{{0, false}, {math.Copysign(0, -1), false}, {0.5, true}, {-1, true}, {math.NaN(), true}, {math.Inf(-1), true}} {
		if got := vm.Float(c.f).Bool(); got != c.want {
			t.Errorf("Float(%v).Bool() = %v, want %v", c.f, got, c.want)
		}
	}
}

// semStringer has a value String method, which a nil *semStringer cannot
// call.
type semStringer struct{ s string }

func (v semStringer) String() string { return v.s }

// String prints any Value, an Any holding a nil pointer to a Stringer
// included: as "<nil>", as fmt does, where calling the method panicked and
// the step that printed its Args failed with InternalError.
func TestSemValueStringNilStringer(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Success(vm.Any((*semStringer)(nil)), vm.Any(&semStringer{"set"}), vm.Any(semStringer{"value"}))
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("%s %s %s", a.String(0), a.String(1), a.String(2)) })
	}, "<nil> set value")
}

// Args are a copy of the values, not a view of the loop's registers: a
// step's Args captured by a closure that runs later (a sub-step, a loop
// body, an Await function on its own goroutine) still hold that step's
// values, after other flows have passed values of their own.
func TestSemArgsOutliveTheirStep(t *testing.T) {
	l, _ := semLoop()
	log := new(semLog)
	var kept vm.Args
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Success(vm.Int(7), vm.Str("seven"))
	}).Add(func(as vm.AsyncSteps, a vm.Args) {
		kept = a
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal() // other flows take turns meanwhile
			other := l.NewSteps()
			other.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Int(-1), vm.Str("other"), vm.Int(-2))
			}).Add(func(vm.AsyncSteps, vm.Args) {})
			other.Execute()
			l.Deferred(0, func() { as.Success(vm.Str("later")) })
		})
		as.Add(func(as vm.AsyncSteps, b vm.Args) {
			log.add("sub-step: %s, captured %d %s", b.String(0), a.Int(0), a.String(1))
			as.Repeat(2, func(as vm.AsyncSteps, i int) {
				log.add("iteration %d: captured %d %s", i, a.Int(0), a.String(1))
			})
		})
		as.Await(func(context.Context) (vm.Value, error) {
			return vm.Str(fmt.Sprintf("%d %s %d", a.Int(0), a.String(1), a.Len())), nil
		})
	}).Add(func(as vm.AsyncSteps, b vm.Args) {
		log.add("after Await: %s", b.String(0))
	})
	f := root.Promise()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { <-f.Done(); cancel() }()
	l.Run(ctx)
	semOK(t, f)
	semExpect(t, log,
		"sub-step: later, captured 7 seven",
		"iteration 0: captured 7 seven",
		"iteration 1: captured 7 seven",
		"after Await: 7 seven 2")
	if kept.Len() != 2 || kept.Int(0) != 7 || kept.String(1) != "seven" {
		t.Fatalf("Args kept past the flow = %v, want [7 seven]", kept.Values())
	}
}
