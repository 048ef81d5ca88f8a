package vm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// semCloneReport fails t unless f failed with a set-up report that mentions
// words.
func semCloneReport(t *testing.T, f *vm.Future, words ...string) {
	t.Helper()
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, words...)
}

// A model whose set-up was misused passes its report to every copy: one
// copied inside a step, two clones, and one cloned before the model is
// released. Each fails once, before any copied step; the report is
// consumed, and the copies' next runs succeed.
func TestSemCloneMisusedModelCopies(t *testing.T) {
	l, _ := semLoop()
	ran := 0
	model := l.NewSteps()
	model.Add(func(vm.AsyncSteps, vm.Args) { ran++ })
	model.Add(nil)

	// CopyFrom inside a step.
	in := l.NewSteps()
	in.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.CopyFrom(model)
		as.Add(func(vm.AsyncSteps, vm.Args) { ran += 100 })
	})
	fin := in.Promise()
	// Copied twice.
	c1, c2 := model.Clone(), model.Clone()
	f1, f2 := c1.Promise(), c2.Promise()
	l.RunUntilIdle()
	semCloneReport(t, fin, "nil step function")
	semCloneReport(t, f1, "nil step function")
	semCloneReport(t, f2, "nil step function")
	if ran != 0 {
		t.Fatalf("ran %d", ran)
	}
	// Released after copying.
	c3 := model.Clone()
	model.Release()
	f3 := c3.Promise()
	l.RunUntilIdle()
	semCloneReport(t, f3, "nil step function")
	// The copies run again clean.
	for _, c := range []vm.AsyncSteps{in, c1, c2, c3} {
		c.Add(func(vm.AsyncSteps, vm.Args) { ran++ })
		f := c.Promise()
		l.RunUntilIdle()
		semOK(t, f)
	}
	for _, c := range []vm.AsyncSteps{in, c1, c2, c3} {
		c.Release()
	}
	semClean(t, l)
}

// Misuse in setting up a copy after copying fails the copy's run once, and
// not the model's; misuse of the model after copying fails the model's run
// only. Both next runs succeed.
func TestSemCloneMisuseAfterCopying(t *testing.T) {
	l, _ := semLoop()
	model := l.NewSteps()
	model.Add(func(vm.AsyncSteps, vm.Args) {})
	c := model.Clone()
	c.Add(nil)           // the copy's own report
	c.Success(vm.Int(1)) // second: ignored
	model.Add(nil)       // the model's, after copying: not the copy's
	f := c.Promise()
	l.RunUntilIdle()
	semCloneReport(t, f, "nil step function")
	// The report is consumed; the copy runs clean next time.
	ok := false
	c.Add(func(vm.AsyncSteps, vm.Args) { ok = true })
	f = c.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if !ok {
		t.Fatal("second run did not run")
	}
	// Model still fails.
	mf := model.Promise()
	l.RunUntilIdle()
	semCloneReport(t, mf, "nil step function")
	// model once more clean
	model.Add(func(vm.AsyncSteps, vm.Args) {})
	mf = model.Promise()
	l.RunUntilIdle()
	semOK(t, mf)
	c.Release()
	model.Release()
	semClean(t, l)
}

