package model

import (
	"sort"
	"strconv"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// step runs the next instruction of th: the next iteration of its loop,
// or the next queued step of its innermost frame, or, if none is left,
// the completion of that frame.
func (m *machine) step(th *thread, args []prog.Value) {
	f := th.top
	if f.kind == fLoop {
		m.iterate(f)
		return
	}
	if len(f.queue) == 0 {
		m.complete(f, args)
		return
	}
	pd := f.queue[0]
	f.queue = f.queue[1:]
	n := m.pushFrame(pd, f, th)
	switch n.kind {
	case fStep:
		var body []prog.Stmt
		switch s := pd.stmt.(type) {
		case *prog.Step:
			body = s.Body
		case *prog.Sync:
			body = s.Body
		}
		n.args = args
		m.emit(th.flow, "enter "+n.id+prog.FormatValues(args))
		m.after(n, m.exec(n, body, prog.Scope{Args: args}, false))
	case fSuccess:
		m.complete(n, pd.stmt.(*prog.SuccessStep).Values)
	case fParallel:
		m.startParallel(n)
	case fLoop:
		m.iterate(n)
	case fSync:
		m.enterSync(n, args)
	}
}

// pushFrame makes the queued step pd the innermost frame of th.
func (m *machine) pushFrame(pd pending, parent *frame, th *thread) *frame {
	f := &frame{th: th, parent: parent, loop: pd.loop, alive: true, id: m.ids[pd.stmt]}
	switch s := pd.stmt.(type) {
	case *prog.Step:
		f.kind, f.catch = fStep, s.Catch
	case *prog.SuccessStep:
		f.kind = fSuccess
	case *prog.Parallel:
		f.kind, f.catch, f.queue = fParallel, s.Catch, pd.branches
	case *prog.Loop:
		f.kind, f.label, f.body, f.count = fLoop, s.Label, s.Body, -1
	case *prog.Repeat:
		f.kind, f.label, f.body, f.count, f.loopOf = fLoop, s.Label, s.Body, s.Count, prog.RepeatLoop
	case *prog.ForEach:
		f.kind, f.label, f.body, f.count, f.loopOf = fLoop, s.Label, s.Body, len(s.Values), prog.ForEachLoop
		f.keys, f.values = forEachItems(s)
	case *prog.Sync:
		mx := m.mutexes[s.Mutex]
		switch {
		case pd.section:
			f.kind, f.catch = fStep, s.Catch
		case pd.inner:
			f.kind, f.mutex = fSync, mx.rate
			f.queue = []pending{{stmt: s, loop: pd.loop, section: true}}
		case mx.rate != nil: // a Limiter: its Mutex, then its Throttle
			f.kind, f.mutex = fSync, mx
			f.queue = []pending{{stmt: s, loop: pd.loop, inner: true}}
		default:
			f.kind, f.mutex = fSync, mx
			f.queue = []pending{{stmt: s, loop: pd.loop, section: true}}
		}
	}
	th.top = f
	return f
}

// forEachItems returns the keys and values a forEach iterates over: a
// list's indexes, or a map's keys in sorted order (vm.ForEachMap).
func forEachItems(s *prog.ForEach) (keys, values []prog.Value) {
	if !s.IsMap {
		for i, v := range s.Values {
			keys = append(keys, prog.IntValue(int64(i)))
			values = append(values, v)
		}
		return keys, values
	}
	idx := make([]int, len(s.Keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return s.Keys[idx[a]] < s.Keys[idx[b]] })
	for _, i := range idx {
		keys = append(keys, prog.StrValue(s.Keys[i]))
		values = append(values, s.Values[i])
	}
	return keys, values
}

// outcome is how a step body or a handler ended.
type outcome struct {
	kind   outKind
	values []prog.Value
	code   string
	info   string
	label  string
}

type outKind uint8

const (
	outReturn outKind = iota
	outSuccess
	outError
	outBreak
	outContinue
)

// exec runs the statements of a step body, loop body or (handler) error
// or cancel handler of frame f, in order.
func (m *machine) exec(f *frame, stmts []prog.Stmt, sc prog.Scope, handler bool) outcome {
	fl := f.th.flow
	sc.Loop = f.loop
	sc.State = lookup(fl.state)
	expand := func(s string) string {
		sc.Info = fl.info
		return sc.Expand(s)
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case *prog.Print:
			m.emit(fl, "print "+expand(s.Text))
		case *prog.Set:
			fl.state[s.Var] = expand(s.Text)
		case *prog.Timeout:
			m.setTimeout(f, s.MS)
		case *prog.OnCancel:
			f.onCancel = s.Body
		case *prog.Stack:
			f.allocs = append(f.allocs, s)
		case *prog.Success:
			return outcome{kind: outSuccess, values: s.Values}
		case *prog.Error:
			if sc.Code == "" && len(f.queue) > 0 { // FTN12 2.1: a step (not a handler) with sub-steps must not fail
				return outcome{kind: outError, code: "InternalError",
					info: "Error(" + s.Code + ") after sub-steps were added: a step with sub-steps completes when they do"}
			}
			return outcome{kind: outError, code: s.Code, info: s.Info}
		case *prog.Panic:
			return outcome{kind: outError, code: "InternalError", info: s.Text}
		case *prog.Wait:
			f.waitExt = true
			switch {
			case s.Then != nil && s.Resumer:
				f.resumer = resumerLive
				m.resumeLater(f, s)
			case s.Then != nil:
				f.waiting = true
				m.completeLater(f, s)
			}
			return outcome{kind: outReturn}
		case *prog.Break:
			return outcome{kind: outBreak, label: s.Label}
		case *prog.Continue:
			return outcome{kind: outContinue, label: s.Label}
		case *prog.Cancel:
			target := m.flowNamed(s.Root)
			if target.released {
				// The root's handle is stale: misuse, which fails the
				// calling flow from a step or error handler and is only
				// recorded from a cancel handler (vm's misuse).
				if m.inCancel > 0 {
					return outcome{kind: outReturn}
				}
				verb := "Cancel"
				if s.Release {
					verb = "Release"
				}
				return outcome{kind: outError, code: "InternalError", info: verb + " on a handle that is not a live root"}
			}
			m.cancelFlow(target)
			if s.Release { // a cancel that ran it releases it all the same
				target.released = true
			}
			return outcome{kind: outReturn}
		default: // an adder
			m.add(&f.queue, s, f.loop, fl.state)
		}
	}
	return outcome{kind: outReturn}
}

