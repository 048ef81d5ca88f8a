package ffi

/*
#include <stdlib.h>
#include "foreign.h"
*/
import "C"

import (
	"math"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// A FutoInAsyncSteps implemented by foreign code, used from Go (FTN12
// 2.2.1 wrap): fwrap is the vm.Foreign behind the handle Wrap returns, and
// behind the handles Go steps, loop bodies and handlers receive when the
// foreign engine runs them. Every call is forwarded to the foreign table.

// What a wrapped FutoInAsyncSteps is.
const (
	fxKindAdopted  uint8 = iota + 1 // given to Wrap: a root, or a step or accessor of C code
	fxKindStep                      // a step (or iteration) whose Go function or handler the engine called
	fxKindAccessor                  // returned by parallel
	fxKindInstance                  // returned by newInstance: Release frees it
)

// Pending unwinding of a Go callback, done once it has returned.
const (
	fxPendError uint8 = iota + 1
	fxPendBreak
	fxPendContinue
	fxPendMisuse // a misuse report: its info is the error's
)

// fxSwallowedInfo says what a Go function that swallows its unwinding did
// wrong.
const fxSwallowedInfo = "their panic did not reach ffi (a recover must re-panic what vm.IsUnwinding reports)"

type fxPending struct {
	what uint8
	code string // the error code, or the loop label
	info string
}

// fxFlowName is the state variable holding a foreign flow's fxFlow.
var fxFlowName = C.CString("github.com/stepvm/stepvm/ffi.flow")

// fwrap is one foreign FutoInAsyncSteps* seen from Go. Like the foreign
// handle, it belongs to the thread the engine runs the flow on.
type fwrap struct {
	bsi  *C.FutoInAsyncSteps
	as   vm.AsyncSteps // the handle on w
	kind uint8

	// inCall is set while the Go function or error handler the engine
	// called with bsi runs: Error, Break, Continue and misuse then unwind
	// it, and pend says what to tell the engine once it has returned.
	inCall  bool
	inError bool // the function inCall runs is an error handler
	pend    fxPending

	// owner is the step whose stack owns the Go objects calls through w
	// hand to the engine (w itself for a step); nil: the flow owns them.
	owner   *fwrap
	own     *fxOwner // a step's owner record, once made
	noStack bool     // the engine gave no stack memory: the flow owns

	shared fxShared // Go-side state, once looked up or passed down
	noFlow bool     // the engine gave no state variable
}

func newWrap(bsi *C.FutoInAsyncSteps, kind uint8) *fwrap {
	w := &fwrap{bsi: bsi, kind: kind}
	if kind == fxKindStep {
		w.owner = w
	}
	w.as = vm.WrapForeign(w)
	return w
}

// fxUsable reports whether a foreign table has what every flow needs.
func fxUsable(bsi *C.FutoInAsyncSteps) bool {
	if bsi.api == nil {
		return false
	}
	for _, i := range [...]int{C.stepvm_fx_add_i, C.stepvm_fx_success_i, C.stepvm_fx_handle_error_i, C.stepvm_fx_is_valid_i} {
		if !fxHas(bsi, i) {
			return false
		}
	}
	return true
}

// fxHas reports whether entry i of bsi's table is set.
func fxHas(bsi *C.FutoInAsyncSteps, i int) bool {
	return (*[25]unsafe.Pointer)(unsafe.Pointer(bsi.api))[i] != nil
}

// has reports whether the engine implements entry i, and reports the
// call as misuse if it does not.
func (w *fwrap) has(i int, what string) bool {
	if fxHas(w.bsi, i) {
		return true
	}
	w.Misuse(what + ": the foreign AsyncSteps does not implement it")
	return false
}

// inherit gives a step's handle the Go-side state of the handle that added
// the step.
func (w *fwrap) inherit(s fxShared) {
	w.shared = s
	w.noFlow = s.flow == nil && s.local != nil
}

// flow returns the flow's record, creating it on first use, or nil if the
// engine keeps no state variables.
func (w *fwrap) flow() *fxFlow {
	if w.shared.flow == nil && !w.noFlow {
		if fxHas(w.bsi, C.stepvm_fx_state_variable_i) {
			id := C.stepvm_fx_state_variable(w.bsi, fxFlowName)
			w.shared.flow, _ = fxGet(uintptr(id)).(*fxFlow)
		}
		w.noFlow = w.shared.flow == nil
	}
	return w.shared.flow
}

// share returns the Go-side state to pass down to the steps w adds.
func (w *fwrap) share() fxShared {
	if w.flow() == nil && w.shared.local == nil {
		w.shared.local = new(vm.State)
	}
	return w.shared
}

// keep stores v for the engine and returns its id, owned by the step that
// makes the call, else by the flow. With neither (an engine without stack
// and stateVariable), nothing drops it.
func (w *fwrap) keep(v any) uintptr {
	id := fxPut(v)
	if o := w.owner; o != nil && o.stepOwner() {
		o.own.ids = append(o.own.ids, id)
	} else if f := w.flow(); f != nil {
		if f.dead { // the flow has ended: the engine must not run it
			fxRelease(id)
		} else {
			f.ids = append(f.ids, id)
		}
	}
	return id
}

// stepOwner makes sure the step w has an owner record in its stack
// memory, and reports whether it has one that is still alive.
func (w *fwrap) stepOwner() bool {
	if w.own != nil {
		return !w.own.dead
	}
	if !w.inCall {
		return false // the step has no function running: it cannot add
	}
	if w.noStack || !fxHas(w.bsi, C.stepvm_fx_stack_i) {
		w.noStack = true
		return false
	}
	o := new(fxOwner)
	id := fxPut(o)
	if C.stepvm_fx_stack(w.bsi, 0, C.uintptr_t(id)) == nil {
		fxDel(id)
		w.noStack = true
		return false
	}
	w.own = o
	return true
}

// cStringOf returns s as a C string to free, or nil for "".
func cStringOf(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

func freeString(s *C.char) {
	if s != nil {
		C.free(unsafe.Pointer(s))
	}
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// raise calls handle_error.
func (w *fwrap) raise(code, info string) {
	if code == "" {
		code = vm.InternalError
	}
	ccode, cinfo := C.CString(code), cStringOf(info)
	C.stepvm_fx_handle_error(w.bsi, ccode, cinfo)
	freeString(ccode)
	freeString(cinfo)
}

// loopCtl calls breakLoop or continueLoop.
func (w *fwrap) loopCtl(what uint8, label string) {
	i, name := C.stepvm_fx_break_loop_i, "Break"
	if what == fxPendContinue {
		i, name = C.stepvm_fx_continue_loop_i, "Continue"
	}
	if !fxHas(w.bsi, i) {
		w.raise(vm.InternalError, name+": the foreign AsyncSteps does not implement it")
		return
	}
	clabel := cStringOf(label)
	if what == fxPendBreak {
		C.stepvm_fx_break_loop(w.bsi, clabel)
	} else {
		C.stepvm_fx_continue_loop(w.bsi, clabel)
	}
	freeString(clabel)
}

// The methods of vm.Foreign.

func (w *fwrap) Valid() bool { return C.stepvm_fx_is_valid(w.bsi) != 0 }

func (w *fwrap) State() *vm.State {
	if !w.Valid() {
		return nil
	}
	s := w.share()
	if s.flow != nil {
		return &s.flow.state
	}
	return s.local
}

func (w *fwrap) Add(fn vm.ExecFunc, onError vm.ErrorFunc) {
	if fn == nil {
		w.Misuse("Add with a nil step function")
		return
	}
	id := w.keep(&fxStep{fxShared: w.share(), fn: fn, onError: onError})
	C.stepvm_fx_add(w.bsi, C.uintptr_t(id), boolInt(onError != nil))
}

func (w *fwrap) Parallel(onError vm.ErrorFunc) vm.AsyncSteps {
	if !w.has(C.stepvm_fx_parallel_i, "Parallel") {
		return vm.AsyncSteps{}
	}
	var id uintptr
	if onError != nil {
		id = w.keep(&fxStep{fxShared: w.share(), onError: onError})
	}
	p := C.stepvm_fx_parallel(w.bsi, C.uintptr_t(id), boolInt(onError != nil))
	if p == nil {
		return vm.AsyncSteps{}
	}
	a := newWrap(p, fxKindAccessor)
	a.owner = w.owner
	a.inherit(w.share())
	return a.as
}

func (w *fwrap) SuccessStep(vals []vm.Value) {
	w.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vals...) }, nil)
}

