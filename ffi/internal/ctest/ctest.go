// Package ctest holds the C half of the tests of package ffi: the FTN12
// examples and the misuse scenarios written in C against
// futoin/binaryapi.h, and thin Go wrappers for the tests to drive them.
// (Test files cannot use cgo, hence a package.)
package ctest

/*
#cgo CFLAGS: -I${SRCDIR}/../../include -std=c11 -D_POSIX_C_SOURCE=200809L -Wall
#cgo LDFLAGS: -lpthread
#include <stdlib.h>
#include "ctest.h"
*/
import "C"

import (
	"strings"
	"unsafe"
)

func bsi(p unsafe.Pointer) *C.FutoInAsyncSteps { return (*C.FutoInAsyncSteps)(p) }

// Trace returns the lines the C code printed since ResetTrace.
func Trace() []string {
	s := C.GoString(C.ctest_trace())
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func ResetTrace() { C.ctest_trace_reset() }

// Say appends a line to the trace, for Go steps of mixed flows.
func Say(s string) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	C.ctest_say(cs)
}

// Layout returns the layout checks that failed, one per line.
func Layout() string { return C.GoString(C.ctest_layout()) }

// TableComplete reports whether every function of p's table is set.
func TableComplete(p unsafe.Pointer) bool { return C.ctest_table_complete(bsi(p)) != 0 }

func Levels(root unsafe.Pointer)              { C.ctest_levels(bsi(root)) }
func ErrorHandling(root unsafe.Pointer)       { C.ctest_error_handling(bsi(root)) }
func StepsInErrorHandler(root unsafe.Pointer) { C.ctest_steps_in_error_handler(bsi(root)) }
func Parallel(root unsafe.Pointer)            { C.ctest_parallel(bsi(root)) }
func ParallelAbort(root unsafe.Pointer)       { C.ctest_parallel_abort(bsi(root)) }
func Loops(root unsafe.Pointer)               { C.ctest_loops(bsi(root)) }
func ExternalWait(root unsafe.Pointer)        { C.ctest_external_wait(bsi(root)) }
func MixedLevel1(p unsafe.Pointer)            { C.ctest_mixed_level1(bsi(p)) }

// AddSay adds a C step that prints line.
func AddSay(p unsafe.Pointer, line string) {
	C.ctest_add_say(bsi(p), C.CString(line)) // kept for the life of the test binary
}

// SyncFlow adds to root a section under sync, for flow "A", "B" or "C"
// (name 0, 1, 2): it prints enter, waits 10 ms, prints leave.
func SyncFlow(root, sync unsafe.Pointer, name int) {
	C.ctest_sync_flow(bsi(root), (*C.FutoInSync)(sync), C.int(name))
}

// CMutex returns a mutex implemented in C, reset.
func CMutex() unsafe.Pointer { return unsafe.Pointer(C.ctest_c_mutex()) }

// Modes of AddCross: its C step schedules a deferred callback through its
// own record, then asks after it and cancels it through other, printing
// "valid through the other record 1" and "canceled through the other
// record: valid 0" as it goes; or it adds a nop step through other and
// prints "added through the other record".
const (
	CrossCancel = iota
	CrossAdd
)

// AddCross adds to p a C step that calls through other, a record of
// another loop, as mode says.
func AddCross(p unsafe.Pointer, mode int, other unsafe.Pointer) {
	C.ctest_add_cross(bsi(p), C.int(mode), bsi(other))
}

// Misuse adds to root the C steps of a misuse scenario (see misuse.c),
// with gap C steps between saving a handle and misusing it.
func Misuse(root unsafe.Pointer, scenario, gap int) {
	C.ctest_misuse(bsi(root), C.int(scenario), C.int(gap))
}
func MisuseOutside(root unsafe.Pointer, scenario int) {
	C.ctest_misuse_outside(bsi(root), C.int(scenario))
}

func Emit(root unsafe.Pointer, which int) { C.ctest_emit(bsi(root), C.int(which)) }
func CheckArgs(root unsafe.Pointer)       { C.ctest_check_args(bsi(root)) }
func Forward(root unsafe.Pointer)         { C.ctest_forward(bsi(root)) }

