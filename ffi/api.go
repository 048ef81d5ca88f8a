package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The functions of stepvm's FutoInAsyncSteps table (FTN12 2.7.2), in index
// order; binaryapi.c forwards each entry here with the id of the loop whose
// C call is running on the thread (0: none). Each resolves the record,
// reports a bad one as misuse, and catches what the VM raises so that no
// panic crosses C frames (see callback.done).

//export stepvmAdd
func stepvmAdd(bsi *C.FutoInAsyncSteps, data C.uintptr_t, f C.FutoInAsyncSteps_execute_callback,
	eh C.FutoInAsyncSteps_error_callback, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "add")
	if e == nil {
		return
	}
	defer c.done()
	if f == nil {
		c.misuse("add with a NULL step function")
		return
	}
	var onError vm.ErrorFunc
	if eh != nil {
		onError = errorHandler(eh, data)
	}
	vm.AddNative(c.as, execStep, onError, vm.NativeWords{A: uintptr(unsafe.Pointer(f)), B: uintptr(data)})
}

//export stepvmParallel
func stepvmParallel(bsi *C.FutoInAsyncSteps, data C.uintptr_t, eh C.FutoInAsyncSteps_error_callback,
	cur C.uint32_t) *C.FutoInAsyncSteps {
	c, e := locate(bsi).begin(cur, "parallel")
	if e == nil {
		return nil
	}
	defer c.done()
	var p vm.AsyncSteps
	if eh != nil {
		p = c.as.Parallel(errorHandler(eh, data))
	} else {
		p = c.as.Parallel()
	}
	if !p.Valid() {
		return nil
	}
	return e.ls.bindAccessor(p)
}

//export stepvmStateVariable
func stepvmStateVariable(bsi *C.FutoInAsyncSteps, data C.uintptr_t, name *C.char,
	allocate C.stepvm_alloc_fn, cleanup C.stepvm_state_cleanup_fn, cur C.uint32_t) C.uintptr_t {
	c, e := locate(bsi).begin(cur, "stateVariable")
	if e == nil {
		return 0
	}
	defer c.done()
	if name == nil {
		c.misuse("stateVariable with a NULL name")
		return 0
	}
	return c.stateVariable(e, data, name, allocate, cleanup)
}

// stackHeader precedes the memory stack hands to C: the C cleanup. 16
// bytes keep the memory 16-byte aligned.
type stackHeader struct {
	cleanup C.stepvm_stack_cleanup_fn
	_       uint64
}

//export stepvmStack
func stepvmStack(bsi *C.FutoInAsyncSteps, size C.size_t, cleanup C.stepvm_stack_cleanup_fn,
	cur C.uint32_t) unsafe.Pointer {
	c, e := locate(bsi).begin(cur, "stack")
	if e == nil {
		return nil
	}
	defer c.done()
	if uint64(size) > maxBytes {
		c.misuse("stack: size beyond any plausible allocation")
		return nil
	}
	var destroy func(unsafe.Pointer)
	if cleanup != nil {
		destroy = e.ls.onStackEnd
	}
	p := c.as.StackRaw(int(unsafe.Sizeof(stackHeader{}))+int(size), destroy)
	if p == nil {
		return nil
	}
	(*stackHeader)(p).cleanup = cleanup
	return unsafe.Add(p, unsafe.Sizeof(stackHeader{}))
}

// destroyStack runs the C cleanup of memory stack handed out; the VM calls
// it (as ls.onStackEnd) as the step ends.
func (ls *loopState) destroyStack(p unsafe.Pointer) {
	s := ls.enter(vm.AsyncSteps{})
	C.stepvm_call_stack_cleanup((*stackHeader)(p).cleanup, unsafe.Add(p, unsafe.Sizeof(stackHeader{})), ls.id)
	ls.settle(s)
}

//export stepvmSuccess
func stepvmSuccess(bsi *C.FutoInAsyncSteps, args *C.FutoInArgs, cur C.uint32_t) {
	f := locate(bsi)
	if f.e != nil && f.e.away(cur) {
		successAway(f.e, f.gen, args, cur)
		return
	}
	c, e := f.begin(cur, "success")
	if e == nil {
		discard(c.ls, args, cur)
		return
	}
	defer c.done()
	ls := c.ls
	if ls == nil {
		ls = e.ls // its goroutine, which runs no C call
	}
	var vals [vm.MaxArgs]vm.Value
	n, bad := fromC(ls, e.ls.res, args, &vals)
	if bad != "" {
		c.fail("success: " + bad)
		return
	}
	c.as.Success(vals[:n]...)
}