func (w *fwrap) Sync(obj vm.ISync, fn vm.ExecFunc, onError vm.ErrorFunc) {
	switch s := obj.(type) {
	case nil:
		w.Misuse("Sync with a nil object")
	case cSync:
		if fn == nil {
			w.Misuse("Sync with a nil step function")
			return
		}
		if !w.has(C.stepvm_fx_add_sync_i, "Sync") {
			return
		}
		id := w.keep(&fxStep{fxShared: w.share(), fn: fn, onError: onError})
		C.stepvm_fx_add_sync(w.bsi, s.p, C.uintptr_t(id), boolInt(onError != nil))
	case *vm.Mutex, *vm.Throttle, *vm.Limiter:
		w.Misuse("Sync of a stepvm Mutex, Throttle or Limiter on a foreign flow: they admit stepvm flows only")
	default:
		obj.Sync(w.as, fn, onError) // built on the public API, as cSync is
	}
}

func (w *fwrap) Loop(fn func(vm.AsyncSteps), label string) {
	if fn == nil {
		w.Misuse("Loop with a nil body")
		return
	}
	w.addLoop(&fxLoopBody{loop: fn}, 0, label)
}

func (w *fwrap) Repeat(count int, fn func(vm.AsyncSteps, int), label string) {
	if fn == nil {
		w.Misuse("Repeat with a nil body")
		return
	}
	w.addLoop(&fxLoopBody{repeat: fn}, max(count, 0), label)
}

