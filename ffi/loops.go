package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// loopState is what package ffi keeps per event loop. It hangs off the
// loop itself (vm.SetNativeLoopValue), and everything that points back at
// the loop from it (the roots C owns, its records and tasks) is reachable
// only through the loop: the loop and its state are collected together
// once the program drops the loop. Nothing global holds either: the id
// registry, the Objects and the cleanups of roots hold its loopRes, which
// does not lead back. The roots Go owns are not held at all: what ffi
// keeps for one hangs off the root (rootInfo), and records refer to it
// weakly. Like the loop, a loopState belongs to the loop's goroutine.
type loopState struct {
	l   *vm.Loop
	id  C.uint32_t // what C code running for this loop reports; see ffi.h
	res *loopRes

	// The innermost C call made for this loop: the frame it runs for (zero
	// when it is not a step), the values lent to it (its entry in lent,
	// counted from 1; 0 when it lent no Go value), and the first panic a
	// call back into stepvm recovered, raised again once the C function
	// returns. While stash is set, calls back into stepvm are ignored: Go
	// code would not have run them.
	frame  vm.AsyncSteps
	lentAt int
	stash  any
	// lent holds the values of the C steps whose calls run and which were
	// lent Go values (cArgs), the innermost call's last: only those need
	// keeping, for success to find the values C passes back.
	lent []vm.Args
	// lentID stamps the Go values lent to the innermost C step, so that
	// one C kept from an earlier call is told from the value lent at its
	// position now (see cArgs); lends counts the stamps handed out.
	lentID, lends uint64
	// lentArgs and lentSize are the FutoInArgs lent to the innermost C
	// step and the size of its block, strings included (cArgs): a string
	// of it that C passes back is read to its length, NULs and all.
	lentArgs unsafe.Pointer
	lentSize int

	// lentObjs holds the Objects lent to the C steps whose calls run, the
	// innermost call's last, and which were passed on: not only the
	// innermost call's, as what a step was lent stays valid while C code
	// that stepvm runs during its call (a cancel handler, a cleanup) runs,
	// which may pass it on as the step may.
	lentObjs []lentObj

	tracked int         // roots whose rootInfo is in use (not released or collected)
	owned   []*rootInfo // roots newInstance made, which C owns until free

	tasks     []*task
	freeTasks []uint32

	blocks []*block     // the record blocks this loop owns; see records.go
	fresh  []entry      // records of the newest block never handed out
	free   ring[*entry] // records this loop released, oldest first

	// scratch holds the memory a C call is lent for its duration: a C
	// step's FutoInArgs, the code a C error handler gets. Not the frame's
	// memory: success (a handler's too) ends the frame, and frees that,
	// while the call runs on and may still read what it was given.
	scratch arena.Arena

	// releaseFrame and destroyStack, bound once: the VM calls them as the
	// frames and stack memory handed to C end, always on this loop.
	onFrameEnd, onStackEnd func(unsafe.Pointer)
}

// loopRes is the part of a loop's ffi state that its cleanup (loopGone)
// needs once the loop has been collected: the loop's id, and the C
// resources its flows still hold then. It must not lead back to the loop,
// or the loop would never become unreachable: it reaches it through a
// weak pointer only.
type loopRes struct {
	id C.uint32_t
	ls weak.Pointer[loopState]

	mu        sync.Mutex
	vars      []*cvar     // C state variables of roots not released yet
	orphans   []*objState // dropped Objects whose cleanup waits for the loop
	drain     func()      // releaseOrphans, bound once for Post
	dead      []*rootRes  // what collected roots held, waiting for the loop
	drainDead func()      // releaseDead, bound once for Post
	scratch   arena.Ref   // the loop's scratch memory, which loopGone gives back
}

// loops maps the ids C code reports to loops. An id is a serial number:
// unique among the loops that have ffi state, and handed out again only
// after 2^32 more loops got one, so an id that C code (or a handle)
// reports after its loop was collected finds nothing rather than another
// loop. The map holds loopRes, which does not keep a loop alive; a loop's
// entry goes when the loop is collected.
var loops struct {
	mu   sync.Mutex
	byID map[C.uint32_t]*loopRes
	last C.uint32_t
}