// successAway is success from a thread that is not the goroutine of e's
// loop: the step's Resumer completes it, and the loop runs it on. No C
// call of the loop lends this thread values, and the loop's state is not
// to be touched: the values are converted by the state of the loop whose
// C call runs on this thread, which may have lent them, as success on a
// loop's own goroutine does for a step of another loop; with none, by a
// state of their own that lends none, and the cleanups of those copied run
// for no loop.
func successAway(e *entry, gen uint32, args *C.FutoInArgs, cur C.uint32_t) {
	c, res, ok := beginAway(e, gen, cur, "success")
	if !ok {
		discard(c.ls, args, cur)
		return
	}
	defer c.done()
	ls := c.ls
	if ls == nil {
		ls = &loopState{res: e.ls.res}
	}
	var vals [vm.MaxArgs]vm.Value
	n, bad := fromC(ls, e.ls.res, args, &vals)
	if bad != "" {
		c.failAway(e, gen, res, "success: "+bad)
		return
	}
	// A refused success takes its values all the same: the custom objects
	// among them are released at once, here or on the loop.
	if res != (vm.Resumer{}) { // finishAway's common case, without its closure
		if !res.SuccessOrRelease(releaseLater(e.ls, vals[:n]), vals[:n]...) {
			releaseObjects(ls, vals[:n])
		}
		return
	}
	late, target := vals, e.ls // the closure's own copy: vals stays on the stack
	e.finishAway(gen, res, func(r vm.Resumer) {
		if !r.SuccessOrRelease(releaseLater(target, late[:n]), late[:n]...) {
			releaseObjects(target, late[:n])
		}
	})
}

// releaseLater returns what releases the custom objects among vals for
// ls, when the loop drops the completion that carries them (see
// vm.Resumer.SuccessOrRelease), or nil when vals hold none. It keeps a
// copy of vals.
func releaseLater(ls *loopState, vals []vm.Value) func() {
	for _, v := range vals {
		if v.Kind() != vm.KindAny {
			continue
		}
		if _, ok := v.Any().(*Object); ok {
			own := slices.Clone(vals)
			return func() { releaseObjects(ls, own) }
		}
	}
	return nil
}

// releaseObjects releases the custom objects among vals, which no step
// took, for ls, the loop whose goroutine calls it.
func releaseObjects(ls *loopState, vals []vm.Value) {
	for _, v := range vals {
		if v.Kind() == vm.KindAny {
			if o, ok := v.Any().(*Object); ok {
				o.st.releaseIn(ls)
			}
		}
	}
}

// fail fails the flow of the call with InternalError and info: at once
// when no C call runs, as when Go code calls C.
func (c callback) fail(info string) {
	if c.ls != nil {
		c.misuse(info)
		return
	}
	c.as.Error(vm.InternalError, info)
}

// failAway is fail from a thread that is not the goroutine of the loop of
// the step e's record names (gen, completed through res: see finishAway):
// the C call running on it, if any, fails, or else the step.
func (c callback) failAway(e *entry, gen uint32, res vm.Resumer, info string) {
	if c.ls != nil {
		c.misuse(info)
		return
	}
	e.finishAway(gen, res, func(r vm.Resumer) { r.Error(vm.InternalError, info) })
}

//export stepvmHandleError
func stepvmHandleError(bsi *C.FutoInAsyncSteps, code, info *C.char, cur C.uint32_t) {
	f := locate(bsi)
	if e := f.e; e != nil && e.away(cur) {
		c, res, ok := beginAway(e, f.gen, cur, "handle_error")
		if !ok {
			return
		}
		defer c.done()
		if code == nil {
			c.failAway(e, f.gen, res, "handle_error with a NULL code")
			return
		}
		code, info := C.GoString(code), goString(info)
		e.finishAway(f.gen, res, func(r vm.Resumer) { r.Error(code, info) })
		return
	}
	c, e := f.begin(cur, "handle_error")
	if e == nil {
		return
	}
	defer c.done()
	if code == nil {
		c.fail("handle_error with a NULL code")
		return
	}
	c.as.Error(C.GoString(code), goString(info))
}

