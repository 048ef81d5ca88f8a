package fuzz

import (
	"fmt"
	"strings"
	"time"

	"github.com/stepvm/stepvm/fuzz/prog"
	"github.com/stepvm/stepvm/vm"
)

// A program becomes closures on the VM: each adder an Add (Parallel, Loop,
// ...) whose function runs the statements of its body through the step's
// handle.

// toVM converts values for the VM; strings are copied so that only the VM
// keeps them alive.
func toVM(vals []prog.Value) []vm.Value {
	out := make([]vm.Value, len(vals))
	for i, v := range vals {
		switch v.Kind {
		case prog.Int:
			out[i] = vm.Int(v.Int)
		case prog.Float:
			out[i] = vm.Float(v.Float)
		case prog.Str:
			out[i] = vm.Str(strings.Clone(v.Str))
		case prog.Bool:
			out[i] = vm.Bool(v.Bool)
		}
	}
	return out
}

// fromArgs converts the values a step received.
func fromArgs(a vm.Args) []prog.Value {
	var out []prog.Value
	for i := range a.Len() {
		v := a.Get(i)
		switch v.Kind() {
		case vm.KindInt:
			out = append(out, prog.IntValue(v.Int()))
		case vm.KindFloat:
			out = append(out, prog.FloatValue(v.Float()))
		case vm.KindString:
			out = append(out, prog.StrValue(strings.Clone(v.String())))
		case vm.KindBool:
			out = append(out, prog.BoolValue(v.Bool()))
		default:
			out = append(out, prog.StrValue("<"+v.Kind().String()+">"))
		}
	}
	return out
}

// add adds the steps of adder s to as: a root, a step or a parallel
// accessor. lv are the loop variables s captures.
func (h *harness) add(as vm.AsyncSteps, s prog.Stmt, lv prog.LoopVars) {
	id := h.ids[s]
	switch s := s.(type) {
	case *prog.Step:
		as.Add(h.stepFn(id, s.Body, lv), h.catchFn(id, s.Catch, lv)...)
	case *prog.Parallel:
		p := as.Parallel(h.catchFn(id, s.Catch, lv)...)
		for _, b := range s.Branches {
			h.add(p, b, lv)
		}
	case *prog.Loop:
		as.Loop(func(as vm.AsyncSteps) {
			rr := h.rootOf(as)
			h.emit(rr, "iter "+id)
			h.exec(rr, as, id, s.Body, prog.Scope{}, lv)
		}, s.Label)
	case *prog.Repeat:
		as.Repeat(s.Count, func(as vm.AsyncSteps, i int) {
			rr := h.rootOf(as)
			h.emit(rr, fmt.Sprintf("iter %s %d", id, i))
			h.exec(rr, as, id, s.Body, prog.Scope{}, prog.LoopVars{Kind: prog.RepeatLoop, I: i})
		}, s.Label)
	case *prog.ForEach:
		body := func(as vm.AsyncSteps, k, v prog.Value) {
			rr := h.rootOf(as)
			h.emit(rr, "iter "+id+" "+k.String()+" "+v.String())
			h.exec(rr, as, id, s.Body, prog.Scope{}, prog.LoopVars{Kind: prog.ForEachLoop, Key: k, Val: v})
		}
		if s.IsMap {
			m := make(map[string]prog.Value, len(s.Keys))
			for i, k := range s.Keys {
				m[k] = s.Values[i]
			}
			vm.ForEachMap(as, m, func(as vm.AsyncSteps, k string, v prog.Value) {
				body(as, prog.StrValue(k), v)
			}, s.Label)
		} else {
			vm.ForEach(as, s.Values, func(as vm.AsyncSteps, i int, v prog.Value) {
				body(as, prog.IntValue(int64(i)), v)
			}, s.Label)
		}
	case *prog.SuccessStep:
		as.SuccessStep(toVM(s.Values)...)
	case *prog.Sync:
		as.Sync(h.mutexes[s.Mutex], h.stepFn(id, s.Body, lv), h.catchFn(id, s.Catch, lv)...)
	case *prog.Copy:
		as.CopyFrom(h.models[s.Model])
	default:
		panic(fmt.Sprintf("harness: %T is not an adder", s))
	}
}

// stepFn is the function of a step (or sync section) id: it traces its
// entry with the values it received and runs its body.
func (h *harness) stepFn(id string, body []prog.Stmt, lv prog.LoopVars) vm.ExecFunc {
	return func(as vm.AsyncSteps, a vm.Args) {
		rr := h.rootOf(as)
		args := fromArgs(a)
		h.emit(rr, "enter "+id+prog.FormatValues(args))
		h.exec(rr, as, id, body, prog.Scope{Args: args}, lv)
	}
}

