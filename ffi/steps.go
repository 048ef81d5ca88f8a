package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Go functions that run C code as steps. Each binds a record to the frame
// it runs in, calls C through a shim that tells callbacks which loop they
// run for, and, once C returns, raises what the C code raised meanwhile.

// execStep is the step function of every C step: AddNative keeps the C
// function and its data in the step's operands, so adding a C step costs no
// Go allocation.
func execStep(as vm.AsyncSteps, args vm.Args) {
	w := vm.TakeNativeWords(as)
	if w.A == 0 {
		panic(&vm.Error{Code: vm.InternalError, Info: "C step without a function"})
	}
	runStep(as, &args, *(*C.FutoInAsyncSteps_execute_callback)(unsafe.Pointer(&w.A)), C.uintptr_t(w.B))
}

// recordArg passes the record bsi, which lives in arena memory, to C as
// an integer: as a pointer to a structure with pointers, it would cost each
// call cgo's check that it is no Go pointer (about 130 instructions).
func recordArg(bsi *C.FutoInAsyncSteps) C.uintptr_t {
	return C.uintptr_t(uintptr(unsafe.Pointer(bsi)))
}

// syncStep returns the Go step running the C step f inside a sync.
func syncStep(f C.FutoInAsyncSteps_execute_callback, data C.uintptr_t) vm.ExecFunc {
	return func(as vm.AsyncSteps, args vm.Args) { runStep(as, &args, f, data) }
}

// runStep calls the C step f for the frame as with args.
func runStep(as vm.AsyncSteps, args *vm.Args, f C.FutoInAsyncSteps_execute_callback, data C.uintptr_t) {
	ls := loopOf(as.Tool())
	bsi := bindFrame(ls, as)
	s := ls.enter(as)
	objs := len(ls.lentObjs)
	ca, size := ls.cArgs(args)
	C.stepvm_call_exec(f, recordArg(bsi), data, ca, ls.id)
	ls.unlend(unsafe.Pointer(ca), size)
	ls.settleStep(s, objs)
}

// settleStep ends a C step's call: the custom objects lent to it (those
// of lentObjs from objs on) that were not passed on are released (it could
// not keep them: FutoInArgs is const), then what it raised is raised.
func (ls *loopState) settleStep(s callSave, objs int) {
	p := ls.leave(s)
	// By index: lentObjs is in use while a cleanup's C code runs.
	for i, n := objs, len(ls.lentObjs); i < n; i++ {
		lo := ls.lentObjs[i]
		ls.lentObjs[i] = lentObj{}
		if !lo.passed {
			lo.o.st.releaseIn(ls) // which may be another loop's Object
		}
	}
	ls.lentObjs = ls.lentObjs[:objs]
	if p != nil {
		panic(p)
	}
}

// errorHandler returns the Go error handler running the C handler eh.
func errorHandler(eh C.FutoInAsyncSteps_error_callback, data C.uintptr_t) vm.ErrorFunc {
	return func(as vm.AsyncSteps, code string) {
		ls := loopOf(as.Tool())
		bsi := bindFrame(ls, as)
		ccode := ls.lendString(code)
		s := ls.enter(as)
		C.stepvm_call_error(eh, recordArg(bsi), data, ccode, ls.id)
		ls.unlend(unsafe.Pointer(ccode), len(code)+1)
		ls.settle(s)
	}
}

// loopBody returns the Go loop body running the C body f.
func loopBody(f C.stepvm_loop_fn, data C.uintptr_t) func(vm.AsyncSteps) {
	return func(as vm.AsyncSteps) {
		ls := loopOf(as.Tool())
		bsi := bindFrame(ls, as)
		s := ls.enter(as)
		C.stepvm_call_loop(f, recordArg(bsi), data, ls.id)
		ls.settle(s)
	}
}

// repeatBody returns the Go repeat body running the C body f.
func repeatBody(f C.stepvm_repeat_fn, data C.uintptr_t) func(vm.AsyncSteps, int) {
	return func(as vm.AsyncSteps, i int) {
		ls := loopOf(as.Tool())
		bsi := bindFrame(ls, as)
		s := ls.enter(as)
		C.stepvm_call_repeat(f, recordArg(bsi), data, C.size_t(i), ls.id)
		ls.settle(s)
	}
}

// cancelHandler returns the Go cancel handler running the C handler ch. It
// passes ch the record setCancel was called through while that is valid,
// as it is while the frame lives.
func cancelHandler(ch C.FutoInAsyncSteps_cancel_callback, data C.uintptr_t, e *entry) vm.CancelFunc {
	rec, gen := e.bsi(), e.gen.Load()
	return func(as vm.AsyncSteps) {
		ls := loopOf(as.Tool())
		bsi := rec
		if r, _, _ := lookup(rec); r == nil || r.gen.Load() != gen {
			bsi = bindFrame(ls, as)
		}
		s := ls.enter(as)
		C.stepvm_call_cancel(ch, recordArg(bsi), data, ls.id)
		ls.settle(s)
	}
}

// lendString returns s as a NUL-terminated C string in the loop's scratch
// memory, len(s)+1 bytes for a C call to be lent (see unlend).
func (ls *loopState) lendString(s string) *C.char {
	p := ls.scratch.Alloc(uintptr(len(s) + 1))
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return (*C.char)(p)
}
