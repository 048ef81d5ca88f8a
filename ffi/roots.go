package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/vm"
)

// rootInfo is what package ffi attaches to a root object
// (vm.SetNativeRootValue): its record, the handles of accessors bound
// while no C step runs, and the C handler of unhandled errors that execute
// was given. The root alone holds it: records refer to it weakly (self), so
// that a root the program drops without Release is collected as it would
// be without C code. Its cleanup (rootGone) then releases what own holds.
// A pooled root keeps its rootInfo: the release hook clears it (drop) and
// the root's next use fills it again. Loop goroutine only.
type rootInfo struct {
	as      vm.AsyncSteps // the root while in use; zero once released
	ls      *loopState
	self    weak.Pointer[rootInfo]
	rec     *entry
	acc     []vm.AsyncSteps // accessors bound to the root, by entry slot
	owned   bool            // created by newInstance: C owns it until free
	ownedAt int             // index in ls.owned while owned
	ueh     C.FutoInAsyncSteps_error_callback
	uehData C.uintptr_t
	own     *rootRes // what the root holds; the argument of its cleanup
}

// rootRes is what a root holds through ffi that must be given back when
// the root goes, released or collected: its records and C state
// variables. It is the argument of rootInfo's cleanup, so it must not lead
// back to the rootInfo or the root (records are named by position, and
// its loopRes reaches the loop weakly). pos and vars belong to the loop's
// goroutine; rootGone, on a goroutine of the garbage collector, hands it to
// the loop, and touches vars itself only when the loop runs no callbacks
// (under loopRes.mu, which track holds as it appends).
type rootRes struct {
	res  *loopRes
	live atomic.Bool // holds something: tracked by its loop
	pos  []uint32    // records bound to the root, by position in the loop's blocks
	vars []*cvar
}

// cvar is a state variable made by stateVariable: the C value, kept in the
// root's State under its name, and how to destroy it. It holds no Go
// pointer. Whoever removes it from its loopRes destroys it: the root's
// release, the loop after the root was collected, or loopGone.
type cvar struct {
	value   C.uintptr_t
	data    C.uintptr_t
	cleanup C.stepvm_state_cleanup_fn
	at      int // index in loopRes.vars; -1 once removed
}

// destroy runs the C cleanup of v for the given loop (0: none).
func (v *cvar) destroy(loop C.uint32_t) {
	if v.cleanup != nil {
		C.stepvm_call_state_cleanup(v.cleanup, v.data, v.value, loop)
	}
}

func init() {
	vm.SetNativeRootHooks(rootReleased, rootEnded)
}

// infoOf returns the info attached to the root of as, in use or not, or nil.
func infoOf(as vm.AsyncSteps) *rootInfo {
	ri, _ := vm.NativeRootValue(as).(*rootInfo)
	return ri
}

// root returns the info of the valid root as, attaching it on first use.
func (ls *loopState) root(as vm.AsyncSteps) *rootInfo {
	if !vm.IsRoot(as) {
		return nil
	}
	ri := infoOf(as)
	if ri == nil {
		ri = &rootInfo{ls: ls}
		ri.self = weak.Make(ri)
		ri.own = &rootRes{res: ls.res}
		runtime.AddCleanup(ri, rootGone, ri.own)
		vm.SetNativeRootValue(as, ri)
	}
	if ri.as == (vm.AsyncSteps{}) { // new, or released and reused since
		ri.as = as
		ri.own.live.Store(true)
		ls.tracked++
	}
	return ri
}

// record returns the root's record.
func (ri *rootInfo) record() *C.FutoInAsyncSteps {
	if ri.rec == nil {
		ri.rec = ri.bind(kindRoot, -1)
	}
	return ri.rec.bsi()
}

// bind returns a new record of the given kind that refers to the root
// weakly and lives until the root goes.
func (ri *rootInfo) bind(kind uint8, slot int32) *entry {
	e := newEntry(ri.ls, vm.AsyncSteps{}, kind)
	e.ri, e.slot = ri.self, slot
	ri.own.pos = append(ri.own.pos, e.pos)
	return e
}

// forget releases e, a record bound to the root, before the root goes.
func (ri *rootInfo) forget(e *entry) {
	pos := ri.own.pos
	for i, p := range pos {
		if p == e.pos {
			pos[i] = pos[len(pos)-1]
			ri.own.pos = pos[:len(pos)-1]
			break
		}
	}
	e.release()
}

// handle returns what a record of the root names.
func (ri *rootInfo) handle(slot int32) vm.AsyncSteps {
	if slot < 0 {
		return ri.as
	}
	return ri.acc[slot]
}

// drop gives back what the root held, as it is released: its records and
// C state variables, whose C cleanups run now, on its loop.
func (ls *loopState) drop(ri *rootInfo) {
	if ri.owned {
		ls.unhold(ri)
	}
	ls.dropRes(ri.own)
	clear(ri.acc)
	ri.as, ri.rec, ri.acc, ri.ueh, ri.uehData = vm.AsyncSteps{}, nil, ri.acc[:0], nil, 0
}

// dropRes gives back the records and state variables of a root, released
// or collected. Loop goroutine only.
func (ls *loopState) dropRes(own *rootRes) {
	own.live.Store(false)
	ls.tracked--
	for _, pos := range own.pos {
		ls.blocks[pos/blockSize][pos%blockSize].release()
	}
	for i, v := range own.vars {
		own.vars[i] = nil
		if ls.res.untrack(v) {
			ls.destroyVar(v)
		}
	}
	own.pos, own.vars = own.pos[:0], own.vars[:0]
}

