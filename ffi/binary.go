package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/vm"
)

// Binary returns the FutoInAsyncSteps* (FTN12 2.7.2) through which C code
// uses as: a root, a running step (also in its error or cancel handler, or
// a loop iteration) or a parallel accessor. The record lives in off-heap
// memory and stays valid for the life of what as names: the step's frame,
// the root until it is released (or freed from C) or collected, an
// accessor until the step that made it ends. The record does not keep a
// root alive: a root the program drops without Release is collected, its
// steps waiting or not, and its records turn stale. A root always gets the same record; a step gets
// a new one from each call. Binary returns nil for an invalid handle. Like
// every AsyncSteps method, it must be called on the loop's goroutine.
func Binary(as vm.AsyncSteps) unsafe.Pointer {
	if f := vm.ForeignOf(as); f != nil {
		if w, ok := f.(*fwrap); ok && w.Valid() {
			return unsafe.Pointer(w.bsi)
		}
		return nil
	}
	l := as.Tool()
	if l == nil || !as.Valid() {
		return nil
	}
	ls := loopOf(l)
	switch {
	case vm.IsRoot(as):
		return unsafe.Pointer(ls.root(as).record())
	case vm.IsFrame(as):
		// Go code may hand it to C and wait: the record must not keep
		// the root.
		e := bindFrame(ls, as)
		if ri := ls.root(vm.RootOf(as)); ri != nil {
			ri.weaken(e, as)
		}
		return unsafe.Pointer(e.bsi())
	}
	return unsafe.Pointer(ls.bindAccessor(as))
}

// Wrap adopts a FutoInAsyncSteps* so that Go code can use it through the
// vm.AsyncSteps API (FTN12 2.2.1 wrap). A pointer that Binary produced,
// and is still valid, gives back the original handle. Wrap returns the
// zero AsyncSteps, which is invalid, for nil, for an expired record, and
// for a foreign table that lacks add, success, handle_error or isValid.
//
// A FutoInAsyncSteps implemented by foreign code gets a new handle on each
// call (so handles are not ==; Binary gives the pointer back), through
// which every call is forwarded to the foreign table; see the package
// documentation, "Foreign AsyncSteps", for what works and what does not.
// Use such a handle as the foreign engine allows its pointer to be used:
// on its thread, while its step or root lives.
func Wrap(p unsafe.Pointer) vm.AsyncSteps {
	bsi := (*C.FutoInAsyncSteps)(p)
	if bsi == nil {
		return vm.AsyncSteps{}
	}
	if bsi.api != &C.stepvm_api {
		if !fxUsable(bsi) {
			return vm.AsyncSteps{}
		}
		return newWrap(bsi, fxKindAdopted).as
	}
	_, as, _ := lookup(bsi)
	return as
}

// bindFrame returns a new record for the live frame as (which must be
// one), released when the frame ends. It names as strongly: the caller
// makes it weak (keep) if the frame outlives the C call it was made for.
func bindFrame(ls *loopState, as vm.AsyncSteps) *entry {
	return bindTo(ls, as, as, kindFrame)
}

// bindTo returns a new record of the given kind for as, released when the
// live frame f ends.
func bindTo(ls *loopState, f, as vm.AsyncSteps, kind uint8) *entry {
	p := vm.FrameAlloc(f, 8, ls.onFrameEnd)
	if p == nil {
		return nil
	}
	e := newEntry(ls, as, kind)
	*(*[2]uint32)(p) = [2]uint32{e.pos, e.gen.Load()}
	return e
}

// keep ends the C call a frame's record e was made for, gen its
// generation then: if the frame may outlive the call (it waits, or has
// sub-steps) and lives, the record turns weak, so that a flow the program
// drops while the frame waits is collected. A step that completes within
// its call pays only the test of held.
func (ls *loopState) keep(e *entry, gen uint32) {
	if !e.held || e.gen.Load() != gen || e.ri != (weak.Pointer[rootInfo]{}) {
		return
	}
	if ri := ls.root(vm.RootOf(e.as)); ri != nil {
		ri.weaken(e, e.as)
	}
}

// releaseFrame releases the record whose position and generation p holds,
// unless it has been released already (its root's release or collection
// came first); the VM calls it (as ls.onFrameEnd) as the frame the record
// was bound to ends.
func (ls *loopState) releaseFrame(p unsafe.Pointer) {
	w := *(*[2]uint32)(p)
	e := &ls.blocks[w[0]/blockSize][w[0]%blockSize]
	if e.gen.Load() != w[1] {
		return
	}
	if e.ri != (weak.Pointer[rootInfo]{}) {
		if ri := e.ri.Value(); ri != nil {
			ri.unweaken(e)
		}
	}
	e.release()
}

// bindAccessor returns a record for the parallel accessor as. It lives as
// long as the step whose C function is running (the one that called
// parallel), or, when none runs, as long as the root, which it names
// weakly, as the root's own record does.
func (ls *loopState) bindAccessor(as vm.AsyncSteps) *C.FutoInAsyncSteps {
	ri := ls.root(vm.RootOf(as))
	if ri == nil {
		return nil
	}
	if vm.IsFrame(ls.frame) {
		e := bindTo(ls, ls.frame, as, kindAccessor)
		ri.weaken(e, as)
		return e.bsi()
	}
	return ri.bind(kindRootAccessor, ri.slotFor(as, noPos)).bsi()
}
