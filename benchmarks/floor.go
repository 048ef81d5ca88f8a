package benchmarks

import (
	"runtime"
	"testing"
	"unsafe"
)

// Floors: the least work a Go step VM can do for a workload, written out
// for that workload alone, as a bound on what tuning stepvm can reach. A
// floor keeps what FTN12 and stepvm's guarantees ask of every step (a
// handle checked against its root's generation, the step's closure in a
// GC-visible table and its instruction in pointer-free memory, a run queue,
// a call protected against panics that hands an error to the step's error
// handler, implicit success, the root's memory and table reset when its
// flow ends, bytes in use counted, a cleanup that reclaims a dropped root)
// and nothing the workload does not exercise: no parallel branches, levels
// of sub-steps for an error to unwind, timers, state, Stack memory, general
// allocation (nodes are bump-allocated, as each workload frees all of them
// before it allocates again) or interleaving of unrelated work. Its entry
// points are not inlined into the benchmark, as a library's API is not. A
// floor is not a usable VM: the difference between it and stepvm is the
// price of the rest of FTN12.

// floorNode is one instruction: pointer-free, as in an arena.
type floorNode struct {
	fn   uint32 // entry in its flow's table of closures, from 1
	seq  uint32 // 0 when free: a handle names a step by it
	next uint32 // next queued step, index+1 in the flow's nodes; 0 for none
	err  uint32 // entry of the step's error handler; 0 for none
}

// floorFunc is a step, or an error handler, which finds the code in the
// loop.
type floorFunc func(f *floorFlow, v int64)

// floorError is what a step panics with to fail: FTN12's error() does not
// return, and in Go only a panic leaves a function without returning. Like
// stepvm's, it is made once.
type floorError struct{ code string }

// floorFlow is a root: its closures (GC-visible) and its node memory.
type floorFlow struct {
	l     *floorLoop
	fns   []floorFunc
	fnBuf [3]floorFunc
	nodes *[4]floorNode // pointer-free, allocated once: the arena's stand-in
	used  uint32        // nodes bump-allocated in this run or iteration
	head  uint32        // queued steps, index+1
	tail  uint32
	cur   uint32 // the step running or waiting, index+1
	seq   uint32
	gen   uint32 // handle generation: bumped on release
	body  uint32 // ParallelWaitLoop: the loop body's table entry
	run   bool
	wait  bool  // the running step waits for an external completion
	woken bool  // the waiting step was completed
	arg   int64 // value passed to the next step
}

type floorLoop struct {
	pool  []*floorFlow
	runq  []*floorFlow // ring, a power of two long
	head  int
	n     int
	inUse int64  // bytes of nodes in use, as arena statistics count them
	fault any    // the last panic recovered from a step
	code  string // the error the error handler being called handles
}

func newFloorLoop(size int) *floorLoop {
	n := 64
	for n < size {
		n *= 2
	}
	return &floorLoop{runq: make([]*floorFlow, n)}
}

func (l *floorLoop) newFlow() (*floorFlow, uint32) {
	if k := len(l.pool); k > 0 {
		f := l.pool[k-1]
		l.pool[k-1] = nil
		l.pool = l.pool[:k-1]
		return f, f.gen
	}
	f := &floorFlow{l: l, nodes: new([4]floorNode)}
	f.fns = f.fnBuf[:0]
	// A root the program drops must give its memory back: stepvm's arenas
	// are off the heap, so each root registers a cleanup, whose record a
	// waiting flow holds. The floor pays for the record, whose argument is
	// the node memory as stepvm's is the arena; that memory is on the heap
	// here, so the cleanup has nothing to do.
	runtime.AddCleanup(f, floorReclaim, f.nodes)
	return f, f.gen
}

func floorReclaim(*[4]floorNode) {}

