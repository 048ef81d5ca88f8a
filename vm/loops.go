package vm

import (
	"cmp"
	"slices"

	"github.com/stepvm/stepvm/opcodes"
)

// Loops (FTN12 2.2.4). Each adds one step that runs the body as a sub-step
// per iteration, in a turn of its own; on a parallel accessor each adds a
// branch. Break and Continue unwind to the innermost loop, or to the loop
// with the given label, through any depth of sub-steps and branches: the
// cancel handlers of the steps they leave run, their error handlers do not.
// An error leaves the loop for the outer error handlers.

func (as AsyncSteps) addLoop(op opcodes.Op, body any, count uint64, label []string) {
	q := as.target(op.String())
	if q == nil {
		return
	}
	r := as.r
	n := r.newNode(op)
	n.Fn = r.put(body)
	if len(label) > 0 && label[0] != "" {
		n.Err = r.put(nil)
		r.setLabel(n.Err, label[0])
	}
	if op == opcodes.OpRepeat {
		n.Ops().B = count
	}
	push(q, n)
}

// Loop runs fn until Break.
func (as AsyncSteps) Loop(fn func(as AsyncSteps), label ...string) {
	if f := as.foreign(); f != nil {
		f.Loop(fn, firstString(label))
		return
	}
	if fn == nil {
		as.misuse("Loop with a nil body")
		return
	}
	as.addLoop(opcodes.OpLoop, fn, 0, label)
}

// MakeLoop is Loop under its FTN12 1.10 name.
func (as AsyncSteps) MakeLoop(fn func(as AsyncSteps), label ...string) { as.Loop(fn, label...) }

// Repeat runs fn count times with i = 0..count-1; a count of 0 or less runs
// nothing.
func (as AsyncSteps) Repeat(count int, fn func(as AsyncSteps, i int), label ...string) {
	if f := as.foreign(); f != nil {
		f.Repeat(count, fn, firstString(label))
		return
	}
	if fn == nil {
		as.misuse("Repeat with a nil body")
		return
	}
	as.addLoop(opcodes.OpRepeat, fn, uint64(max(count, 0)), label)
}

// ForEach runs fn for every element of s, in order.
func ForEach[T any](as AsyncSteps, s []T, fn func(as AsyncSteps, i int, v T), label ...string) {
	if fn == nil {
		as.misuse("ForEach with a nil body")
		return
	}
	as.Repeat(len(s), func(as AsyncSteps, i int) { fn(as, i, s[i]) }, label...)
}

// ForEachMap runs fn for every entry of m, in the order of sorted keys.
// The keys are collected when ForEachMap is called.
func ForEachMap[K cmp.Ordered, V any](as AsyncSteps, m map[K]V, fn func(as AsyncSteps, k K, v V), label ...string) {
	if fn == nil {
		as.misuse("ForEachMap with a nil body")
		return
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	as.Repeat(len(keys), func(as AsyncSteps, i int) { fn(as, keys[i], m[keys[i]]) }, label...)
}

// Break leaves the innermost loop, or the loop labelled label. Called in a
// step's function or error handler, as it must be, it does not return: it
// unwinds as Error does.
func (as AsyncSteps) Break(label ...string) { as.loopCtl(unwindBreak, label) }

// Continue starts the next iteration of the innermost loop, or of the loop
// labelled label. Called in a step's function or error handler, as it must
// be, it does not return: it unwinds as Error does.
func (as AsyncSteps) Continue(label ...string) { as.loopCtl(unwindContinue, label) }

func (as AsyncSteps) loopCtl(u *unwinding, label []string) {
	if f := as.foreign(); f != nil {
		foreignLoopCtl(f, u, label)
		return
	}
	n, ok := as.frame()
	if !ok || as.r.l.inCall != frameID(n) {
		as.misuse("Break or Continue outside of a step's execution")
		return
	}
	l := as.r.l
	l.pend.label = ""
	if len(label) > 0 {
		l.pend.label = label[0]
	}
	n.Flags |= opcodes.FlagRaised // see swallowed
	panic(u)
}
