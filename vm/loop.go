package vm

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/internal/wheel"
	"github.com/stepvm/stepvm/opcodes"
	"github.com/stepvm/stepvm/ringbuf"
)

// Loop is the event loop (FTN12 2.6 AsyncTool) that runs flows. It is
// single-threaded: the goroutine that calls Run, RunUntilIdle or Iterate
// drives it, and only that goroutine, or code running inside the loop's
// callbacks, may call AsyncSteps methods, Immediate, Deferred and Cancel.
// Before the loop first runs, the goroutine that created it may set flows
// up. Other goroutines hand work in with Post and Resumer.
//
// One pass of the loop runs the immediate work queued when the pass starts
// (a callback, or one step of a flow), then the timers that are due. A flow
// whose next step is ready while nothing else is queued keeps running in
// the same pass, up to 256 steps and loop iterations, so a lone flow does
// not pay a queue round trip per step.
type Loop struct {
	clock  Clock
	custom bool         // clock is not the system clock
	inPass bool         // Iterate is running: timers are armed at the end of the pass
	manual *ManualClock // clock, if it is one; nil otherwise
	start  time.Time    // time 0 of the wheel; moved back when a custom clock goes back (see now)
	last   int64        // the latest time now returned, for a custom clock

	runq   taskQueue
	cbs    []callback // Immediate, Deferred and timeout entries; slot 0 unused
	cbFree uint32     // the last freed entry of cbs, 0 if none (see freeCallback)
	wheel  *wheel.Wheel

	// dropped holds the arenas of roots the program dropped (reclaim), for
	// the loop to release. It is apart from the inbox so that the loop's
	// cleanup (reclaimDead) can hold it: a Post function in the inbox may
	// refer to the loop, and a cleanup whose argument reaches its object
	// never runs. dropping is raised after every push to it, as posted is
	// for the inbox.
	dropped   *ringbuf.Queue[arena.Ref]
	dropping  atomic.Bool
	reclaimFn func(*arena.Ref)

	reclaim  func(arena.Ref) // every root's cleanup, see newRoot
	native   any             // package ffi's state for this loop; see SetNativeLoopValue
	inbox    *ringbuf.Queue[inbound]
	drainFn  func(*inbound)
	resumers resumerTable
	mutexes  mutexTable
	futures  *futureTable
	self     weak.Pointer[Loop] // what a Future names its loop by
	sleeping atomic.Int32
	// posted is raised after every push to the inbox (wake), so that a pass
	// tests one word for inbound work instead of the inbox's three. A pass
	// lowers it before it drains the inbox (drainInbox).
	posted atomic.Bool
	wakeCh chan struct{}
	closed atomic.Bool
	owner  atomic.Int64 // goroutine id for IsSameThread
	runner atomic.Int64 // goroutine id of the Run that drives the loop; 0: none
	driven bool

	onPanic func(any)
	onWake  func() // WithWakeup's; read by any goroutine, set only by NewLoop
	panics  int64

	pool    []*root
	poolMax int
	acct    *arena.Account // a separate object: arenas point at it from root cleanups
	roots   int64          // live roots: created and neither released nor collected
	running int64          // roots executing now

	// spare holds the slot tables that runs with more slots in use than a
	// root's own table takes were lent (see lendSlots), spareCap their
	// capacity in slots.
	spare    []*slotTable
	spareCap int

	// Interpreter registers.
	cur      uintptr // rootID of the root whose thread is being dispatched; 0: none
	curTh    uintptr // frameID of that thread's base
	errTh    *Node   // base of the thread whose error handler runs innermost; nil: none
	errRoot  uintptr // rootID of errTh's root
	cont     uint8   // how curTh goes on after its step: contNone, contNext, contSame
	depth    int     // user callbacks on the Go stack
	inCall   uintptr // frameID of the frame whose function or error handler runs innermost; 0: none
	teardown int     // cancel handlers and destroy callbacks on the Go stack
	argsCur  *argBuf // values passed to the step being called
	argsNxt  *argBuf // values for the inline continuation
	argBufs  [2]argBuf
	// spill holds the values of queued thread tasks that pass more than
	// one (see spillArgs); spillFree lists its unused entries.
	spill     []argBuf
	spillFree []uint32
	// succBufs holds the value buffers of SuccessStep steps that ran, for
	// the next ones (see takeSuccessBuf).
	succBufs []*argBuf
	pend     pending // what the in-flight unwinding panic carries
	// raised is what the call of frame raisedIn last panicked with for the
	// VM to act on (Error, Break, Continue, a misuse report), kept until
	// that call returns (takeRaised): a function that recovers it and goes
	// on must not make it go away.
	raised   any
	raisedIn uintptr
	// exits records the calls a runtime.Goexit out of user code abandoned,
	// innermost first, for the next pass to recover (see goexit.go).
	exits []goexit
	// exitCur and exitCurTh are cur and curTh as a Goexit found them
	// (leaveAbandoned clears those, recoverExits these): the outermost
	// abandoned call may be a step of that thread, and it is noted last.
	exitCur, exitCurTh uintptr
}