// destroyVar runs the C cleanup of v on the loop, for a root that has
// ended: what the cleanup raises has nowhere to go.
func (ls *loopState) destroyVar(v *cvar) {
	s := ls.enter(vm.AsyncSteps{})
	v.destroy(ls.id)
	ls.leave(s)
}

// hold keeps a root that newInstance made for C until C frees it: the
// records C has refer to it weakly.
func (ls *loopState) hold(ri *rootInfo) {
	ri.owned, ri.ownedAt = true, len(ls.owned)
	ls.owned = append(ls.owned, ri)
}

// unhold forgets a root C owned, as it is released.
func (ls *loopState) unhold(ri *rootInfo) {
	k := len(ls.owned) - 1
	last := ls.owned[k]
	ls.owned[ri.ownedAt], last.ownedAt = last, ri.ownedAt
	ls.owned[k] = nil
	ls.owned = ls.owned[:k]
	ri.owned = false
}

// rootReleased drops what a root held as it is released.
func rootReleased(as vm.AsyncSteps) {
	if ri := infoOf(as); ri != nil && ri.as == as {
		ri.ls.drop(ri)
	}
}

// rootGone runs once a root that ffi knew has been collected, on a
// goroutine of the garbage collector. The root was never released (or
// was released and its object later dropped: then own holds nothing). Its
// records and state variables belong to its loop, which gives them back
// in a callback (releaseDead); a loop that is closed runs no callbacks,
// and a collected one has lost its records already, so then only the C
// state variables are destroyed, here and for no loop.
func rootGone(own *rootRes) {
	if !own.live.Load() {
		return
	}
	res := own.res
	res.mu.Lock()
	res.dead = append(res.dead, own)
	res.mu.Unlock()
	if ls := res.ls.Value(); ls != nil && ls.l.Post(res.drainDead) {
		return
	}
	res.releaseDeadOff()
}

// releaseDead gives back what the collected roots rootGone queued held,
// on the loop's goroutine.
func (res *loopRes) releaseDead() {
	ls := res.ls.Value()
	for _, own := range res.takeDead() {
		ls.dropRes(own)
	}
}

// releaseDeadOff destroys the C state variables of the collected roots
// queued, off the loop's goroutine, for no loop.
func (res *loopRes) releaseDeadOff() {
	for _, own := range res.takeDead() {
		for _, v := range own.vars {
			if res.untrack(v) {
				v.destroy(0)
			}
		}
	}
}

func (res *loopRes) takeDead() []*rootRes { return take(res, &res.dead) }

// take empties the queue q of res, under res.mu, and returns what it held.
func take[T any](res *loopRes, q *[]T) []T {
	res.mu.Lock()
	defer res.mu.Unlock()
	v := *q
	*q = nil
	return v
}

// rootEnded calls the C handler of unhandled errors that execute set, if
// the run failed with code. The handler belongs to the run that execute
// started, however that run ends: it is taken before the call, so that a
// later run Go executes, which gave none, does not report to it (C may
// have freed its data by then), while a handler that executes the root
// again sets the retried run's.
func rootEnded(as vm.AsyncSteps, code string) {
	ri := infoOf(as)
	if ri == nil || ri.as != as || ri.ueh == nil {
		return
	}
	ueh, data := ri.ueh, ri.uehData
	ri.ueh, ri.uehData = nil, 0
	if code == "" {
		return
	}
	ls := ri.ls
	ccode := C.CString(code)
	defer C.free(unsafe.Pointer(ccode))
	s := ls.enter(vm.AsyncSteps{})
	C.stepvm_call_error(ueh, recordArg(ri.record()), data, ccode, ls.id)
	ls.leave(s) // the run has ended: there is nothing to raise into
}

// stateVariable returns the C state variable name of the root of as,
// allocating it on first use.
func (c callback) stateVariable(e *entry, data C.uintptr_t, name *C.char,
	allocate C.stepvm_alloc_fn, cleanup C.stepvm_state_cleanup_fn) C.uintptr_t {
	root := vm.RootOf(c.as)
	ri := e.ls.root(root)
	st := c.as.State()
	if ri == nil || st == nil {
		c.misuse("stateVariable through an invalid FutoInAsyncSteps")
		return 0
	}
	key := unsafe.String((*byte)(unsafe.Pointer(name)), C.strlen(name))
	if v, ok := st.Get(key); ok {
		cv, ok := v.(*cvar)
		if !ok {
			c.misuse("stateVariable " + key + ": the state variable holds a Go value")
			return 0
		}
		if slices.Contains(ri.own.vars, cv) {
			return cv.value
		}
		// Another root's, which Clone or CopyFrom copied with the State:
		// that root destroys it, so this one allocates its own.
	}
	if allocate == nil {
		c.misuse("stateVariable " + key + " with a NULL allocate function")
		return 0
	}
	ls := e.ls
	s := ls.enter(ls.frame)
	ls.lentAt = s.lentAt // allocate runs as part of the C call under way
	value := C.stepvm_call_alloc(allocate, data, ls.id)
	p := ls.leave(s)
	cv := &cvar{value: value, data: data, cleanup: cleanup}
	if ri.as != root {
		// allocate freed the root: the variable has no root to live
		// with, and st may be another flow's State by now.
		ls.destroyVar(cv)
		value = 0
	} else {
		st.Set(strings.Clone(key), cv)
		ls.res.track(ri.own, cv)
	}
	if p != nil {
		panic(p) // what allocate raised, once the variable has an owner
	}
	return value
}