// loopOf returns the state of l, creating it on first use.
func loopOf(l *vm.Loop) *loopState {
	if ls, ok := vm.NativeLoopValue(l).(*loopState); ok {
		return ls
	}
	ls := &loopState{l: l}
	res := &loopRes{ls: weak.Make(ls)}
	res.drain, res.drainDead = res.releaseOrphans, res.releaseDead
	ls.onFrameEnd, ls.onStackEnd = ls.releaseFrame, ls.destroyStack
	loops.mu.Lock()
	if loops.byID == nil {
		loops.byID = make(map[C.uint32_t]*loopRes)
	}
	id := loops.last + 1
	for id == 0 || loops.byID[id] != nil { // once the serial numbers wrap
		id++
	}
	loops.last, ls.id, res.id = id, id, id
	loops.byID[ls.id] = res
	loops.mu.Unlock()
	ls.res = res
	ls.scratch.Init(nil)
	res.scratch = ls.scratch.Ref()
	runtime.AddCleanup(ls, loopGone, res)
	vm.SetNativeLoopValue(l, ls)
	return ls
}

// knownLoop returns the state of l if ffi has one, without creating it:
// the VM calls the root hooks for every root, C steps or not.
func knownLoop(l *vm.Loop) *loopState {
	ls, _ := vm.NativeLoopValue(l).(*loopState)
	return ls
}

// loopByID returns the state of the loop C code reported, or nil for 0 (no
// ffi call runs on this thread) and for a loop that has been collected.
func loopByID(id C.uint32_t) *loopState {
	if id == 0 {
		return nil
	}
	loops.mu.Lock()
	res := loops.byID[id]
	loops.mu.Unlock()
	if res == nil {
		return nil
	}
	return res.ls.Value()
}

// loopsLive returns how many loops the id registry holds (for tests).
func loopsLive() int {
	loops.mu.Lock()
	defer loops.mu.Unlock()
	return len(loops.byID)
}

// loopGone runs once a loop with ffi state has been collected, on a
// cleanup goroutine: it retires the loop's id and releases what its flows
// still held in C, the state variables of roots never released and the
// custom objects dropped too late for the loop to clean them up. Those C
// functions run for no loop, so their calls back into stepvm are ignored.
// The loop's records went with it (blockGone); its tasks and roots are
// plain Go memory; its scratch memory goes back here. The C state
// variables of roots collected with the loop are destroyed once, here or
// by rootGone, whichever takes them first.
func loopGone(res *loopRes) {
	loops.mu.Lock()
	delete(loops.byID, res.id)
	loops.mu.Unlock()
	res.mu.Lock()
	vars := res.vars
	res.vars = nil
	for _, v := range vars {
		v.at = -1
	}
	res.dead = nil // their variables were in vars
	res.mu.Unlock()
	for _, v := range vars {
		v.destroy(0)
	}
	res.releaseOrphansOff()
	res.scratch.Abandon()
}

// track records a C state variable of the root own until the root drops
// it.
func (res *loopRes) track(own *rootRes, v *cvar) {
	res.mu.Lock()
	v.at = len(res.vars)
	res.vars = append(res.vars, v)
	own.vars = append(own.vars, v)
	res.mu.Unlock()
}

// untrack forgets a state variable its root is dropping, and reports
// whether it was tracked: the caller then destroys it.
func (res *loopRes) untrack(v *cvar) bool {
	res.mu.Lock()
	defer res.mu.Unlock()
	if v.at < 0 {
		return false
	}
	k := len(res.vars) - 1
	last := res.vars[k]
	res.vars[v.at], last.at = last, v.at
	res.vars[k] = nil
	res.vars = res.vars[:k]
	v.at = -1
	return true
}

// lentObj is an Object lent to a C step whose call runs, and whether it
// was passed on (success took it): the step then does not release it.
type lentObj struct {
	o      *Object
	passed bool
}

// callSave is what a C call replaces in its loop's state.
type callSave struct {
	frame           vm.AsyncSteps
	lentAt, lentLen int
	stash           any
	lentID          uint64
	lentArgs        unsafe.Pointer
	lentSize        int
}

// enter records the start of a C call for frame (zero if none), lent no
// values yet. The stamp of the values lent before stays: a call that lends
// new ones stamps them (cArgs).
func (ls *loopState) enter(frame vm.AsyncSteps) callSave {
	s := callSave{ls.frame, ls.lentAt, len(ls.lent), ls.stash, ls.lentID, ls.lentArgs, ls.lentSize}
	ls.frame, ls.lentAt, ls.stash, ls.lentArgs, ls.lentSize = frame, 0, nil, nil, 0
	return s
}

// leave ends a C call and returns what it stashed.
func (ls *loopState) leave(s callSave) any {
	stash := ls.stash
	if len(ls.lent) > s.lentLen {
		clear(ls.lent[s.lentLen:]) // the values must not stay reachable
		ls.lent = ls.lent[:s.lentLen]
	}
	ls.frame, ls.lentAt, ls.stash, ls.lentID = s.frame, s.lentAt, s.stash, s.lentID
	ls.lentArgs, ls.lentSize = s.lentArgs, s.lentSize
	return stash
}