// Node is the encoded step record the interpreter works on.
type Node = opcodes.Node

// Handle names a callback scheduled with Immediate or Deferred.
type Handle struct {
	l         *Loop // the loop that scheduled it: slots and generations are per loop
	slot, gen uint32
}

// LoopOption configures NewLoop.
type LoopOption func(*Loop)

// WithClock makes the loop read time from c; a *ManualClock makes every
// timer deterministic. A nil c leaves the system clock. NewLoop skips nil
// options.
func WithClock(c Clock) LoopOption {
	return func(l *Loop) { l.clock = c }
}

// DefaultRootPool is how many released roots a loop keeps for reuse unless
// WithRootPool says otherwise.
const DefaultRootPool = 1 << 15

// WithRootPool sets how many released roots the loop keeps for reuse. A
// burst of more concurrent flows than that allocates new roots afterwards;
// a pooled root holds 128 bytes and its arena's first chunks, and keeps
// the slot table (up to 32 slots) and State its runs used. A root
// released into a full pool is dropped, and its arena memory returns when
// the garbage collector finds it (stale handles may still reach it until
// then).
func WithRootPool(n int) LoopOption {
	return func(l *Loop) { l.poolMax = max(n, 0) }
}

// WithPanicHandler sets the function that receives what an Immediate,
// Deferred or Post callback panics with (panics in steps become errors of
// their flow instead). Without one, such panics are counted in Stats and
// dropped, so that one callback cannot stop the loop.
func WithPanicHandler(fn func(v any)) LoopOption {
	return func(l *Loop) { l.onPanic = fn }
}

// WithWakeup sets a function that the loop calls whenever work for it
// arrives from outside its passes: a Post, a Resumer's completion, a
// ManualClock's Advance, a root the program dropped for the loop to
// reclaim. A foreign event loop that drives the loop with Iterate uses it
// to learn that a pass is due while it waits (Run needs none). fn may be
// called from any goroutine, the garbage collector's cleanups included,
// and more than once per pass: it must return at once (send on a buffered
// channel without blocking, write to an eventfd) and must not call the
// loop, which the caller may be running.
func WithWakeup(fn func()) LoopOption {
	return func(l *Loop) { l.onWake = fn }
}

// Unbounded is the queue limit that means no limit (see NewMutex).
const Unbounded = -1

const (
	inboxCapacity = 1024
	droppedRing   = 64 // reclaims come from the collector, a burst at a time
	inlineBudget  = 256
	tick          = time.Millisecond
)