// A model whose parallel branches take Stack memory in their steps and
// sub-steps is cloned and run 60 times, each clone ending by a timeout, a
// Cancel or a Release while a branch waits: every allocation is destroyed
// once and the loop is left clean.
func TestSemCloneParallelStackRuns(t *testing.T) {
	l, clk := semLoop()
	destroyed, allocated := 0, 0
	model := l.NewSteps()
	p := model.Parallel()
	for b := range 4 {
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			for range 3 + b {
				*vm.Stack[int64](as) = 1
				as.StackRaw(16, func(unsafe.Pointer) { destroyed++ })
				allocated++
			}
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.StackRaw(8, func(unsafe.Pointer) { destroyed++ })
				allocated++
				if b == 2 {
					as.SetTimeout(time.Second)
				}
			})
		})
	}
	model.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str("done")) })
	for i := range 60 {
		c := model.Clone()
		f := c.Promise()
		l.RunUntilIdle()
		switch i % 3 {
		case 0:
			clk.Advance(2 * time.Second)
			l.RunUntilIdle()
			semFail(t, f, vm.Timeout)
		case 1:
			c.Cancel()
			l.RunUntilIdle()
			if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("canceled clone: %v", err)
			}
		case 2:
			c.Release()
			l.RunUntilIdle()
			semResult(t, f)
			continue
		}
		c.Release()
	}
	if destroyed != allocated {
		t.Fatalf("destroyed %d of %d", destroyed, allocated)
	}
	model.Release()
	semClean(t, l)
}

// A clone of a model larger than a pooled root keeps (400 slots, 200 loop
// labels, 101 variables) runs and is released; its root, drawn again from
// the pool, runs a small flow with labelled loops without a label, a
// variable or a table of the large run.
func TestSemCloneLargeModelPooled(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	for i := range 200 {
		model.Add(func(as vm.AsyncSteps, _ vm.Args) {}, func(as vm.AsyncSteps, code string) {})
		model.Repeat(1, func(as vm.AsyncSteps, _ int) { as.Break(fmt.Sprint("L", i)) }, fmt.Sprint("L", i))
	}
	model.State().Set("big", 1)
	for k := range 100 {
		model.State().Set(fmt.Sprint("k", k), k)
	}
	for range 3 {
		c := model.Clone()
		f := c.Promise()
		l.RunUntilIdle()
		semOK(t, f)
		c.Release()
		n := l.NewSteps()
		if keys := n.State().Keys(); len(keys) != 0 {
			t.Fatalf("pooled root kept state %d", len(keys))
		}
		n.Loop(func(as vm.AsyncSteps) {
			as.Loop(func(as vm.AsyncSteps) { log.add("inner"); as.Break("outer") }, "inner")
		}, "outer")
		nf := n.Promise()
		l.RunUntilIdle()
		semOK(t, nf)
		n.Release()
	}
	if s, st := vm.PooledTables(l); s > 64 || st > 64 {
		t.Fatalf("pooled tables %d %d", s, st)
	}
	model.Release()
	semClean(t, l)
}

// A model changed after it was cloned (a branch added to its parallel
// step, a step, a variable changed and one added) and then released leaves
// the clone as it was.
func TestSemCloneModelChangedAfter(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	model.State().Set("v", "old")
	model.Add(log.step("a"))
	p := model.Parallel()
	p.Add(log.step("b1"))
	c := model.Clone()
	p.Add(log.step("b2 (model only)"))
	model.Add(log.step("c (model only)"))
	model.State().Set("v", "new")
	model.State().Set("w", 1)
	model.Release()
	c.Add(func(as vm.AsyncSteps, _ vm.Args) {
		v, _ := as.State().Get("v")
		log.add("v=%v w=%v", v, as.State().Exists("w"))
	})
	f := c.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "a", "b1", "v=old w=false")
	c.Release()
	semClean(t, l)
}