// add queues fn as a step of the flow whose handle has generation gen.
//
//go:noinline
func (f *floorFlow) add(gen uint32, fn floorFunc) {
	if fn == nil || gen != f.gen || int(f.used) == len(f.nodes) {
		panic("misuse")
	}
	f.used++
	k := f.used
	f.seq++
	f.fns = append(f.fns, fn)
	f.nodes[k-1] = floorNode{fn: uint32(len(f.fns)), seq: f.seq}
	if f.tail == 0 {
		f.head = k
	} else {
		f.nodes[f.tail-1].next = k
	}
	f.tail = k
	f.l.inUse += int64(unsafe.Sizeof(floorNode{}))
}

// catch gives the step queued last the error handler onErr.
//
//go:noinline
func (f *floorFlow) catch(gen uint32, onErr floorFunc) {
	if onErr == nil || gen != f.gen || f.tail == 0 {
		panic("misuse")
	}
	f.fns = append(f.fns, onErr)
	f.nodes[f.tail-1].err = uint32(len(f.fns))
}

//go:noinline
func (f *floorFlow) execute(gen uint32) {
	if gen != f.gen || f.run {
		panic("misuse")
	}
	f.run = true
	f.l.push(f)
}

// success completes the waiting step seq from outside the loop; a late or
// second completion returns false.
//
//go:noinline
func (f *floorFlow) success(seq uint32, v int64) bool {
	if f.cur == 0 || f.woken || f.nodes[f.cur-1].seq != seq {
		return false
	}
	f.arg, f.woken = v, true
	f.l.push(f)
	return true
}

//go:noinline
func (f *floorFlow) release(gen uint32) {
	if gen != f.gen || f.run {
		panic("misuse")
	}
	f.gen++
	f.l.pool = append(f.l.pool, f)
}

func (l *floorLoop) push(f *floorFlow) {
	if l.n == len(l.runq) {
		panic("run queue full")
	}
	l.runq[(l.head+l.n)&(len(l.runq)-1)] = f
	l.n++
}

//go:noinline
func (l *floorLoop) runUntilIdle() {
	for l.n > 0 {
		f := l.runq[l.head]
		l.runq[l.head] = nil
		l.head = (l.head + 1) & (len(l.runq) - 1)
		l.n--
		l.turn(f)
	}
}

// turn takes f's next turn: a completed wait is dropped, then the next
// queued step runs. A step that does not wait succeeds implicitly; the flow
// ends in that turn when nothing follows, else takes its next turn later.
// With no step queued, a loop's body runs to queue the next iteration's.
func (l *floorLoop) turn(f *floorFlow) {
	if f.woken {
		f.free(f.cur)
		f.cur, f.woken = 0, false
	}
	k := f.head
	if k == 0 {
		if f.body == 0 { // executed with no step
			l.end(f)
			return
		}
		f.used, f.tail = 0, 0
		l.call(f.fns[f.body-1], f, 0)
		l.push(f)
		return
	}
	n := &f.nodes[k-1]
	f.head = n.next
	f.cur, f.wait = k, false
	l.call(f.fns[n.fn-1], f, f.arg)
	if l.fault != nil {
		l.failed(f, n)
	}
	if f.wait {
		return
	}
	f.cur = 0
	f.free(k)
	if f.head == 0 && f.body == 0 {
		l.end(f)
		return
	}
	l.push(f)
}

// free frees node k and its table entry; the table shrinks past the
// entries freed at its end.
func (f *floorFlow) free(k uint32) {
	n := &f.nodes[k-1]
	f.fns[n.fn-1] = nil
	if n.err != 0 {
		f.fns[n.err-1] = nil
	}
	for len(f.fns) > 0 && f.fns[len(f.fns)-1] == nil {
		f.fns = f.fns[:len(f.fns)-1]
	}
	n.seq = 0
	f.l.inUse -= int64(unsafe.Sizeof(floorNode{}))
}

func (l *floorLoop) end(f *floorFlow) {
	clear(f.fns)
	f.fns = f.fns[:0]
	f.used, f.head, f.tail, f.run = 0, 0, 0, false
}

// call runs fn protected, as a VM must: a panic becomes the flow's error
// (here, recorded for the benchmark to check).
func (l *floorLoop) call(fn floorFunc, f *floorFlow, v int64) {
	returned := false
	defer func() {
		if !returned {
			l.fault = recover()
		}
	}()
	fn(f, v)
	returned = true
}

