// Package cengine is a tiny FTN12 AsyncSteps engine written in C against
// futoin/binaryapi.h: the foreign implementation on which the tests of
// ffi.Wrap run Go code. It is single-threaded and driven by an event queue
// that the tests turn with Run. (Test files cannot use cgo, hence a
// package.) See cengine.c for what it implements.
package cengine

/*
#cgo CFLAGS: -I${SRCDIR}/../../include -std=c11 -Wall
#include <stdlib.h>
#include "cengine.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

func bsi(p unsafe.Pointer) *C.FutoInAsyncSteps { return (*C.FutoInAsyncSteps)(p) }

// NewRoot returns a new root of the engine.
func NewRoot() unsafe.Pointer { return unsafe.Pointer(C.cengine_new_root()) }

// Run runs queued events until none is left and returns how many ran.
func Run() int { return int(C.cengine_run()) }

// Reset frees the engine's memory, its queued events and its trace: no
// handle it gave out may be used afterwards.
func Reset() { C.cengine_reset() }

// Free frees root through its table (free).
func Free(root unsafe.Pointer) { C.cengine_free(bsi(root)) }

// CancelTwice makes the engine call every cancel handler twice, until
// Reset, as a faulty engine would.
func CancelTwice() { C.cengine_cancel_twice(1) }

// Outcomes of a root, as Result reports them.
const (
	Idle     = 0 // not executed, or still running
	Done     = 1
	Failed   = 2
	Canceled = 3
)

// Result returns how the last run of root ended and, if it failed, the
// error code.
func Result(root unsafe.Pointer) (int, string) {
	var buf [32]C.char
	r := C.cengine_result(bsi(root), &buf[0], C.size_t(len(buf)))
	return int(r), C.GoString(&buf[0])
}

// Misuses returns how many calls the engine refused since Reset, and the
// last one.
func Misuses() (int, string) {
	return int(C.cengine_misuses()), C.GoString(C.cengine_last_misuse())
}

// LastErrorInfo returns the info of the last handle_error call since
// Reset (the engine keeps none).
func LastErrorInfo() string { return C.GoString(C.cengine_last_error_info()) }

// Say appends a line to the trace.
func Say(s string) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	C.cengine_say(cs)
}

// Trace returns the lines printed since the trace was last reset and
// starts a new trace.
func Trace() []string {
	s := C.GoString(C.cengine_trace())
	C.cengine_trace_reset()
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// AddSay adds a C step that prints line.
func AddSay(p unsafe.Pointer, line string) {
	cs := C.CString(line)
	defer C.free(unsafe.Pointer(cs))
	C.cengine_add_say(bsi(p), cs)
}

// AddEmit adds a C step that succeeds with INT32 -7, DOUBLE 2.5, the
// UTF-16 string "héllo" and a custom object (p: a C address, custom_data
// 42, length 1) whose cleanup ObjectCleanups counts.
func AddEmit(p unsafe.Pointer) { C.cengine_add_emit(bsi(p)) }

// AddCheck adds a C step that prints the values it receives.
func AddCheck(p unsafe.Pointer) { C.cengine_add_check(bsi(p)) }

// AddFail adds a C step that fails with code.
func AddFail(p unsafe.Pointer, code string) {
	cs := C.CString(code)
	defer C.free(unsafe.Pointer(cs))
	C.cengine_add_fail(bsi(p), cs)
}

// CompleteLater queues an event that completes the waiting step p with
// INT32 value.
func CompleteLater(p unsafe.Pointer, value int) { C.cengine_complete_later(bsi(p), C.int(value)) }

// ObjectCleanups counts the cleanups of the custom objects AddEmit's steps
// made, for the life of the process.
func ObjectCleanups() int { return int(C.cengine_object_cleanups()) }

// AddLock adds a C step that calls the lock function of the FutoInSync
// sync itself, with its own FutoInAsyncSteps, as an engine's addSync would,
// and then, with unlock, its unlock function.
func AddLock(p, sync unsafe.Pointer, unlock bool) {
	u := 0
	if unlock {
		u = 1
	}
	C.cengine_add_lock(bsi(p), (*C.FutoInSync)(sync), C.int(u))
}
