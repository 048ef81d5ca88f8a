package ffi

/*
#include "foreign.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The Go functions a foreign engine calls through foreign.c: Go steps,
// handlers and loop bodies, and the cleanups of what Go handed the engine.
// Each gets a new handle on the FutoInAsyncSteps the engine passes, and
// recovers whatever the Go code raises: a panic must not cross C frames.
// Error, Break and Continue of the running function unwind it with the
// VM's sentinel and are passed on once it has returned (handle_error,
// breakLoop, continueLoop), as is misuse (InternalError) and any other
// panic (InternalError with the panic's text).

//export stepvmFxExec
func stepvmFxExec(bsi *C.FutoInAsyncSteps, data C.uintptr_t, args *C.FutoInArgs) {
	w := newWrap(bsi, fxKindStep)
	defer w.settle()
	st, _ := fxGet(uintptr(data)).(*fxStep)
	if st == nil || st.fn == nil {
		w.raise(vm.InternalError, "a Go step that has been dropped: the step or flow that added it has ended")
		return
	}
	w.inherit(st.fxShared)
	var vals [vm.MaxArgs]vm.Value
	n, bad := fromForeign(args, &vals)
	if bad != "" {
		w.raise(vm.InternalError, "the values passed to a Go step: "+bad)
		return
	}
	w.inCall = true
	st.fn(w.as, vm.ForeignArgs(vals[:n]))
}

//export stepvmFxError
func stepvmFxError(bsi *C.FutoInAsyncSteps, data C.uintptr_t, code *C.char) {
	w := newWrap(bsi, fxKindStep)
	defer w.settle()
	st, _ := fxGet(uintptr(data)).(*fxStep)
	if st == nil || st.onError == nil {
		return // no handler: unwinding goes on
	}
	w.inherit(st.fxShared)
	w.inCall, w.inError = true, true
	st.onError(w.as, goString(code))
}

//export stepvmFxLoop
func stepvmFxLoop(bsi *C.FutoInAsyncSteps, data C.uintptr_t, i C.size_t) {
	w := newWrap(bsi, fxKindStep)
	defer w.settle()
	lb, _ := fxGet(uintptr(data)).(*fxLoopBody)
	if lb == nil {
		w.raise(vm.InternalError, "a Go loop body that has been dropped: the step or flow that added it has ended")
		return
	}
	w.inherit(lb.fxShared)
	w.inCall = true
	if lb.repeat != nil {
		lb.repeat(w.as, int(i))
	} else {
		lb.loop(w.as)
	}
}

//export stepvmFxCancel
func stepvmFxCancel(bsi *C.FutoInAsyncSteps, data C.uintptr_t) {
	// The flow is being torn down: a panic has nothing left to fail, and
	// the calls the handler makes go to the engine as they are.
	defer func() { _ = recover() }()
	c := fxTakeCancel(uintptr(data))
	if c.fn == nil {
		return
	}
	w := newWrap(bsi, fxKindStep)
	w.inherit(c.fxShared)
	c.fn(w.as)
}

//export stepvmFxStateAllocate
func stepvmFxStateAllocate() C.uintptr_t {
	return C.uintptr_t(fxPut(new(fxFlow)))
}

//export stepvmFxRelease
func stepvmFxRelease(id C.uintptr_t) {
	fxRelease(uintptr(id))
}

//export stepvmFxStackCleanup
func stepvmFxStackCleanup(id C.uintptr_t, p unsafe.Pointer) {
	defer func() { _ = recover() }() // as a destroy callback's in stepvm: the step has ended
	if s, ok := fxGet(uintptr(id)).(*fxStack); ok {
		fxDel(uintptr(id))
		s.destroy(p)
		return
	}
	fxRelease(uintptr(id)) // a step's owner record
}

// settle is deferred by every Go function a foreign engine calls with w: it
// recovers what the function raised and passes it on.
func (w *fwrap) settle() {
	p := recover()
	pend := w.pend
	w.inCall, w.pend = false, fxPending{}
	if p == nil && pend.what == 0 {
		return
	}
	// Calls into the engine from here on must not panic either.
	defer func() { _ = recover() }()
	if p == nil {
		// The function recovered its unwinding and returned: as in a
		// stepvm flow, that fails the flow, which must not go on as if
		// the function had succeeded (or loop for ever).
		if pend.what == fxPendMisuse {
			w.raise(vm.InternalError, pend.info)
		} else {
			w.raise(vm.InternalError, "the Go function returned after Error, Break or Continue: "+fxSwallowedInfo)
		}
		return
	}
	switch e := p.(type) {
	case *vm.Error:
		e = vm.RaisedError(e) // as in a vm step
		w.raise(e.Code, e.Info)
		return
	}
	if !vm.IsUnwinding(p) {
		w.raise(vm.InternalError, describe(p))
		return
	}
	switch pend.what {
	case fxPendError:
		w.raise(pend.code, pend.info)
	case fxPendMisuse: // swallowed while the function unwound
		w.raise(vm.InternalError, pend.info)
	case fxPendBreak, fxPendContinue:
		w.loopCtl(pend.what, pend.code)
	default: // another handle's unwinding: not this function's to settle
		w.raise(vm.InternalError, "Error, Break or Continue through a handle whose function is not the running one")
	}
}

// describe returns the text of a panic value, whose String or Error method
// may panic in turn.
func describe(p any) (s string) {
	defer func() {
		if recover() != nil {
			s = "panic with a value that cannot be printed"
		}
	}()
	return fmt.Sprint(p)
}