// failed hands the error step n of f failed with to n's error handler,
// which recovers by returning: implicit success, and the flow goes on
// after the step. Any other panic stays the fault.
func (l *floorLoop) failed(f *floorFlow, n *floorNode) {
	e, ok := l.fault.(*floorError)
	if !ok || n.err == 0 {
		return
	}
	l.fault, l.code = nil, e.code
	l.call(f.fns[n.err-1], f, 0)
}

// floorSimple is Simple's floor: per flow, a pooled root, one step added,
// executed, run, released.
func floorSimple(b *testing.B) {
	ran := 0
	timeFloorFlows(b, func(*floorFlow, int64) { ran++ }, nil, &ran, "steps ran")
}

// timeFloorFlows times flows of one step: a pooled root, fn added with
// error handler onErr (nil: none), executed, run, released. fn or onErr
// counts the flows in *done ("what" in a failure).
func timeFloorFlows(b *testing.B, fn, onErr floorFunc, done *int, what string) {
	l := newFloorLoop(1)
	flow := func() {
		f, gen := l.newFlow()
		f.add(gen, fn)
		if onErr != nil {
			f.catch(gen, onErr)
		}
		f.execute(gen)
		l.runUntilIdle()
		f.release(gen)
	}
	timeFlows(b, flow, func() { *done = 0 })
	if *done != b.N || l.inUse != 0 || l.fault != nil {
		b.Fatalf("%d %s, want %d; %d bytes in use; fault %v", *done, what, b.N, l.inUse, l.fault)
	}
}

// floorWaitLoop is ParallelWaitLoop's floor: batchSize flows each loop on
// { wait for an external completion; subtract its value }, the body adding
// both steps again each iteration, with the reference's interleaving of a
// turn per step: completing the wait queues the flow, whose turns then run
// the subtraction, the body, and the next wait.
func floorWaitLoop(b *testing.B) {
	l := newFloorLoop(batchSize)
	type waiter struct {
		f   *floorFlow
		seq uint32
	}
	waiting := make([]waiter, 0, batchSize)
	ready := make([]waiter, 0, batchSize)
	var counter int64
	wait := func(f *floorFlow, _ int64) {
		f.wait = true
		waiting = append(waiting, waiter{f, f.nodes[f.cur-1].seq})
	}
	sub := func(_ *floorFlow, v int64) { counter -= v }
	body := func(f *floorFlow, _ int64) {
		f.add(f.gen, wait)
		f.add(f.gen, sub)
	}
	before := memInUse(nil)
	for range batchSize {
		f, gen := l.newFlow()
		f.fns = append(f.fns, body) // the loop's entry, kept by every iteration
		f.body = 1
		f.execute(gen)
		l.runUntilIdle()
	}
	after := memInUse(nil)
	if len(waiting) != batchSize {
		b.Fatalf("%d flows wait, want %d", len(waiting), batchSize)
	}
	timeRounds(b, &waiting, &ready, func(ws []waiter) {
		for _, w := range ws {
			w.f.success(w.seq, 1)
		}
	}, l.runUntilIdle)
	reportPer(b, "iter")
	b.ReportMetric(float64(after-before)/float64(batchSize), "B/waitflow")
	if counter != -int64(b.N) || l.fault != nil {
		b.Fatalf("counter = %d, want %d; fault %v", counter, -b.N, l.fault)
	}
}

// floorErrorPath is ErrorPath's floor: per flow, a pooled root, one step
// added with an error handler, executed, run, released; the step fails,
// and its handler recovers.
func floorErrorPath(b *testing.B) {
	fail := &floorError{code: "E"}
	handled := 0
	onErr := func(f *floorFlow, _ int64) {
		if f.l.code == "E" {
			handled++
		}
	}
	timeFloorFlows(b, func(*floorFlow, int64) { panic(fail) }, onErr, &handled, "errors handled")
}