// NewLoop returns a loop owned by the calling goroutine.
func NewLoop(opts ...LoopOption) *Loop {
	l := &Loop{clock: systemClock{}, wakeCh: make(chan struct{}, 1), acct: new(arena.Account), poolMax: DefaultRootPool}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if mc, ok := l.clock.(*ManualClock); l.clock == nil || ok && mc == nil {
		l.clock = systemClock{}
	}
	_, system := l.clock.(systemClock)
	l.custom = !system
	if mc, ok := l.clock.(*ManualClock); ok {
		l.manual = mc
		mc.attach(l)
	}
	l.start = l.clock.Now()
	l.wheel = wheel.New(0, tick)
	l.inbox = ringbuf.NewQueue[inbound](inboxCapacity)
	l.dropped = ringbuf.NewQueue[arena.Ref](droppedRing)
	self := weak.Make(l)
	l.self = self
	l.reclaim = func(m arena.Ref) { reclaim(self, m) }
	runtime.AddCleanup(l, reclaimDead, l.dropped)
	l.futures = new(futureTable)
	runtime.AddCleanup(l, settleDropped, l.futures)
	l.drainFn = l.handleInbound
	l.reclaimFn = func(m *arena.Ref) { l.reclaimMem(*m) }
	l.cbs = make([]callback, 1, 64)
	l.argsCur, l.argsNxt = &l.argBufs[0], &l.argBufs[1]
	l.owner.Store(goid())
	return l
}

// now is the loop's time in nanoseconds since the loop was created. On the
// system clock, time.Since reads only the monotonic clock (pass spells
// that case out). Clock reads cost tens of nanoseconds on some virtual
// machines: a pass reads the clock only for timers that outlive it.
//
// The wheel's time never goes back, so a custom clock that does (a wall
// clock set back, a ManualClock moved back) would have every timer armed
// afterwards wait until the clock regained the time it lost, an hour late
// for an hour set back. The loop's time stands still instead, and start
// moves back with the clock: the timers count on from its new readings.
// A reading more than 292 years before start (Sub saturates: a clock whose
// source failed read the zero time, say) leaves start where it is: moved
// that far back, start would put the next good reading past the end of
// the loop's time, where no timer armed afterwards is ever due. The
// loop's time itself ends 292 years after start: a clock moved past that
// fires every pending timer, and a timer armed then never fires.
func (l *Loop) now() int64 {
	if !l.custom {
		return int64(time.Since(l.start))
	}
	c := l.readClock()
	t := int64(c.Sub(l.start))
	if t < l.last {
		if t != math.MinInt64 {
			l.start = c.Add(-time.Duration(l.last))
		}
		return l.last
	}
	l.last = t
	return t
}

// readClock reads the custom clock. A panic out of it leaves the pass
// that read it, if any, for the pass's caller: inPass goes down with it,
// as in panicHandler, or timers set between passes would wait for the next
// pass's reading to start counting. The timers the pass staged stay
// staged: the next pass seals them.
func (l *Loop) readClock() time.Time {
	read := false
	defer func() {
		if !read {
			l.inPass = false
		}
	}()
	c := l.clock.Now()
	read = true
	return c
}

// callback kinds.
const (
	cbFree uint8 = iota
	cbImmediate
	cbDeferred
	cbFrame
)

// callback is a scheduled Immediate or Deferred, or the record of what a
// running OpExec or OpIter frame waits with (cbFrame; the frame's Next
// holds its slot from the first SetTimeout, SetCancel or Resumer until the
// frame ends): its timeout, the slot of its cancel handler in the root's
// table, its Resumer.
type callback struct {
	fn      func()
	r       *root  // cbFrame: the flow, while the timeout is armed
	n       *Node  // cbFrame: the frame
	seq     uint32 // cbFrame: the frame's Seq; while free (cbFree), the next free entry
	epoch   uint32
	gen     uint32
	kind    uint8
	tm      wheel.Timer // Deferred, or cbFrame's timeout; zero if none
	cancel  uint32      // cbFrame: the cancel handler's slot in its root
	resumer uint32      // cbFrame: the Resumer slot (opcodes.FlagResumer)
}

func (l *Loop) newCallback(kind uint8) (uint32, *callback) {
	slot := l.cbFree
	if slot == 0 { // none free: a new entry, which links to none
		l.cbs = append(l.cbs, callback{})
		slot = uint32(len(l.cbs) - 1)
	}
	cb := &l.cbs[slot]
	l.cbFree, cb.seq = cb.seq, 0
	cb.kind = kind
	return slot, cb
}