//export stepvmSetTimeout
func stepvmSetTimeout(bsi *C.FutoInAsyncSteps, ms C.uint32_t, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "setTimeout")
	if e == nil {
		return
	}
	defer c.done()
	c.as.SetTimeout(time.Duration(ms) * time.Millisecond)
	e.waits()
}

//export stepvmSetCancel
func stepvmSetCancel(bsi *C.FutoInAsyncSteps, data C.uintptr_t, ch C.FutoInAsyncSteps_cancel_callback,
	cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "setCancel")
	if e == nil {
		return
	}
	defer c.done()
	if ch == nil {
		c.misuse("setCancel with a NULL cancel handler")
		return
	}
	c.as.SetCancel(cancelHandler(ch, data, e))
	e.waits()
}

//export stepvmWaitExternal
func stepvmWaitExternal(bsi *C.FutoInAsyncSteps, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "waitExternal")
	if e == nil {
		return
	}
	defer c.done()
	c.as.WaitExternal()
	e.waits()
}

//export stepvmLoop
func stepvmLoop(bsi *C.FutoInAsyncSteps, data C.uintptr_t, f C.stepvm_loop_fn, label *C.char,
	cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "loop")
	if e == nil {
		return
	}
	defer c.done()
	if f == nil {
		c.misuse("loop with a NULL body")
		return
	}
	c.as.Loop(loopBody(f, data), goString(label))
}

//export stepvmRepeat
func stepvmRepeat(bsi *C.FutoInAsyncSteps, data C.uintptr_t, count C.size_t, f C.stepvm_repeat_fn,
	label *C.char, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "repeat")
	if e == nil {
		return
	}
	defer c.done()
	if f == nil {
		c.misuse("repeat with a NULL body")
		return
	}
	n := int(min(uint64(count), math.MaxInt))
	c.as.Repeat(n, repeatBody(f, data), goString(label))
}

//export stepvmBreakLoop
func stepvmBreakLoop(bsi *C.FutoInAsyncSteps, label *C.char, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "breakLoop")
	if e == nil {
		return
	}
	defer c.done()
	c.as.Break(goString(label))
}

//export stepvmContinueLoop
func stepvmContinueLoop(bsi *C.FutoInAsyncSteps, label *C.char, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "continueLoop")
	if e == nil {
		return
	}
	defer c.done()
	c.as.Continue(goString(label))
}

//export stepvmExecute
func stepvmExecute(bsi *C.FutoInAsyncSteps, data C.uintptr_t, ueh C.FutoInAsyncSteps_error_callback,
	cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "execute")
	if e == nil {
		return
	}
	defer c.done()
	ri := e.ls.root(c.as)
	if ri == nil {
		c.as.Execute() // not a live root: the VM reports the misuse
		return
	}
	// An execute refused as misuse (the root runs) must not take over the
	// handler of the run it was refused for; an accepted one makes the
	// root a running one.
	running := e.ls.l.Stats().RunningRoots
	c.as.Execute()
	if e.ls.l.Stats().RunningRoots > running {
		ri.ueh, ri.uehData = ueh, data
	}
}

//export stepvmCancel
func stepvmCancel(bsi *C.FutoInAsyncSteps, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "cancel")
	if e == nil {
		return
	}
	defer c.done()
	c.as.Cancel()
}

//export stepvmAddSync
func stepvmAddSync(bsi *C.FutoInAsyncSteps, sync *C.FutoInSync, data C.uintptr_t,
	f C.FutoInAsyncSteps_execute_callback, eh C.FutoInAsyncSteps_error_callback, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "addSync")
	if e == nil {
		return
	}
	defer c.done()
	switch {
	case f == nil:
		c.misuse("addSync with a NULL step function")
		return
	case sync == nil || sync.api == nil:
		c.misuse("addSync with a NULL FutoInSync")
		return
	}
	obj, bad := syncObject(sync)
	if obj == nil {
		c.misuse("addSync" + bad)
		return
	}
	var onError vm.ErrorFunc
	if eh != nil {
		onError = errorHandler(eh, data)
	}
	c.as.Sync(obj, syncStep(f, data), onError)
}