func (w *fwrap) addLoop(lb *fxLoopBody, count int, label string) {
	i, what := C.stepvm_fx_loop_i, "Loop"
	if lb.repeat != nil {
		i, what = C.stepvm_fx_repeat_i, "Repeat"
	}
	if !w.has(i, what) {
		return
	}
	lb.fxShared = w.share()
	lb.label = cStringOf(label)
	id := w.keep(lb)
	if lb.repeat != nil {
		C.stepvm_fx_repeat(w.bsi, C.uintptr_t(id), C.size_t(count), lb.label)
	} else {
		C.stepvm_fx_loop(w.bsi, C.uintptr_t(id), lb.label)
	}
}

func (w *fwrap) NewInstance() vm.AsyncSteps {
	if !w.has(C.stepvm_fx_new_instance_i, "NewInstance") {
		return vm.AsyncSteps{}
	}
	p := C.stepvm_fx_new_instance(w.bsi)
	if p == nil || !fxUsable(p) {
		return vm.AsyncSteps{}
	}
	return newWrap(p, fxKindInstance).as
}

func (w *fwrap) Success(vals []vm.Value) {
	if w.inCall && w.pend.what != 0 {
		// The engine would take it for the outcome of a function that
		// raised: settle fails the step instead.
		w.Misuse("Success after Error, Break, Continue or a misuse report: " + fxSwallowedInfo)
		return
	}
	var a cargs
	if bad := toForeign(vals, &a); bad != "" {
		resetArgs(&a)
		w.Misuse("Success: " + bad)
		return
	}
	C.stepvm_fx_success(w.bsi, (*C.FutoInArgs)(unsafe.Pointer(&a)))
	resetArgs(&a) // what the engine did not take
}

