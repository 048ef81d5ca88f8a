package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Binary returns the FutoInAsyncSteps* (FTN12 2.7.2) through which C code
// uses as: a root, a running step (also in its error or cancel handler, or
// a loop iteration) or a parallel accessor. The record lives in off-heap
// memory and stays valid for the life of what as names: the step's frame,
// the root until it is released (or freed from C) or collected, an
// accessor until the step that made it ends (one made while no C step
// runs: as long as its root). The record does not keep a root alive: a
// root the program drops without Release is collected, and its record
// turns stale. A root gets the same record until C frees it; a step gets
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
		return unsafe.Pointer(bindFrame(ls, as))
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

// bindFrame returns a new record for the live frame as, released when the
// frame ends, or nil if as is not a live frame.
func bindFrame(ls *loopState, as vm.AsyncSteps) *C.FutoInAsyncSteps {
	p := vm.FrameAlloc(as, 8, ls.onFrameEnd)
	if p == nil {
		return nil
	}
	e := newEntry(ls, as, kindFrame)
	*(*uint32)(p) = e.pos
	return e.bsi()
}

// releaseFrame releases the record whose position in ls's blocks p holds;
// the VM calls it (as ls.onFrameEnd) as the frame the record was bound
// to ends.
func (ls *loopState) releaseFrame(p unsafe.Pointer) {
	pos := *(*uint32)(p)
	ls.blocks[pos/blockSize][pos%blockSize].release()
}

// bindAccessor returns a record for the parallel accessor as. It lives as
// long as the step whose C function is running (the one that called
// parallel), or, when none runs, as long as the root, which it names
// weakly, as the root's own record does.
func (ls *loopState) bindAccessor(as vm.AsyncSteps) *C.FutoInAsyncSteps {
	if p := vm.FrameAlloc(ls.frame, 8, ls.onFrameEnd); p != nil {
		e := newEntry(ls, as, kindAccessor)
		*(*uint32)(p) = e.pos
		return e.bsi()
	}
	ri := ls.root(vm.RootOf(as))
	if ri == nil {
		return nil
	}
	ri.acc = append(ri.acc, as)
	return ri.bind(kindRootAccessor, int32(len(ri.acc)-1)).bsi()
}