// freeCallback frees record cb, the one in slot. The free entries form a
// list through seq, the last freed first, which needs no table of its own.
func (l *Loop) freeCallback(slot uint32, cb *callback) {
	*cb = callback{gen: cb.gen + 1, seq: l.cbFree}
	l.cbFree = slot
}

// takeEntry returns the index of an unused entry of a table whose unused
// entries are listed in free: the last listed, or a new zero entry.
func takeEntry[T any](table *[]T, free *[]uint32) uint32 {
	if k := len(*free); k > 0 {
		i := (*free)[k-1]
		*free = (*free)[:k-1]
		return i
	}
	var zero T
	*table = append(*table, zero)
	return uint32(len(*table) - 1)
}

// Immediate queues fn to run in the loop's next pass, after the work
// already queued. Loop goroutine only. A nil fn schedules nothing (the
// Handle is never valid) and, called from a step, fails its flow.
func (l *Loop) Immediate(fn func()) Handle {
	if fn == nil {
		l.misuse(nil, "Immediate with a nil function")
		return Handle{}
	}
	slot, cb := l.newCallback(cbImmediate)
	cb.fn = fn
	l.runq.push(task{slot: slot, gen: cb.gen})
	return Handle{l, slot, cb.gen}
}

// Deferred runs fn once d has passed, never earlier (timers have a 1 ms
// resolution). Loop goroutine only. A nil fn is refused as by Immediate.
func (l *Loop) Deferred(d time.Duration, fn func()) Handle {
	if fn == nil {
		l.misuse(nil, "Deferred with a nil function")
		return Handle{}
	}
	var now int64
	if !l.inPass { // the reading comes first: a clock that panics leaves no record behind
		now = l.now()
	}
	slot, cb := l.newCallback(cbDeferred)
	cb.fn = fn
	l.arm(slot, cb, d, now)
	return Handle{l, slot, cb.gen}
}

// arm schedules the timer of callback slot to fire d from now, the loop's
// time, read by the caller when no pass is running. During a pass the
// deadline waits for the end of the pass (wheel.AddAfter), which reads the
// clock once for every timer set during the pass (wheel.Seal); arming
// later than asked only moves the deadline later, so timers still never
// fire early, and a pass whose timers were all stopped reads no clock.
// SetTimeout takes the first case in line.
func (l *Loop) arm(slot uint32, cb *callback, d time.Duration, now int64) {
	d = max(d, 0)
	data := timerData(slot, cb)
	if l.inPass {
		cb.tm = l.wheel.AddAfter(int64(d), data)
		return
	}
	cb.tm = l.wheel.Add(wheel.After(now, int64(d)), data) // nothing will seal it soon
}

// timerData is the data of the timer of callback slot: the slot and its
// generation, which fire checks.
func timerData(slot uint32, cb *callback) uint64 { return uint64(slot) | uint64(cb.gen)<<32 }

// Cancel unschedules h. Canceling a callback that already ran, or was
// already canceled, or one another loop scheduled, does nothing.
func (l *Loop) Cancel(h Handle) {
	if !l.IsValid(h) {
		return
	}
	cb := &l.cbs[h.slot]
	if cb.kind == cbDeferred {
		l.wheel.Stop(cb.tm)
	}
	l.freeCallback(h.slot, cb)
}

// IsValid reports whether h is still scheduled on l.
func (l *Loop) IsValid(h Handle) bool {
	if h.l != l || h.slot == 0 || int(h.slot) >= len(l.cbs) {
		return false
	}
	cb := &l.cbs[h.slot]
	return cb.gen == h.gen && (cb.kind == cbImmediate || cb.kind == cbDeferred)
}