func (w *fwrap) Error(code, info string) bool {
	if w.inCall {
		if w.pend.what == 0 {
			w.pend = fxPending{fxPendError, code, info}
		}
		return true
	}
	w.raise(code, info)
	return false
}

// mayWait reports whether the running function may make the call what,
// which sets up a wait, and whether the engine implements it (entry i).
// FTN12 2.2.2 leaves setTimeout, setCancel and waitExternal to a step's
// function: from an error handler they are misuse, as on stepvm, however
// the engine would take them (one may configure the failed step, whose
// wait the handler's return drops).
func (w *fwrap) mayWait(i int, what string) bool {
	if w.inCall && w.inError {
		w.Misuse(what + " in an error handler: only a step's function may wait")
		return false
	}
	return w.has(i, what)
}

func (w *fwrap) SetTimeout(d time.Duration) {
	if !w.mayWait(C.stepvm_fx_set_timeout_i, "SetTimeout") {
		return
	}
	ms := uint64(math.MaxUint32)
	if d <= 0 {
		ms = 0
	} else if d < time.Duration(math.MaxUint32)*time.Millisecond {
		ms = uint64((d + time.Millisecond - 1) / time.Millisecond)
	}
	C.stepvm_fx_set_timeout(w.bsi, C.uint32_t(ms))
}

func (w *fwrap) SetCancel(fn vm.CancelFunc) {
	if fn == nil || !w.mayWait(C.stepvm_fx_set_cancel_i, "SetCancel") {
		return
	}
	id := w.keep(&fxCancel{fxShared: w.share(), fn: fn})
	C.stepvm_fx_set_cancel(w.bsi, C.uintptr_t(id))
}

func (w *fwrap) WaitExternal() {
	if w.mayWait(C.stepvm_fx_wait_external_i, "WaitExternal") {
		C.stepvm_fx_wait_external(w.bsi)
	}
}

func (w *fwrap) Stack(size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	if size < 0 || !w.has(C.stepvm_fx_stack_i, "StackRaw") {
		return nil
	}
	var id uintptr
	if destroy != nil {
		id = fxPut(&fxStack{destroy})
	}
	p := C.stepvm_fx_stack(w.bsi, C.size_t(size), C.uintptr_t(id))
	if p == nil && id != 0 {
		fxDel(id)
	}
	return p
}

func (w *fwrap) Break(label string) bool    { return w.unwindLoop(fxPendBreak, label) }
func (w *fwrap) Continue(label string) bool { return w.unwindLoop(fxPendContinue, label) }

func (w *fwrap) unwindLoop(what uint8, label string) bool {
	if w.inCall {
		if w.pend.what == 0 {
			w.pend = fxPending{what: what, code: label}
		}
		return true
	}
	w.loopCtl(what, label)
	return false
}

func (w *fwrap) Execute() {
	if w.has(C.stepvm_fx_execute_i, "Execute") {
		C.stepvm_fx_execute(w.bsi)
	}
}

func (w *fwrap) Cancel() {
	if w.has(C.stepvm_fx_cancel_i, "Cancel") {
		C.stepvm_fx_cancel(w.bsi)
	}
}

func (w *fwrap) Release() {
	if w.kind != fxKindInstance {
		w.Misuse("Release of a foreign AsyncSteps that NewInstance did not make: its owner frees it")
		return
	}
	if w.has(C.stepvm_fx_free_i, "Release") {
		C.stepvm_fx_free(w.bsi)
	}
}

func (w *fwrap) Misuse(info string) {
	if w.inCall {
		// For settle, should the function swallow the panic: the first
		// report, which outranks the Error, Break or Continue the function
		// may be unwinding with (misuse in a deferred function), as on
		// stepvm.
		if w.pend.what != fxPendMisuse {
			w.pend = fxPending{what: fxPendMisuse, info: info}
		}
		panic(&vm.Error{Code: vm.InternalError, Info: info})
	}
}
