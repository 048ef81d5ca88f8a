package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// task is a C callback scheduled with sched_immediate or sched_deferred.
// Tasks are pooled per loop, each with its callback bound once, so that
// scheduling costs no allocation. A FutoInHandle names a task by loop id
// (data1), index and generation (data3).
type task struct {
	ls   *loopState
	idx  uint32
	gen  uint32
	live bool
	h    vm.Handle
	cb   C.stepvm_cb_fn
	data C.uintptr_t
	run  func()
}

func (ls *loopState) schedule(deferred bool, d time.Duration, cb C.stepvm_cb_fn, data C.uintptr_t) C.FutoInHandle {
	if len(ls.freeTasks) == 0 {
		t := &task{ls: ls, idx: uint32(len(ls.tasks))}
		t.run = t.fire
		ls.tasks = append(ls.tasks, t)
		ls.freeTasks = append(ls.freeTasks, t.idx)
	}
	// The task leaves the pool once the loop has taken its callback:
	// Deferred reads the clock between passes, and a custom one may panic.
	k := len(ls.freeTasks) - 1
	t := ls.tasks[ls.freeTasks[k]]
	var vh vm.Handle
	if deferred {
		vh = ls.l.Deferred(d, t.run)
	} else {
		vh = ls.l.Immediate(t.run)
	}
	ls.freeTasks = ls.freeTasks[:k]
	t.live, t.cb, t.data, t.h = true, cb, data, vh
	var h C.FutoInHandle
	*(*uintptr)(unsafe.Pointer(&h.data1)) = uintptr(ls.id)
	h.data3 = C.ptrdiff_t(uint64(t.idx)<<32 | uint64(t.gen))
	return h
}

// fire runs the task's callback; the task is free again before it runs,
// as the loop's own callbacks are.
func (t *task) fire() {
	ls, cb, data := t.ls, t.cb, t.data
	ls.freeTask(t)
	s := ls.enter(vm.AsyncSteps{})
	C.stepvm_call_cb(cb, data, ls.id)
	ls.settle(s)
}

func (ls *loopState) freeTask(t *task) {
	t.live, t.cb, t.data, t.h = false, nil, 0, vm.Handle{}
	t.gen++
	ls.freeTasks = append(ls.freeTasks, t.idx)
}

// handleLoop returns the id of the loop h names (data1).
func handleLoop(h *C.FutoInHandle) uintptr { return *(*uintptr)(unsafe.Pointer(&h.data1)) }

// handleOwner returns the loop whose tasks h names, for a call through a
// record of ls: ls, or another live loop when this is its goroutine. It
// reports false for another loop's handle off that loop's goroutine, whose
// tasks are not to be touched from here (a cancel that zeroed the handle
// and left the task to run would be worse than none).
func (ls *loopState) handleOwner(h *C.FutoInHandle) (*loopState, bool) {
	id := handleLoop(h)
	if id == uintptr(ls.id) || id != uintptr(C.uint32_t(id)) {
		return ls, true
	}
	o := loopByID(C.uint32_t(id))
	switch {
	case o == nil: // a loop that is gone, or garbage: no task of ls
		return ls, true
	case o.elsewhere():
		return nil, false
	}
	return o, true
}

// task returns the live task h names, or nil.
func (ls *loopState) task(h *C.FutoInHandle) *task {
	if handleLoop(h) != uintptr(ls.id) {
		return nil
	}
	idx, gen := uint32(uint64(h.data3)>>32), uint32(h.data3)
	if int(idx) >= len(ls.tasks) {
		return nil
	}
	if t := ls.tasks[idx]; t.live && t.gen == gen {
		return t
	}
	return nil
}

func (ls *loopState) cancelTask(h *C.FutoInHandle) {
	if t := ls.task(h); t != nil {
		ls.l.Cancel(t.h)
		ls.freeTask(t)
	}
	*h = C.FutoInHandle{}
}

func (ls *loopState) taskValid(h *C.FutoInHandle) bool {
	t := ls.task(h)
	return t != nil && ls.l.IsValid(t.h)
}