// Clones made while the model unwinds an error (from its error handler,
// a cancel handler, a destroy callback) or is released (a destroy callback;
// a cancel handler that copies into a new root and misuses the model) get
// the steps still queued and run them once.
func TestSemCloneDuringUnwind(t *testing.T) {
	for _, where := range []string{"handler", "cancel", "destroy", "release-destroy", "release-cancel-copyinto"} {
		t.Run(where, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			model := l.NewSteps()
			var clones []vm.AsyncSteps
			clone := func() { clones = append(clones, model.Clone()) }
			model.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					switch where {
					case "cancel", "release-cancel-copyinto":
						as.SetCancel(func(vm.AsyncSteps) {
							if where == "cancel" {
								clone()
							} else {
								x := l.NewSteps()
								x.CopyFrom(model)
								model.CopyFrom(x) // misuse on a running root: recorded
								clones = append(clones, x)
							}
						})
					case "destroy", "release-destroy":
						as.StackRaw(8, func(unsafe.Pointer) { clone() })
					}
					if strings.HasPrefix(where, "release") {
						as.WaitExternal()
						return
					}
					as.Error("E")
				})
			}, func(as vm.AsyncSteps, code string) {
				if where == "handler" {
					clone()
				}
			})
			model.Add(log.step("after"))
			mf := model.Promise()
			l.RunUntilIdle()
			if strings.HasPrefix(where, "release") {
				model.Release()
			} else {
				semFail(t, mf, "E")
			}
			if len(clones) != 1 {
				t.Fatalf("%d clones", len(clones))
			}
			for _, c := range clones {
				f := c.Promise()
				l.RunUntilIdle()
				semOK(t, f)
				c.Release()
			}
			semExpect(t, &log, "after")
			if !strings.HasPrefix(where, "release") {
				model.Release()
			}
			semClean(t, l)
		})
	}
}

// A clone's step releases the model, gets its root back from the pool and
// copies the clone's own queue into it, from the step and from a parallel
// branch of it: the reused root runs what it copied, with its own state.
func TestSemCloneModelRootReusedFromClone(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	model := l.NewSteps()
	model.State().Set("who", "model")
	var again vm.AsyncSteps
	model.Add(func(as vm.AsyncSteps, _ vm.Args) {
		if !model.Valid() {
			return
		}
		model.Release()
		again = l.NewSteps() // the model's root, back from the pool
		again.CopyFrom(vm.RootOf(as))
		again.State().Set("who", "again")
		p := as.Parallel()
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { *vm.Stack[int](as) = 1; log.add("branch") })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { again.CopyFrom(vm.RootOf(as)) })
	})
	model.Add(func(as vm.AsyncSteps, _ vm.Args) {
		who, _ := as.State().Get("who")
		log.add("tail of %v", who)
	})
	c := model.Clone()
	f := c.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	af := again.Promise()
	l.RunUntilIdle()
	semOK(t, af)
	semExpect(t, &log, "branch", "tail of model", "tail of again", "tail of again")
	c.Release()
	again.Release()
	semClean(t, l)
}

// A SuccessStep's values are its own in every copy: the buffer a clone's
// step gives back to the loop once it has run, and another SuccessStep
// takes and fills, is not the model's, nor another clone's, whether the
// model waits to be cloned or is itself running.
func TestSemCloneSuccessStepValuesAreOwn(t *testing.T) {
	l, _ := semLoop()
	model := l.NewSteps()
	model.SuccessStep(vm.Int(7), vm.Str("seven"))
	check := func(f *vm.Future, want int64) {
		t.Helper()
		args := semOK(t, f)
		if args.Int(0) != want || args.Len() != 2 {
			t.Fatalf("a flow ended with %d and %d values, want %d and 2", args.Int(0), args.Len(), want)
		}
	}
	for i := range 3 {
		c := model.Clone()
		other := l.NewSteps()
		other.SuccessStep(vm.Int(int64(100+i)), vm.Str("other"))
		f, g := c.Promise(), other.Promise()
		l.RunUntilIdle()
		check(f, 7)
		check(g, int64(100+i))
		c.Release()
		other.Release()
	}
	// A clone of a root whose run has not reached its SuccessStep yet.
	running := l.NewSteps()
	running.Add(func(as vm.AsyncSteps, _ vm.Args) {})
	running.SuccessStep(vm.Int(8), vm.Str("eight"))
	f := running.Promise()
	c := running.Clone()
	g := c.Promise()
	l.RunUntilIdle()
	check(f, 8)
	check(g, 8)
	again := model.Clone()
	h := again.Promise()
	l.RunUntilIdle()
	check(h, 7)
	for _, as := range []vm.AsyncSteps{running, c, again, model} {
		as.Release()
	}
}