// IsSameThread reports whether the caller runs on the goroutine that drives
// the loop, which is where loop-only methods may be called: the one that
// created it, then the first to run a pass (RunUntilIdle, Iterate),
// whichever started Run last, and the one whose pass recovered from a
// runtime.Goexit that ended the driving goroutine. Otherwise a goroutine
// that takes a driven loop over with RunUntilIdle or Iterate is not
// recognized (it would cost every pass a reading of the goroutine id):
// hand a loop over by Run. It parses the goroutine's stack header, which
// takes microseconds: a check for paths that are not hot.
func (l *Loop) IsSameThread() bool { return goid() == l.owner.Load() }

func (l *Loop) claim() {
	if !l.driven {
		l.driven = true
		l.owner.Store(goid())
	}
}

// goid returns the current goroutine's id, parsed from its stack header.
// The header's buffer comes from a pool: runtime.Stack makes one on the
// stack escape, an allocation per call (IsSameThread is ffi's test of a
// completion from another thread).
func goid() int64 {
	buf := goidBufs.Get().(*[64]byte)
	defer goidBufs.Put(buf)
	s := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(s) <= len(prefix) {
		return 0
	}
	var id int64
	for _, c := range s[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int64(c-'0')
	}
	return id
}

var goidBufs = sync.Pool{New: func() any { return new([64]byte) }}

// inbound is one item handed to the loop by another goroutine: a Post, or
// a Resumer's completion.
type inbound struct {
	fn   func()
	slot uint32 // resumer slot; 0 for a Post
	gen  uint32
	code string // "" for success
	info string
	args argBuf
}

// Post queues fn to run on the loop from any goroutine, waking the loop if
// it sleeps. It never waits for the loop and loses nothing: it is lock-free
// while the inbox's ring (1024 posts and Resumer completions) has room, and
// past that appends to an overflow under a mutex held only for the append.
// It returns false, posting nothing, when the loop is closed or fn is nil.
func (l *Loop) Post(fn func()) bool {
	if fn == nil || l.closed.Load() {
		return false
	}
	l.inbox.Push(inbound{fn: fn})
	l.wake()
	return true
}

// wake follows every push to the inbox: it raises posted and wakes Run if
// it sleeps. The flag is stored only when down, so that producers do not
// contend for its cache line while the loop is busy.
func (l *Loop) wake() {
	if !l.posted.Load() {
		l.posted.Store(true)
	}
	l.rouse()
}

// rouse wakes Run if it sleeps, and a foreign driver (WithWakeup).
func (l *Loop) rouse() {
	if l.onWake != nil {
		l.onWake()
	}
	if l.sleeping.Load() != 0 {
		select {
		case l.wakeCh <- struct{}{}:
		default:
		}
	}
}

func (l *Loop) handleInbound(in *inbound) {
	if in.slot == 0 {
		l.callFunc(in.fn)
		return
	}
	l.resume(in)
}

// Iterate runs one pass: the posts received, every immediate callback and
// flow step queued by then, the posts' included (those these queue wait
// for the next pass), then the timers that are due (those their callbacks
// set are armed in the next pass). haveWork reports whether work remains;
// delay is how long until the next timer when only armed timers remain,
// and 0 when immediate work remains, a timer waits for the next pass to be
// armed, or the loop is idle.
func (l *Loop) Iterate() (haveWork bool, delay time.Duration) {
	if l.pass() {
		return true, 0
	}
	if l.wheel.Len() == 0 {
		return false, 0
	}
	if at, ok := l.wheel.NextDeadline(); ok {
		// A fresh reading: one taken before timer callbacks ran would
		// make the loop wake late by as long as they took. (A pass that
		// leaves only timers is about to sleep: the reading costs little.)
		now := l.now()
		// A wheel bound that is not after now while nothing fired would make
		// callers spin; wait a tick instead.
		return true, time.Duration(max(at-now, int64(tick)))
	}
	return false, 0
}