// ForwardNested adds a C step that forwards its values after a nested C
// call (a freed root's state-variable cleanup); NestedCleanups counts
// those cleanups.
func ForwardNested(root unsafe.Pointer)       { C.ctest_forward_nested(bsi(root)) }
func NestedCleanups() int                     { return int(C.ctest_nested_cleanups()) }
func Keep(root unsafe.Pointer)                { C.ctest_keep(bsi(root)) }
func PassKept(root unsafe.Pointer)            { C.ctest_pass_kept(bsi(root)) }
func Cleanups() int                           { return int(C.ctest_cleanups()) }
func ResetCleanups()                          { C.ctest_cleanups_reset() }
func Features(root unsafe.Pointer, which int) { C.ctest_features(bsi(root), C.int(which)) }
func Counter(i int) int                       { return int(C.ctest_counter(C.int(i))) }
func ResetCounters()                          { C.ctest_counters_reset() }
func FreeNew()                                { C.ctest_free_new() }
func ForeignThread(root unsafe.Pointer)       { C.ctest_foreign_thread(bsi(root)) }
func AddNop(p unsafe.Pointer)                 { C.ctest_add_nop(bsi(p)) }
func AddNopSuccess(p unsafe.Pointer)          { C.ctest_add_nop_success(bsi(p)) }

// AddBreak adds a C step that breaks the loop labelled label ("": the
// innermost).
func AddBreak(p unsafe.Pointer, label string) {
	var cl *C.char
	if label != "" {
		cl = C.CString(label) // kept for the life of the test binary
	}
	C.ctest_add_break(bsi(p), cl)
}

// AddFail adds a C step that fails with code; with recover, its C error
// handler settles the error with the string "recovered in C".
func AddFail(p unsafe.Pointer, code string, recover bool) {
	r := 0
	if recover {
		r = 1
	}
	C.ctest_add_fail(bsi(p), C.CString(code), C.int(r)) // kept for the life of the test binary
}

// IsValid calls isValid through p's own table.
func IsValid(p unsafe.Pointer) bool { return C.ctest_is_valid(bsi(p)) != 0 }

// Foreign returns a FutoInAsyncSteps of another implementation.
func Foreign() unsafe.Pointer { return unsafe.Pointer(C.ctest_foreign()) }

// AddNops adds n C steps that do nothing.
func AddNops(p unsafe.Pointer, n int) { C.ctest_add_nops(bsi(p), C.int(n)) }

// Nops counts the runs of the C steps of AddNop, AddNopSuccess and AddNops.
func Nops() int { return int(C.ctest_nops()) }

// String copies n bytes of C memory at p, an address C handed out.
func String(p uintptr, n uint32) string {
	return C.GoStringN((*C.char)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), C.int(n))
}

// ExecuteWithHandler executes root from C with a handler of unhandled
// errors that prints "unhandled: <code>".
func ExecuteWithHandler(root unsafe.Pointer) { C.ctest_execute_with_handler(bsi(root)) }

// AddWait adds a C step that waits for an external event; Waiting returns
// the record of the last one that ran.
func AddWait(p unsafe.Pointer) { C.ctest_add_wait(bsi(p)) }

func Waiting() unsafe.Pointer { return unsafe.Pointer(C.ctest_waiting()) }

// Complete calls success with the string s through p from C, as an event
// callback of a C library would.
func Complete(p unsafe.Pointer, s string) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	C.ctest_complete(bsi(p), cs)
}

// Fail calls handle_error with code through p from C, as an event
// callback of a C library would.
func Fail(p unsafe.Pointer, code string) {
	cs := C.CString(code)
	defer C.free(unsafe.Pointer(cs))
	C.ctest_fail(bsi(p), cs)
}

// Reentry makes a root with newInstance through host and adds to it the
// steps of a scenario of reentry.c: the call what from the callback where.
func Reentry(host unsafe.Pointer, where, what int) unsafe.Pointer {
	return unsafe.Pointer(C.ctest_reentry(bsi(host), C.int(where), C.int(what)))
}