// after carries out how the body of step or iteration frame f ended. A
// body that canceled its own root has nothing left to carry out.
func (m *machine) after(f *frame, out outcome) {
	if !f.alive {
		return
	}
	switch out.kind {
	case outError:
		f.th.flow.info = out.info
		m.raise(f.th, out.code)
	case outBreak, outContinue:
		m.loopControl(f.th, out.kind == outBreak, out.label)
	case outSuccess:
		m.completeIn(f, out.values, true)
	case outReturn:
		switch {
		case len(f.queue) > 0:
			m.schedule(f.th, nil)
		case f.waitExt || f.timer != nil || f.onCancel != nil:
			// Waits for a completion, its timeout or a cancel.
		default:
			m.complete(f, nil) // implicit success (FTN12 1.6)
		}
	}
}

// complete ends frame f with success and args, then every enclosing frame
// whose queue is drained, and schedules what comes next.
func (m *machine) complete(f *frame, args []prog.Value) { m.completeIn(f, args, false) }

// completeIn is complete; inCall reports that a step function or error
// handler of f's thread called Success. A thread whose last frame ends
// that way ends in its next turn, also when the handler ran outside the
// thread's turn: from a timer, a Resumer's completion or the turn of a
// branch whose error reached it (vm's complete).
func (m *machine) completeIn(f *frame, args []prog.Value, inCall bool) {
	for {
		th := f.th
		if f.kind == fBase {
			if inCall {
				m.schedule(th, args)
				return
			}
			if f.parent == nil {
				m.finish(th.flow, prog.DoneOK(args))
			} else {
				m.branchDone(th)
			}
			return
		}
		p := f.parent
		m.popFrame(f)
		if p.kind == fLoop {
			m.schedule(th, nil) // the next iteration
			return
		}
		if len(p.queue) > 0 {
			m.schedule(th, args)
			return
		}
		f = p
	}
}