// pass is Iterate without the delay: it reports whether immediate work
// remains, timers that a move of the manual clock during the pass made
// due, or timers set as its timers fired, which the next pass arms.
func (l *Loop) pass() (more bool) {
	if l.depth > 0 {
		l.reenter()
	}
	l.claim()
	l.inPass = true
	if l.posted.Load() {
		l.drainInbox()
	}
	// A thread task leaves its thread current (runThread); anything else
	// runs with none, put back here rather than after every turn.
	for n := l.runq.len(); n > 0; n-- {
		// The entry's fields are read first: pushes made while it runs
		// may reuse it.
		if t := l.runq.pop(); t.slot != 0 {
			l.cur, l.curTh = 0, 0
			l.runImmediate(t.slot, t.gen)
		} else {
			l.runThread(t)
		}
	}
	l.cur, l.curTh = 0, 0
	if l.wheel.Len() > 0 { // Len counts the unsealed timers
		// One reading, taken after every timer of the pass was set, seals
		// them and fires the due ones. inPass still holds: the timers the
		// callbacks set are staged for the next pass, which seals them with
		// a reading of its own, so a callback that sets a timer due at once
		// (Deferred(0) re-arming itself) cannot keep this pass going. (now,
		// its common case in line: a call less per pass.)
		var now int64
		if l.custom {
			now = l.now()
		} else {
			now = int64(time.Since(l.start))
		}
		if l.wheel.Unsealed() {
			l.wheel.Seal(now)
		}
		if data, ok := l.wheel.Pop(now); ok {
			for ; ok; data, ok = l.wheel.Pop(now) {
				l.fire(uint32(data), uint32(data>>32))
			}
			// A callback may have moved the manual clock on (Advance from
			// a timer callback, or from a handler a timeout ran): the
			// timers that made due fire in the next pass, which the pass
			// asks for, or RunUntilIdle would return and Iterate report a
			// delay while they are due. Only a pass that fired ran a
			// callback after its reading: the others skip the check.
			if l.manual != nil {
				if t := l.now(); t > now {
					if at, ok := l.wheel.NextDeadline(); ok && at <= t {
						l.inPass = false
						return true
					}
				}
			}
		}
	}
	l.inPass = false
	return l.runq.len() > 0 || l.posted.Load() || l.wheel.Unsealed()
}

// drainInbox handles the items posted to the loop and the roots dropped.
// posted is lowered first, so that a push during the drain raises it
// again, and raised again if items remain: Drain may leave some (a push
// still filling its slot), and so does a panic out of the loop's panic
// handler.
func (l *Loop) drainInbox() {
	l.posted.Store(false)
	defer func() {
		if !l.inbox.Empty() {
			l.posted.Store(true)
		}
	}()
	if l.dropping.Load() {
		// Lowered first, like posted. Nothing here panics, and a push
		// that Drain leaves (behind one still filling its slot) raises
		// it again once that one is filled.
		l.dropping.Store(false)
		l.dropped.Drain(l.reclaimFn)
	}
	l.inbox.Drain(l.drainFn)
}

// nestedPass rejects a pass started from inside one of the loop's own
// callbacks (a step, a handler, an Immediate...): the flows of the outer
// pass are mid-turn, so an inner pass could neither finish them nor leave
// them as they were. Inside a step the panic fails that step's flow with
// InternalError; elsewhere it goes to the loop's panic handler (and out of
// the panic handler, when that is the caller).
func (l *Loop) nestedPass() {
	l.raiseMisuse("a Loop cannot run (Run, RunUntilIdle, Iterate) inside its own callbacks")
}

// RunUntilIdle runs passes until no immediate work is left and no timer is
// due. It needs no deadline of the timers left (they are not due: due ones
// fired in the pass), so it skips what Iterate computes for its delay.
func (l *Loop) RunUntilIdle() {
	for {
		if !l.pass() {
			return
		}
	}
}