// ReentryExecute executes the root of the scenario from C, with a handler
// of unhandled errors that prints "unhandled: <code>".
func ReentryExecute() { C.ctest_reentry_execute() }

// ReentryFree frees the root of the scenario from C.
func ReentryFree() { C.ctest_reentry_free() }

// ReentryRunaway returns how many stack cleanups the scenario ran.
func ReentryRunaway() int { return int(C.ctest_reentry_runaway()) }

// ExecuteRefused executes target from C with a handler of unhandled errors
// that prints "refused execute's handler: <code>"; AddExecute adds to p a
// C step that does so.
func ExecuteRefused(target unsafe.Pointer) { C.ctest_execute_refused(bsi(target)) }
func AddExecute(p, target unsafe.Pointer)  { C.ctest_add_execute(bsi(p), bsi(target)) }

// ExecuteRetrying executes root from C with a handler of unhandled errors
// that prints "unhandled: <code>" and, the first time, adds a C step that
// fails with "Again" and executes root again with itself, which then
// only prints.
func ExecuteRetrying(root unsafe.Pointer) { C.ctest_execute_retrying(bsi(root)) }

// AddObjectThread adds a C step that waits and is completed from a thread
// of its own with a custom object, whose cleanups ObjectCleanups counts.
func AddObjectThread(p unsafe.Pointer) { C.ctest_add_object_thread(bsi(p)) }

func ObjectCleanups() int { return int(C.ctest_object_cleanups()) }

// LastObject names the custom object CompleteObject, a C step of
// AddRefusedSuccess or AddObjectThread's thread made last, for CleanupsOf: the count of its cleanups,
// which no other test's objects add to.
func LastObject() uint32 { return uint32(C.ctest_last_object()) }

func CleanupsOf(object uint32) int { return int(C.ctest_cleanups_of(C.uint32_t(object))) }

// CompleteObject calls success through the table of through, with the
// record bsi (which may be NULL), and a custom object that ObjectCleanups
// counts, as an event callback of a C library would; it reports whether
// success took the object (emptied the FutoInArgs).
func CompleteObject(through, p unsafe.Pointer) bool {
	return C.ctest_complete_object(bsi(through), bsi(p)) != 0
}

// Modes of AddRefusedSuccess: the C step calls success through its own
// record after handle_error, or through the target record; with a custom
// object ObjectCleanups counts (it prints "taken 1" when success emptied
// the FutoInArgs), or with the values it was lent (it prints "lent kept 1"
// when success left them alone). RefusedBadValue calls success through
// its own record with a value of a type the interface does not have (an
// array of strings), with a cleanup ObjectCleanups counts;
// RefusedLentAfterBadValue passes after it the values it was lent, and
// RefusedLentBeforeBadValue before it.
const (
	RefusedAfterError = iota
	RefusedThroughTarget
	RefusedLentAfterError
	RefusedLentThroughTarget
	RefusedBadValue
	RefusedLentAfterBadValue
	RefusedLentBeforeBadValue
)

// AddRefusedSuccess adds to p a C step that calls success as mode says.
func AddRefusedSuccess(p unsafe.Pointer, mode int, target unsafe.Pointer) {
	C.ctest_add_refused_success(bsi(p), C.int(mode), bsi(target))
}

// AddLate adds a C step that waits and hands its record to a thread of its
// own, which calls isValid, is_same_thread, success and handle_error
// through it 500 times each, racing the step's end and the reuse of its
// record; LateDone counts the threads that have finished.
func AddLate(p unsafe.Pointer) { C.ctest_add_late(bsi(p)) }

func LateDone() int { return int(C.ctest_late_done()) }

// Lock modes of OddSync: lock enters by calling success, by waitExternal
// then success, refuses with "Refused", calls success twice, adds a C step
// that prints "lock sub-step", queues every caller, or is a mutex (queues
// callers while held).
const (
	OddLockSuccess = iota + 1
	OddLockWaitSuccess
	OddLockRefuse
	OddLockSuccessTwice
	OddLockAdd
	OddLockQueue
	OddLockMutex
)