// settle ends a C call and raises what it stashed: Error, Break, Continue
// or a misuse, taking effect as the C function returns.
func (ls *loopState) settle(s callSave) {
	if p := ls.leave(s); p != nil {
		panic(p)
	}
}

// callback is the context of a call from C into stepvm.
type callback struct {
	ls *loopState    // loop of the ffi call running on this thread; nil if none
	as vm.AsyncSteps // what the record names (begin)
}

// begin starts a call from C through the record f was located from: it
// resolves the record into c.as, and reports a bad one as misuse. It
// returns a nil entry when the call must do nothing: the record is bad, or
// the C function has already raised something and must return. A call
// through a record of the loop whose C call runs, the usual case, finds
// that loop without the registry.
//
// begin reads what belongs to the record's loop (resolve): the calls that
// use it are made on that loop's goroutine, as those of vm.AsyncSteps are.
// The calls another thread may make (success, handle_error, isValid,
// is_same_thread) first tell whether they run there (entry.away). Any
// other call that a C call of another loop makes off the record's loop's
// goroutine is misuse, reported to that C call; from a thread that runs no
// C call of stepvm's, it cannot be told from Go code calling C on the
// loop's goroutine without the cost of IsSameThread on every such call.
func (f found) begin(cur C.uint32_t, what string) (callback, *entry) {
	return f.start(cur, what, false)
}

// beginLetGo is begin for the calls that let go of what they name (free,
// sched_cancel): after the C function has raised something, its other
// calls do nothing, but these are carried out all the same. Ignored, a free
// would leave the root to no one, for good, and a canceled callback would
// run on whatever the program freed after canceling it.
func (f found) beginLetGo(cur C.uint32_t, what string) (callback, *entry) {
	return f.start(cur, what, true)
}

// start is begin, and with letGo, beginLetGo.
func (f found) start(cur C.uint32_t, what string, letGo bool) (callback, *entry) {
	var c callback
	e, bad := f.e, f.bad
	if e != nil && cur != 0 && e.away(cur) {
		// A C call of another loop, on that loop's goroutine: e's loop
		// is not to be touched from here, not even to resolve e.
		e, bad = nil, badAway
	}
	if e != nil {
		var ok bool
		if c.as, ok = e.resolve(); !ok {
			e, bad = nil, badStale
		}
	}
	if cur != 0 { // on a foreign thread, e's loop is not to be touched
		if e != nil && e.ls.id == cur {
			c.ls = e.ls
		} else {
			c.ls = loopByID(cur)
		}
	}
	if c.ls != nil && c.ls.stash != nil {
		if letGo {
			return c, e // nil for a bad record, which the raise in flight outranks
		}
		return c, nil
	}
	if e == nil {
		c.misuse(what + bad)
	}
	return c, e
}

// beginAway starts a call from a thread that is not the goroutine of e's
// loop (entry.away): it may use only what locate and resumer read. It
// returns the Resumer the record took when C made its step wait, zero if
// it took none (a Go step that waits through its handle, or a step that
// does not wait: finishAway leaves those to the loop), and false when the
// call must do nothing, as begin does; a record that turned stale since
// locate is misuse.
func beginAway(e *entry, gen uint32, cur C.uint32_t, what string) (callback, vm.Resumer, bool) {
	var c callback
	if cur != 0 { // the thread runs a C call of another loop
		if c.ls = loopByID(cur); c.ls != nil && c.ls.stash != nil {
			return c, vm.Resumer{}, false
		}
	}
	res, ok := e.resumer(gen)
	if !ok {
		c.misuse(what + badStale)
	}
	return c, res, ok
}

// misuse fails the C call running on this thread with InternalError. With
// no ffi call running, as when Go code calls C directly, there is no flow
// to fail, and the call is ignored: this thread may not be the goroutine of
// the record's loop, whose root a report would touch. (What the VM itself
// finds wrong in such a call on a root being set up fails the root's next
// run, as from Go.)
func (c callback) misuse(info string) {
	if c.ls != nil && c.ls.stash == nil {
		c.ls.stash = &vm.Error{Code: vm.InternalError, Info: info}
	}
}

// done is deferred by every call from C: it catches what the VM raised
// (Error, Break, Continue unwind by panicking) so that no panic crosses C
// frames, and stashes it for the Go function that called C.
func (c callback) done() {
	if p := recover(); p != nil && c.ls != nil && c.ls.stash == nil {
		c.ls.stash = p
	}
}