// Run drives the loop until ctx is done (returning ctx.Err()) or Close is
// called (returning nil), sleeping while nothing is due. A Post, a Resumer
// or, with a ManualClock, Advance wakes it. While it runs, a Run from
// another goroutine returns ErrLoopRunning at once (RunUntilIdle and
// Iterate are not checked: they must not be called from other goroutines
// than the loop's).
func (l *Loop) Run(ctx context.Context) error {
	// The running Run's goroutine is the one it took the loop with: owner,
	// stored after, may still name the loop's previous driver meanwhile.
	id := goid()
	if !l.runner.CompareAndSwap(0, id) {
		if l.runner.Load() != id {
			return ErrLoopRunning // before reading anything the running one writes
		}
		l.nestedPass() // from a callback of the Run that drives the loop
	}
	defer l.runner.Store(0)
	if l.depth > 0 && len(l.exits) == 0 { // before the returns below, which would hide the misuse
		l.nestedPass() // (calls a Goexit abandoned are the first pass's to recover)
	}
	l.owner.Store(id)
	l.driven = true
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if l.closed.Load() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// An Advance that Run cannot see asleep (one made by a callback of
		// the pass, or before sleeping is raised) rouses nobody: Run checks
		// that the clock has not moved since before the pass instead.
		var moves uint64
		if l.manual != nil {
			moves = l.manual.moves.Load()
		}
		work, delay := l.Iterate()
		if work && delay == 0 {
			continue
		}
		l.sleeping.Store(1)
		if !l.inbox.Empty() || l.dropping.Load() || l.closed.Load() || l.manual != nil && l.manual.moves.Load() != moves {
			l.sleeping.Store(0)
			continue
		}
		var timeC <-chan time.Time
		if work && l.manual == nil {
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
			timeC = timer.C
		}
		select {
		case <-l.wakeCh:
		case <-timeC:
		case <-ctx.Done():
		}
		l.sleeping.Store(0)
	}
}

// Close stops Run and makes further Posts fail; a Run started later
// returns nil at once. Flows still running stay as they are, and a
// Resumer still completes their steps: its completion waits for a pass.
// A closed loop can still be iterated by hand, and reclaims the roots the
// program drops when it is (until the loop itself is collected, which
// returns their memory). To shut down gracefully, let Run drive the loop
// until the flows have completed (their Futures are done), then Close.
func (l *Loop) Close() {
	l.closed.Store(true)
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// fire runs the due timer in slot.
func (l *Loop) fire(slot, gen uint32) {
	cb := &l.cbs[slot]
	if cb.gen != gen {
		return
	}
	switch cb.kind {
	case cbDeferred:
		fn := cb.fn
		l.freeCallback(slot, cb)
		l.callFunc(fn)
	case cbFrame:
		r, n := cb.r, cb.n
		cb.r, cb.tm = nil, wheel.Timer{}
		if r == nil || r.runEpoch != cb.epoch || n.Seq != cb.seq {
			return
		}
		r.st().recordError(Timeout, "")
		l.raise(r, threadOf(n), Timeout)
	}
}

// runImmediate runs the Immediate callback of slot, unless it was canceled.
func (l *Loop) runImmediate(slot, gen uint32) {
	cb := &l.cbs[slot]
	if cb.gen != gen || cb.kind != cbImmediate {
		return
	}
	fn := cb.fn
	l.freeCallback(slot, cb)
	l.callFunc(fn)
}

// LoopStats is a snapshot of a loop's resource use.
type LoopStats struct {
	ArenaInUse    int64 // bytes allocated in the arenas of this loop's roots
	ArenaReserved int64 // bytes of arena chunks held by this loop's roots
	LiveRoots     int64 // roots created and not yet released or collected
	RunningRoots  int64 // roots executing now
	PooledRoots   int   // released roots kept for reuse
	Timers        int   // pending timers
	Queued        int   // run-queue entries; those of a canceled Immediate or an ended flow count until the next pass drops them
	Panics        int64 // callback panics recovered (see WithPanicHandler)
}

// Stats returns the loop's resource use. Loop goroutine only. Once every
// flow has completed, ArenaInUse is zero.
func (l *Loop) Stats() LoopStats {
	return LoopStats{
		ArenaInUse:    l.acct.InUse,
		ArenaReserved: l.acct.Reserved,
		LiveRoots:     l.roots,
		RunningRoots:  l.running,
		PooledRoots:   len(l.pool),
		Timers:        l.wheel.Len(),
		Queued:        l.runq.len(),
		Panics:        l.panics,
	}
}