// Unlock modes of OddSync: unlock counts, fails with "UnlockFailed", or
// hands the section to the oldest waiter (a caller that was queued leaves
// the queue).
const (
	OddUnlockCount = iota
	OddUnlockFail
	OddUnlockHandover
)

// OddSync returns a FutoInSync implemented in C that misbehaves as the
// modes say, reset (see oddsync.c).
func OddSync(lockMode, unlockMode int) unsafe.Pointer {
	return unsafe.Pointer(C.ctest_odd_sync(C.int(lockMode), C.int(unlockMode)))
}

// OddCounts returns how many times OddSync's lock and unlock ran, and how
// many callers wait in its queue.
func OddCounts() (locks, unlocks, queued int) {
	var l, u, q C.int
	C.ctest_odd_counts(&l, &u, &q)
	return int(l), int(u), int(q)
}

// OddGrant completes the oldest waiter of OddSync with success, through
// its FutoInAsyncSteps; again repeats the last grant.
func OddGrant(again bool) {
	a := 0
	if again {
		a = 1
	}
	C.ctest_odd_grant(C.int(a))
}

// UnhandledNested executes failing from C with a handler of unhandled
// errors, its step waiting, and adds to caller a C step that fails that
// step through its record, from its own function or (inError) from its
// error handler. The handler prints "unhandled: <code>", then makes the
// call what (1 success, 2 add, 3 handle_error, 4 execute, 5 cancel, 6
// setTimeout, 7 waitExternal, 8 breakLoop, 9 continueLoop, 10 free)
// through the record through names (0 its own, 1 the caller's, 2 the
// failed step's).
func UnhandledNested(failing, caller unsafe.Pointer, inError bool, through, what int) {
	e := 0
	if inError {
		e = 1
	}
	C.ctest_unhandled_nested(bsi(failing), bsi(caller), C.int(e), C.int(through), C.int(what))
}

// Flow adds to root the C steps of a scenario of flows.c: 1, a step that
// succeeds with the FutoInArgs it received; 2 and 3, a parallel step one
// of whose branches prints the string of 100 bytes its C step received
// (2), or the code its C error handler received (3), after success ended
// the step and the memory it freed was taken again; 4, a repeat labelled
// "outer" of 5 whose body repeats 3 times a body that, the second time,
// adds a step that continues "outer" (breaks it the third time); 5, a loop
// labelled "outer" whose body adds a failing step whose error handler
// continues "outer" twice, then breaks it; 6 and 7, a loop whose body runs
// a parallel step: branch A waits with a cancel handler, B fails, the
// parallel step's handler breaks the loop, and A's cancel handler (6) or
// B's stack cleanup (7) adds a branch through the accessor. The bodies,
// handlers and branches take stack memory whose cleanup prints.
func Flow(root unsafe.Pointer, which int) { C.ctest_flow(bsi(root), C.int(which)) }

// FlowEnding makes a root with newInstance through host, whose C step
// makes a state variable whose allocate function cancels the root (mode
// 0), frees it (1) or calls handle_error through its record (2), and
// executes it; FlowFree frees it if it is valid. FlowCounts returns how
// many times the variable was allocated and cleaned up.
func FlowEnding(host unsafe.Pointer, mode int) { C.ctest_flow_ending(bsi(host), C.int(mode)) }

func FlowFree() { C.ctest_flow_free() }

func FlowCounts() (allocs, cleanups int) {
	return int(C.ctest_flow_count(0)), int(C.ctest_flow_count(1))
}