// popFrame removes the innermost frame f of its thread and ends it.
func (m *machine) popFrame(f *frame) {
	f.th.top = f.parent
	if f.kind == fSync {
		m.exitSync(f)
	}
	stopTimer(f)
	f.onCancel = nil
	f.waiting = false
	f.resumer = resumerNone
	for i := len(f.allocs) - 1; i >= 0; i-- {
		m.emit(f.th.flow, prog.FreeEvent(f.id, f.allocs[i]))
	}
	f.allocs = nil
	f.queue = nil
	f.alive = false
}

func (m *machine) finish(fl *flow, done string) {
	fl.running = false
	fl.done = done
	if m.cur != nil && m.cur.flow == fl {
		m.cont = false
	}
}

func (m *machine) startParallel(P *frame) {
	if len(P.queue) == 0 {
		m.complete(P, nil)
		return
	}
	for _, pd := range P.queue {
		b := &thread{flow: P.th.flow}
		b.base = &frame{kind: fBase, th: b, parent: P, alive: true, queue: []pending{pd}}
		b.top = b.base
		P.branches = append(P.branches, b)
	}
	P.queue = nil
	P.running = len(P.branches)
	for _, b := range P.branches {
		m.push(b, nil)
	}
}

func (m *machine) branchDone(b *thread) {
	m.stop(b)
	b.done = true
	P := b.base.parent
	P.running--
	if P.running > 0 {
		return
	}
	P.branches = nil
	m.complete(P, nil)
}

// iterate runs the next iteration of loop frame L, or completes L when its
// count is reached. An iteration whose body returns with nothing to wait
// for ends on the spot, and while nothing else is queued the next one runs
// in the same instruction while the turn's budget (runTask) lasts: the
// VM's iterate and callIterations, where the first iteration is the
// instruction's own and each further one takes one of the budget. A
// completion posted meanwhile waits for all of them (a Resumer's; a 0 ms
// timer's).
func (m *machine) iterate(L *frame) {
	th := L.th
	for ; ; m.budget-- {
		if L.count >= 0 && L.next >= L.count {
			m.complete(L, nil)
			return
		}
		i := L.next
		L.next++
		it := &frame{kind: fIter, th: th, parent: L, id: L.id, alive: true, loop: L.loop}
		th.top = it
		event := "iter " + L.id
		switch L.loopOf {
		case prog.RepeatLoop:
			it.loop = prog.LoopVars{Kind: prog.RepeatLoop, I: i}
			event += " " + strconv.Itoa(i)
		case prog.ForEachLoop:
			it.loop = prog.LoopVars{Kind: prog.ForEachLoop, Key: L.keys[i], Val: L.values[i]}
			event += " " + L.keys[i].String() + " " + L.values[i].String()
		}
		m.emit(th.flow, event)
		out := m.exec(it, L.body, prog.Scope{}, false)
		plain := it.alive && th.top == it && out.kind == outReturn && len(it.queue) == 0 &&
			!it.waitExt && it.timer == nil && it.onCancel == nil && len(it.allocs) == 0
		if !plain || m.budget <= 0 || len(m.queue) > 0 {
			m.after(it, out)
			return
		}
		m.popFrame(it)
	}
}
