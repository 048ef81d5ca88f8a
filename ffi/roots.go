package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// rootInfo is what package ffi attaches to a root: its record, records of
// accessors made outside any step, C state variables, and the C handler
// of unhandled errors that execute was given.
type rootInfo struct {
	as      vm.AsyncSteps
	rec     *entry
	extra   []*entry
	vars    []*cvar
	owned   bool // created by newInstance: free releases the root
	ueh     C.FutoInAsyncSteps_error_callback
	uehData C.uintptr_t
}

// cvar is a state variable made by stateVariable: the C value, kept in the
// root's State under its name, and how to destroy it. It holds no Go
// pointer: loopGone destroys those of a collected loop.
type cvar struct {
	value   C.uintptr_t
	data    C.uintptr_t
	cleanup C.stepvm_state_cleanup_fn
	at      int // index in loopRes.vars
}

// destroy runs the C cleanup of v for the given loop (0: none).
func (v *cvar) destroy(loop C.uint32_t) {
	if v.cleanup != nil {
		C.stepvm_call_state_cleanup(v.cleanup, v.data, v.value, loop)
	}
}

// minSweep is the least number of roots ls tracks before it looks for
// released ones.
const minSweep = 64

func init() {
	vm.SetNativeRootHooks(rootReleased, rootFailed)
}

// root returns the info of the valid root as, creating it on first use.
func (ls *loopState) root(as vm.AsyncSteps) *rootInfo {
	if !vm.IsRoot(as) {
		return nil
	}
	if ri := ls.roots[as]; ri != nil {
		return ri
	}
	if len(ls.roots) >= ls.sweepAt {
		ls.sweep()
	}
	var ri *rootInfo
	if k := len(ls.spare); k > 0 {
		ri = ls.spare[k-1]
		ls.spare = ls.spare[:k-1]
	} else {
		ri = new(rootInfo)
	}
	ri.as = as
	ls.roots[as] = ri
	return ri
}

// record returns the root's record.
func (ri *rootInfo) record() *C.FutoInAsyncSteps {
	if ri.rec == nil {
		ri.rec = newEntry(loopOf(ri.as.Tool()), ri.as, kindRoot)
	}
	return ri.rec.bsi()
}

// sweep drops the info of roots released since the last sweep. The VM
// reports releases (rootReleased), so this only bounds what ffi holds should
// a release go unreported.
func (ls *loopState) sweep() {
	for as, ri := range ls.roots {
		if !vm.IsRoot(as) {
			ls.drop(ri)
		}
	}
	ls.sweepAt = max(minSweep, 2*len(ls.roots))
}

// drop destroys the C state of a root and forgets it.
func (ls *loopState) drop(ri *rootInfo) {
	delete(ls.roots, ri.as)
	for i, v := range ri.vars {
		ri.vars[i] = nil
		ls.res.untrack(v)
		s := ls.enter(vm.AsyncSteps{}, vm.Args{})
		v.destroy(ls.id)
		ls.leave(s) // nothing to raise into: the root has ended
	}
	if ri.rec != nil {
		ri.rec.release()
	}
	for i, e := range ri.extra {
		e.release()
		ri.extra[i] = nil
	}
	*ri = rootInfo{vars: ri.vars[:0], extra: ri.extra[:0]}
	ls.spare = append(ls.spare, ri)
}

// rootReleased drops what a root held as it is released.
func rootReleased(as vm.AsyncSteps) {
	ls := knownLoop(as.Tool())
	if ls == nil {
		return
	}
	if ri := ls.roots[as]; ri != nil {
		ls.drop(ri)
	}
}

// rootFailed calls the C handler of unhandled errors that execute set.
func rootFailed(as vm.AsyncSteps, code string) {
	ls := knownLoop(as.Tool())
	if ls == nil {
		return
	}
	ri := ls.roots[as]
	if ri == nil || ri.ueh == nil {
		return
	}
	ccode := C.CString(code)
	defer C.free(unsafe.Pointer(ccode))
	s := ls.enter(vm.AsyncSteps{}, vm.Args{})
	C.stepvm_call_error(ri.ueh, ri.record(), ri.uehData, ccode, ls.id)
	ls.leave(s) // the run has ended: there is nothing to raise into
}

// stateVariable returns the C state variable name of e's root, allocating
// it on first use.
func (c callback) stateVariable(e *entry, data C.uintptr_t, name *C.char,
	allocate C.stepvm_alloc_fn, cleanup C.stepvm_state_cleanup_fn) C.uintptr_t {
	ri := e.ls.root(vm.RootOf(e.as))
	st := e.as.State()
	if ri == nil || st == nil {
		c.misuse("stateVariable through an invalid FutoInAsyncSteps")
		return 0
	}
	key := unsafe.String((*byte)(unsafe.Pointer(name)), C.strlen(name))
	if v, ok := st.Get(key); ok {
		if cv, ok := v.(*cvar); ok {
			return cv.value
		}
		c.misuse("stateVariable " + key + ": the state variable holds a Go value")
		return 0
	}
	if allocate == nil {
		c.misuse("stateVariable " + key + " with a NULL allocate function")
		return 0
	}
	ls := e.ls
	s := ls.enter(ls.frame, ls.lent)
	value := C.stepvm_call_alloc(allocate, data, ls.id)
	ls.settle(s)
	cv := &cvar{value: value, data: data, cleanup: cleanup}
	st.Set(strings.Clone(key), cv)
	ri.vars = append(ri.vars, cv)
	ls.res.track(cv)
	return value
}