//export stepvmRootId
func stepvmRootId(bsi *C.FutoInAsyncSteps, cur C.uint32_t) C.ptrdiff_t {
	c, e := locate(bsi).begin(cur, "rootId")
	if e == nil {
		return 0
	}
	return C.ptrdiff_t(vm.RootID(c.as))
}

//export stepvmIsValid
func stepvmIsValid(bsi *C.FutoInAsyncSteps, cur C.uint32_t) C.int {
	e := locate(bsi).e
	if e == nil {
		return 0
	}
	if e.away(cur) {
		// The record is current: all another thread can know. (A root
		// the program dropped counts until its loop gives the record back.)
		return 1
	}
	if as, ok := e.resolve(); !ok || !as.Valid() {
		return 0
	}
	return 1
}

//export stepvmNewInstance
func stepvmNewInstance(bsi *C.FutoInAsyncSteps, cur C.uint32_t) *C.FutoInAsyncSteps {
	c, e := locate(bsi).begin(cur, "newInstance")
	if e == nil {
		return nil
	}
	defer c.done()
	n := c.as.NewInstance()
	ri := e.ls.root(n)
	if ri == nil {
		return nil
	}
	e.ls.hold(ri)
	return ri.record()
}

//export stepvmFree
func stepvmFree(bsi *C.FutoInAsyncSteps, cur C.uint32_t) {
	c, e := locate(bsi).beginLetGo(cur, "free")
	if e == nil || e.kind != kindRoot {
		return // a step's or an accessor's record ends with what it names
	}
	defer c.done()
	ri := e.ri.Value() // not nil: begin resolved it
	if ri.rec != e {
		return // the record was dropped from its root already
	}
	if !ri.owned {
		ri.rec = nil // the root stays Go's; C has only let go of its record
		ri.forget(e)
		return
	}
	c.as.Release() // the release hook drops what the root held
}

//export stepvmSchedule
func stepvmSchedule(bsi *C.FutoInAsyncSteps, deferred C.int, ms C.uint32_t, data C.uintptr_t,
	cb C.stepvm_cb_fn, h *C.FutoInHandle, cur C.uint32_t) {
	c, e := locate(bsi).begin(cur, "sched")
	if e == nil {
		return
	}
	defer c.done()
	if cb == nil {
		c.misuse("sched_immediate or sched_deferred with a NULL callback")
		return
	}
	*h = e.ls.schedule(deferred != 0, time.Duration(ms)*time.Millisecond, cb, data)
}

//export stepvmSchedCancel
func stepvmSchedCancel(bsi *C.FutoInAsyncSteps, h *C.FutoInHandle, cur C.uint32_t) {
	c, e := locate(bsi).beginLetGo(cur, "sched_cancel")
	if h == nil {
		return
	}
	at := c.ls // a bad record: h may still name a task of this C call's loop
	if e != nil {
		at = e.ls
	}
	if at == nil {
		return
	}
	defer c.done()
	ls, ok := at.handleOwner(h)
	if !ok {
		c.misuse("sched_cancel with a handle of a loop that runs on another thread: cancel it on that loop's thread")
		return
	}
	ls.cancelTask(h)
}

//export stepvmSchedIsValid
func stepvmSchedIsValid(bsi *C.FutoInAsyncSteps, h *C.FutoInHandle, cur C.uint32_t) C.int {
	c, e := locate(bsi).begin(cur, "sched_is_valid")
	if e == nil || h == nil {
		return 0
	}
	defer c.done()
	ls, ok := e.ls.handleOwner(h)
	if !ok {
		c.misuse("sched_is_valid with a handle of a loop that runs on another thread: ask on that loop's thread")
		return 0
	}
	if ls.taskValid(h) {
		return 1
	}
	return 0
}

//export stepvmIsSameThread
func stepvmIsSameThread(bsi *C.FutoInAsyncSteps, cur C.uint32_t) C.int {
	f := locate(bsi)
	e := f.e
	if e == nil {
		f.begin(cur, "is_same_thread") // reports the misuse
		return 0
	}
	if e.away(cur) {
		return 0
	}
	return 1
}

// goString copies a C string; NULL is "".
func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