// catchFn is the error handler of step id, none if b is nil. Once it
// runs, the harness no longer completes the step.
func (h *harness) catchFn(id string, b *prog.Block, lv prog.LoopVars) []vm.ErrorFunc {
	if b == nil {
		return nil
	}
	return []vm.ErrorFunc{func(as vm.AsyncSteps, code string) {
		rr := h.rootOf(as)
		delete(h.waiting, as)
		h.emit(rr, "catch "+id+" "+code)
		h.exec(rr, as, id, b.Stmts, prog.Scope{Code: code}, lv)
	}}
}

// exec runs the statements of a step body, loop body, error handler or
// cancel handler with the handle of its step.
func (h *harness) exec(rr *rootRun, as vm.AsyncSteps, id string, stmts []prog.Stmt, sc prog.Scope, lv prog.LoopVars) {
	sc.Loop = lv
	sc.State = stateOf(as)
	expand := func(s string) string {
		sc.Info = as.State().ErrorInfo()
		return sc.Expand(s)
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case *prog.Print:
			h.emit(rr, "print "+expand(s.Text))
		case *prog.Set:
			as.State().Set(s.Var, expand(s.Text))
		case *prog.Timeout:
			as.SetTimeout(time.Duration(s.MS) * time.Millisecond)
		case *prog.OnCancel:
			args := sc.Args
			as.SetCancel(func(as vm.AsyncSteps) {
				h.emit(rr, "cancel "+id)
				h.exec(rr, as, id, s.Body.Stmts, prog.Scope{Args: args}, lv)
			})
		case *prog.Stack:
			h.stack(rr, as, id, s)
		case *prog.Success:
			as.Success(toVM(s.Values)...)
			return
		case *prog.Error:
			as.Error(s.Code, s.Info)
			h.fail("Error returned inside a step of %s", id)
			return
		case *prog.Panic:
			panic(s.Text)
		case *prog.Wait:
			as.WaitExternal()
			switch {
			case s.Then != nil && s.Resumer:
				h.resumeLater(rr, as.Resumer(), id, s)
			case s.Then != nil:
				h.waiting[as] = true
				h.completeLater(rr, as, id, s)
			}
			return
		case *prog.Break:
			as.Break(s.Label)
			h.fail("Break returned inside a step of %s", id)
			return
		case *prog.Continue:
			as.Continue(s.Label)
			h.fail("Continue returned inside a step of %s", id)
			return
		case *prog.Cancel:
			if s.Release {
				h.rootNamed(s.Root).as.Release()
			} else {
				h.rootNamed(s.Root).as.Cancel()
			}
			return
		default:
			h.add(as, s, lv)
		}
	}
}

// completeLater completes a waiting step when w says, if its
// error handler has not run. A completion that comes once the step has
// ended (its timeout fired, its root was canceled) is made all the same,
// and every completion is made twice: through a stale handle, whose step's
// memory another step may own by now, both must do nothing.
func (h *harness) completeLater(rr *rootRun, as vm.AsyncSteps, id string, w *prog.Wait) {
	h.later(w, func() {
		if !h.waiting[as] {
			return
		}
		if as.Valid() {
			h.emit(rr, "resume "+id)
		}
		complete := func() {
			switch t := w.Then.(type) {
			case *prog.Success:
				as.Success(toVM(t.Values)...)
			case *prog.Error:
				as.Error(t.Code, t.Info)
			}
		}
		complete()
		// The step ended unless its error handler ran (and took it out of
		// waiting): a second completion is then a late one.
		if h.waiting[as] {
			delete(h.waiting, as)
			complete()
		}
	})
}

// later runs fn w.Turns Immediates later, or from a timer w.MS
// milliseconds later.
func (h *harness) later(w *prog.Wait, fn func()) {
	if w.MS > 0 {
		h.loop.Deferred(time.Duration(w.MS)*time.Millisecond, fn)
		return
	}
	k := w.Turns
	var tick func()
	tick = func() {
		if k--; k > 0 {
			h.loop.Immediate(tick)
			return
		}
		fn()
	}
	h.loop.Immediate(tick)
}

// resumeLater completes a waiting step through its Resumer
// when w says, whatever became of the step meanwhile, and then again.
// The Resumer accepts the first completion while the step still waits (it
// reaches the step at the start of the next pass, if the step waits then)
// and turns down every other one.
func (h *harness) resumeLater(rr *rootRun, rs vm.Resumer, id string, w *prog.Wait) {
	h.later(w, func() {
		complete := func() bool {
			switch t := w.Then.(type) {
			case *prog.Success:
				return rs.Success(toVM(t.Values)...)
			case *prog.Error:
				return rs.Error(t.Code, t.Info)
			}
			return false
		}
		if complete() {
			h.emit(rr, "resume "+id)
		}
		if complete() {
			h.fail("the Resumer of %s accepted a second completion", id)
		}
	})
}