// HandlerWait adds to p a C step that fails with "E" (parallel: a C step
// whose parallel step's branch does), whose C error handler prints
// "handler <code>", calls what (1 setTimeout, 2 setCancel, 3 waitExternal)
// through its own record or (through) the record of the failing step's
// function, prints "handler went on" and then returns (then 0), adds a
// step that prints "added step" (1) or succeeds (2).
func HandlerWait(p unsafe.Pointer, what int, through bool, then int, parallel bool) {
	C.ctest_handler_wait(bsi(p), C.int(what), cbool(through), C.int(then), cbool(parallel))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// StackThreads adds to p a C step that runs a parallel step with a C error
// handler and two branches: A loops into a section of sync that waits, B
// adds a step with an error handler that times out after 10 ms (mode 0)
// or waits (mode 1). Every C function and handler takes two pieces of
// stack memory, "<name> 1" then "<name> 2", whose cleanups print
// "cleanup <name> <i>" (see threads.c).
func StackThreads(p, sync unsafe.Pointer, mode int) {
	C.ctest_stack_threads(bsi(p), (*C.FutoInSync)(sync), C.int(mode))
}

// StackBranches adds to p a C step that runs a parallel step of n
// branches, each holding stack memory in its step and in a sub-step with
// an error handler that waits with a cancel handler; StackBranchesEnd
// completes those sub-steps, last first, with success or (fail)
// handle_error. ThreadsCounts returns how many stack cleanups and cancel
// handlers ran since StackBranches.
func StackBranches(p unsafe.Pointer, n int) { C.ctest_stack_branches(bsi(p), C.int(n)) }
func StackBranchesEnd(fail bool)            { C.ctest_stack_branches_end(cbool(fail)) }
func ThreadsCounts() (cleanups, cancels int) {
	return int(C.ctest_threads_count(0)), int(C.ctest_threads_count(1))
}

// StackEndsRoot makes a root with newInstance through host whose C step
// runs a parallel step with a C error handler: one branch waits with a
// cancel handler, the other takes three pieces of stack memory, the
// middle one's cleanup canceling (free false) or freeing the root, and
// then succeeds or (fail) fails. Every C function and handler takes stack
// memory (see ThreadsCounts). StackEndsRootFree frees the root if it is
// valid.
func StackEndsRoot(host unsafe.Pointer, free, fail bool) {
	C.ctest_stack_ends_root(bsi(host), cbool(free), cbool(fail))
}
func StackEndsRootFree() { C.ctest_stack_ends_root_free() }

// Modes of AddNest: the C step that is lent a custom object passes it to
// success from C code stepvm runs during its call: the cancel handler of
// the step AddNestWait added to the root other, which it cancels; the
// allocate function of a state variable it makes; the cleanup of stack
// memory it takes, which runs as its success ends its frame.
const (
	NestCancel = iota
	NestAlloc
	NestStack
)

// AddNest adds to p a C step that succeeds with a custom object, whose
// cleanups NestCleanups counts, and a C step, lent the object, that has
// it passed to success through target (a waiting step's record, or NULL)
// as mode says.
func AddNest(p unsafe.Pointer, mode int, other, target unsafe.Pointer) {
	C.ctest_add_nest(bsi(p), C.int(mode), bsi(other), bsi(target))
}

// AddNestWait adds to p a C step that waits with a cancel handler for
// AddNest's NestCancel.
func AddNestWait(p unsafe.Pointer) { C.ctest_add_nest_wait(bsi(p)) }

func NestCleanups() int { return int(C.ctest_nest_cleanups()) }

// Modes of the C sections FsAdd adds: the section prints "<name> got" and
// its values, then succeeds with them, fails with "Boom", breaks or
// continues the innermost loop, waits with a 10 ms timeout or with a
// cancel handler that prints "<name> canceled" (the record kept for
// FsCompleteKept), runs a parallel step of two branches, calls the
// FutoInSync's own lock or unlock, or syncs again on it.
const (
	FsSuccess = iota
	FsError
	FsBreak
	FsContinue
	FsTimeout
	FsWait
	FsParallel
	FsLock
	FsUnlock
	FsNested
)

// Error handlers of FsAdd's sections: none, one that prints "<name>
// handler <code>", and that recovers with "recovered", or syncs again.
const (
	FsNoHandler = iota
	FsHandlerSay
	FsHandlerRecover
	FsHandlerSync
)

// FsAdd adds to p a C section of sync, through addSync.
func FsAdd(p, sync unsafe.Pointer, mode, eh int, name string) {
	C.ctest_fs_add(bsi(p), (*C.FutoInSync)(sync), C.int(mode), C.int(eh), cstr(name))
}

// FsAddCall adds to p a C step that calls sync's own lock (unlock: its
// unlock) through its record (what 0), NULL (1), or the record FsAdd's
// section kept (2), and prints "<name> returned".
func FsAddCall(p, sync unsafe.Pointer, unlock bool, what int, name string) {
	C.ctest_fs_add_call(bsi(p), (*C.FutoInSync)(sync), cbool(unlock), C.int(what), cstr(name))
}

// FsCompleteKept calls success through the record a section kept.
func FsCompleteKept() { C.ctest_fs_complete_kept() }

// FsCancels returns how many times a section's cancel handler ran.
func FsCancels() int { return int(C.ctest_fs_cancels()) }

// FsReset forgets the kept record and the count.
func FsReset() { C.ctest_fs_reset() }

// cstr returns s in C memory kept for the life of the test binary.
func cstr(s string) *C.char { return C.CString(s) }

// FsHalfSync returns a FutoInSync implemented in C whose unlock is NULL.
func FsHalfSync() unsafe.Pointer { return unsafe.Pointer(C.ctest_fs_half_sync()) }

// FsCall calls sync's lock (unlock: its unlock) with p.
func FsCall(p, sync unsafe.Pointer, unlock bool) {
	C.ctest_fs_call(bsi(p), (*C.FutoInSync)(sync), cbool(unlock))
}

// FsAddStep adds to p a C step that adds, from its own function, a
// section of sync that succeeds (FsAdd's, named name).
func FsAddStep(p, sync unsafe.Pointer, name string) {
	C.ctest_fs_add_step(bsi(p), (*C.FutoInSync)(sync), cstr(name))
}

// fuzzProg is the C copy of the program a fuzz run reads: the C side reads
// it across calls, which Go memory must not be kept for.
var fuzzProg unsafe.Pointer

// FuzzBegin starts a run of the fuzz interpreter on prog, with sync (nil:
// none) for the sections it takes.
func FuzzBegin(prog []byte, sync unsafe.Pointer) {
	FuzzFinish()
	fuzzProg = C.CBytes(prog)
	C.ctest_fuzz_begin((*C.uint8_t)(fuzzProg), C.size_t(len(prog)), (*C.FutoInSync)(sync))
}

// FuzzStart adds the program's first step, with an error handler, to p.
func FuzzStart(p unsafe.Pointer) { C.ctest_fuzz_start(bsi(p)) }

// FuzzAway makes the calls of the program that come from a thread other
// than the loop's: call it on another goroutine, between the loop's passes.
func FuzzAway() { C.ctest_fuzz_away() }

// FuzzLive reports whether the program goes on; spend takes the Go
// callback that asks from the run's budget.
func FuzzLive(spend bool) bool { return C.ctest_fuzz_live(cbool(spend)) != 0 }

// FuzzNext returns the program's next byte, 0 past its end.
func FuzzNext() int { return int(C.ctest_fuzz_next()) }

// FuzzKeep hands p, a Go step's record, to the program's kept handles if
// the program says so.
func FuzzKeep(p unsafe.Pointer) { C.ctest_fuzz_keep(bsi(p)) }

// FuzzFinish frees the roots the program made and left, and the program.
func FuzzFinish() {
	C.ctest_fuzz_finish()
	if fuzzProg != nil {
		C.free(fuzzProg)
		fuzzProg = nil
	}
}

// FuzzPending returns how many of the run's custom objects stepvm holds.
func FuzzPending() int { return int(C.ctest_fuzz_pending()) }

// FuzzProblem describes the first broken guarantee of the run that the C
// side saw (cleanups missing or run twice, Stack memory overwritten), to
// be asked once every cleanup must have run; "" when there is none.
func FuzzProblem() string { return C.GoString(C.ctest_fuzz_problem()) }
