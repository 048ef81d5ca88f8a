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

// ForEach runs fn for every element of s, in order. As in a range over
// s, its length is taken when ForEach is called (elements appended later
// are not visited), and each element is read when its iteration runs.
func ForEach[T any](as AsyncSteps, s []T, fn func(as AsyncSteps, i int, v T), label ...string) {
	if fn == nil {
		as.misuse("ForEach with a nil body")
		return
	}
	as.Repeat(len(s), func(as AsyncSteps, i int) { fn(as, i, s[i]) }, label...)
}

// ForEachMap runs fn for every entry of m, in the order of sorted keys.
// The keys are collected when ForEachMap is called; each iteration reads
// its key's value then. As in a range over a map, a key deleted before its
// iteration is skipped (not visited with V's zero value), and a key added
// meanwhile is not visited. (A NaN key, which no lookup finds, is visited
// with the value it had when the keys were collected.)
func ForEachMap[K cmp.Ordered, V any](as AsyncSteps, m map[K]V, fn func(as AsyncSteps, k K, v V), label ...string) {
	if fn == nil {
		as.misuse("ForEachMap with a nil body")
		return
	}
	keys := make([]K, 0, len(m))
	var nan []V // the values of the NaN keys, which sort first
	for k, v := range m {
		keys = append(keys, k)
		if k != k { // a NaN
			nan = append(nan, v)
		}
	}
	slices.Sort(keys)
	as.Repeat(len(keys), func(as AsyncSteps, i int) {
		if i < len(nan) {
			fn(as, keys[i], nan[i])
			return
		}
		if v, ok := m[keys[i]]; ok {
			fn(as, keys[i], v)
		}
	}, label...)
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
	l.raiseInCall(u)
}

// iterate runs the next iteration of loop frame L, or completes L when a
// Repeat has run its count. Iterations whose body returns without adding
// sub-steps or waiting complete on the spot, and while nothing else is
// queued and the dispatch's budget lasts the next one runs in the same
// turn (as the inline continuation would), reusing the iteration frame and
// the protected call: an empty iteration costs a call. The first iteration
// is the dispatch round's own; iterate returns the budget the others left.
func (l *Loop) iterate(r *root, th, L *Node, budget int) int {
	thSeq := th.Seq
	var as AsyncSteps
	live, p, budget := l.callIterations(r, th, L, &as, budget)
	n := as.n
	if n == nil { // the Repeat has run its count
		l.complete(r, th, L, nil)
		return budget
	}
	if live && n.Head != 0 && l.raised == nil {
		l.schedule(r, th, nil) // after's common case in line: the body added steps
		return budget
	}
	l.after(r, th, thSeq, as, p)
	return budget
}

// callIterations runs iterations of L under one recover until one does not
// end by implicit success, budget runs out, other work is queued, or a
// Repeat has run its count (as.n is nil then). as is the handle of the last
// iteration run; live reports returnedLive of its call, which the loop has
// tested already; left is what remains of budget.
func (l *Loop) callIterations(r *root, th, L *Node, as *AsyncSteps, budget int) (live bool, p any, left int) {
	prev := l.enter(0)
	returned := false
	defer func() {
		if !returned { // as in callExec
			left = budget
			// after takes what the iteration raised.
			if p = recover(); p == nil && goexits {
				// A Goexit: the body is a step of the dispatched thread,
				// its frame the top one; depth stays raised for the next
				// pass to recover (see goexit.go).
				p = l.noteGoexit(exitStep, nil)
				return
			}
			// live may still be an earlier iteration's, which ended at
			// once: iterate would schedule the sub-steps this one added
			// and drop what it raised.
			live = false
		}
		l.leave(prev)
	}()
	epoch := r.runEpoch
	Lk := th.Ops().Top() // L is the innermost frame
	// rep is set exactly for a Repeat (bodies are not nil), loop otherwise.
	var rep func(AsyncSteps, int)
	var loop func(AsyncSteps)
	if L.Op == opcodes.OpRepeat {
		rep, _ = r.slot(L.Fn).(func(AsyncSteps, int))
	} else {
		loop, _ = r.slot(L.Fn).(func(AsyncSteps))
	}
	for ; ; budget-- {
		var i uint64
		if rep != nil {
			o := L.Ops()
			if o.A >= o.B {
				*as = AsyncSteps{}
				returned = true
				return false, nil, budget
			}
			i = o.A
			o.A++
		}
		var it *Node
		itk := L.Tail
		if itk != 0 { // an iteration frame parked by the previous iteration
			it = at(itk)
			L.Tail = 0
			it.Seq = r.nextSeq()
		} else {
			it = r.newNode(opcodes.OpIter)
			itk = link(it)
		}
		it.Parent = Lk
		it.Flags = opcodes.FlagRunning
		L.Flags |= opcodes.FlagChild
		th.Ops().SetTop(itk)
		*as = AsyncSteps{r: r, n: it, seq: it.Seq, epoch: epoch}
		l.inCall = frameID(it)
		if rep != nil {
			rep(*as, int(i))
		} else {
			loop(*as)
		}
		l.inCall = 0
		live = r.runEpoch == epoch && it.Seq == as.seq && th.Ops().Top() == itk
		if !live || it.Head != 0 || it.Next != 0 || it.Flags != opcodes.FlagRunning ||
			budget <= 0 || l.runq.len() > 0 || l.raised != nil {
			returned = true
			return live, nil, budget // the caller finishes this iteration as any step
		}
		th.Ops().SetTop(Lk) // implicit success: park the frame for the next iteration
		L.Flags &^= opcodes.FlagChild
		it.Seq = 0
		L.Tail = itk
	}
}

// loopControl carries out Break (brk) or Continue of the innermost loop,
// or of the loop labelled label, unwinding the frames in between (their
// cancel handlers run, their error handlers do not: a break is not an
// error). Leaving a branch aborts its parallel step. With no such loop it
// records the misuse and returns false: the caller raises InternalError
// from where the call was made.
func (l *Loop) loopControl(r *root, th *Node, brk bool, label string) bool {
	var target *Node
	for f := top(th); f != nil; f = parent(f) {
		if f.Op.IsLoop() && (label == "" || r.label(f.Err) == label) {
			target = f
			break
		}
	}
	if target == nil {
		what := "Continue"
		if brk {
			what = "Break"
		}
		info := what + " outside of a loop"
		if label != "" {
			info = what + ": no enclosing loop is labelled " + label
		}
		r.st().recordError(InternalError, info)
		return false
	}
	epoch := r.runEpoch
	l.stopThread(th)
	for f := top(th); f != target; f = top(th) {
		if f.Op.IsBase() { // leave the branch; its siblings go with the parallel
			f.Flags |= opcodes.FlagDone
			th = threadOf(at(f.Parent))
			l.stopThread(th)
			continue
		}
		if !l.cancelFrame(r, f) || r.runEpoch != epoch {
			return true
		}
		l.popFrame(r, th, f)
	}
	if brk {
		l.complete(r, th, target, nil)
	} else {
		l.schedule(r, th, nil)
	}
	return true
}
