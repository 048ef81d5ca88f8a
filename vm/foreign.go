package vm

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/stackalloc"
)

// Flows run by another implementation of FTN12 AsyncSteps. Package ffi
// adopts a foreign FutoInAsyncSteps* (FTN12 2.2.1 wrap) through Foreign and
// WrapForeign: Go code then uses the foreign flow through the ordinary
// AsyncSteps API, and every call is forwarded to the foreign engine.
//
// A foreign handle is an AsyncSteps whose root is a stand-in marked
// foreign: it owns no arena, node or loop, and its epochs never match the
// handle's, so it fails every check the VM makes of a handle. Each public
// method forwards to the Foreign: at its top, or, on the VM's hot paths
// (Add, Success, Error, SetTimeout, SetCancel, WaitExternal, Execute,
// Cancel, Release), in the branch where that check fails, so that those
// paths run no instruction more than before. An internal path not taught
// about foreign flows sees a handle that has expired.

// Foreign is one handle of a flow run by another AsyncSteps implementation:
// a root, a step whose function or handler runs, or a parallel accessor. It
// exists for foreign-function bindings, which implement it on top of the
// foreign engine's operations; WrapForeign makes it an AsyncSteps.
//
// The methods are those of AsyncSteps with optional arguments made
// explicit (a nil ErrorFunc, an empty label). The VM checks nothing before
// forwarding: the implementation validates, forwards to the foreign
// engine, or reports misuse. They run on the goroutine that called the
// AsyncSteps method, and may call back into Go code (step functions) when
// the foreign engine does so synchronously.
type Foreign interface {
	// Valid is the FTN12 boolean cast: the foreign engine's own answer.
	Valid() bool
	// State returns Go-side state for the flow, nil for an invalid handle:
	// the foreign engine's state is not a map of Go values (in the binary
	// interface it is stateVariable, raw memory reached by name).
	State() *State

	Add(fn ExecFunc, onError ErrorFunc)
	Parallel(onError ErrorFunc) AsyncSteps
	SuccessStep(vals []Value)
	Sync(obj ISync, fn ExecFunc, onError ErrorFunc)
	Loop(fn func(as AsyncSteps), label string)
	Repeat(count int, fn func(as AsyncSteps, i int), label string)
	NewInstance() AsyncSteps

	Success(vals []Value)
	// Error fails the step with code and info. It returns true when the
	// caller is the step's function or error handler, running now, which
	// the VM then unwinds with its own sentinel as Error does in the VM's
	// flows (it never returns): the binding recovers the sentinel where the
	// foreign engine called Go (see IsUnwinding) and completes the error
	// there. It returns false when the error was delivered at once, as to a
	// step waiting for an external event, and Error returns.
	Error(code, info string) (unwind bool)
	SetTimeout(d time.Duration)
	SetCancel(fn CancelFunc)
	WaitExternal()
	// Stack is StackRaw: size bytes that live as long as the step, destroy
	// (if not nil) called with them when it ends.
	Stack(size int, destroy func(unsafe.Pointer)) unsafe.Pointer
	// Break and Continue are Error's counterparts for loops.
	Break(label string) (unwind bool)
	Continue(label string) (unwind bool)

	Execute()
	Cancel()
	Release()

	// Misuse reports a call the foreign flow cannot serve (CopyFrom, Clone,
	// Promise, Resumer, the VM's own synchronization primitives, ...) as the
	// VM reports misuse: from the step's own function or handler it raises
	// InternalError in the foreign flow (by panicking with an *Error, which
	// the binding recovers); elsewhere it does nothing.
	Misuse(info string)
}

// WrapForeign exists for foreign-function bindings: it returns a handle
// whose every method forwards to f. Each call allocates a stand-in root, so
// two handles wrapping the same foreign object are not ==. Tool returns nil
// for such a handle (a foreign flow runs on its engine's event loop, not on
// a Loop), Resumer, Promise, Clone and CopyFrom are misuse, and Stack
// returns memory from f.Stack when T holds no Go pointers (and is aligned
// for T), a T on the Go heap kept alive until the step ends otherwise.
func WrapForeign(f Foreign) AsyncSteps {
	if f == nil {
		return AsyncSteps{}
	}
	// epoch 0 against 1: expired for every path that does not dispatch.
	return AsyncSteps{r: &root{state: &State{foreign: f}, runEpoch: 1, rootEpoch: 1}}
}

// ForeignOf exists for foreign-function bindings: it returns the Foreign
// behind a handle WrapForeign made, and nil for any other handle.
func ForeignOf(as AsyncSteps) Foreign { return as.foreign() }

// RaisedError returns the error a panic with e raises in a step: e, or,
// for a *Error without a code (or nil), InternalError with e's info, as
// Error("") does. A flow must not end with no code, which reads as
// success, nor LastException hold a nil *Error. Foreign-function bindings
// raise what their functions panic with the same way.
func RaisedError(e *Error) *Error {
	switch {
	case e == nil:
		return &Error{Code: InternalError, Info: "panic with a nil *Error"}
	case e.Code == "":
		return &Error{Code: InternalError, Info: e.Info}
	}
	return e
}

// IsUnwinding reports whether p, recovered in a step function or in a Go
// function that a foreign engine called, is a panic the VM acts on: the
// sentinel with which Error, Break or Continue unwind that function (see
// Foreign.Error), or an *Error, with which the VM reports misuse (and which
// a function may panic with to raise its code). A function that recovers
// panics of its own must re-panic with it.
func IsUnwinding(p any) bool {
	switch p.(type) {
	case *unwinding, *Error:
		return true
	}
	return false
}

// ForeignArgs exists for foreign-function bindings: it returns Args holding
// vals (at most MaxArgs of them), for a step function a foreign engine
// calls.
func ForeignArgs(vals []Value) Args {
	var a Args
	a.b.set(vals)
	return a
}

// foreign returns the Foreign behind a foreign handle, nil for any other.
func (as AsyncSteps) foreign() Foreign {
	if as.r != nil && as.r.state != nil {
		return as.r.state.foreign
	}
	return nil
}

func firstErrorFunc(fns []ErrorFunc) ErrorFunc {
	if len(fns) > 0 {
		return fns[0]
	}
	return nil
}

func firstString(s []string) string {
	if len(s) > 0 {
		return s[0]
	}
	return ""
}

// foreignSuccess and foreignSuccessStep copy vals: passed to an interface
// method as they are, the variadic slices of every Success call in the
// program would escape to the heap.
func foreignSuccess(f Foreign, vals []Value) {
	if len(vals) > MaxArgs {
		f.Misuse("Success with more than 4 values")
		return
	}
	var b [MaxArgs]Value
	f.Success(b[:copy(b[:], vals)])
}

func foreignSuccessStep(f Foreign, vals []Value) {
	if len(vals) > MaxArgs {
		f.Misuse("SuccessStep with more than 4 values")
		return
	}
	f.SuccessStep(append([]Value(nil), vals...))
}

// foreignAdd is Add for a foreign flow. The foreign engine keeps no
// words of AddNative: its step would run without them (a binding's
// trampoline would call a null function), which is misuse.
func foreignAdd(f Foreign, fn ExecFunc, eh ErrorFunc, words bool) {
	if words {
		f.Misuse("AddNative with words on a foreign flow, which cannot keep them")
		return
	}
	f.Add(fn, eh)
}

// foreignTarget serves the methods that reach target with a foreign
// handle: Add, whose dispatch follows target to stay off the VM's path, and
// the VM's own synchronization primitives (Mutex.Sync and the like).
func foreignTarget(f Foreign, what string) {
	if what != "Add" {
		f.Misuse(what + " is not supported on a foreign flow")
	}
}

// foreignRunning serves the methods that reach running with a foreign
// handle (Resumer, Stack), which a foreign flow does not support.
func foreignRunning(f Foreign, what string) {
	f.Misuse(what + " is not supported on a foreign flow")
}

// foreignError is Error for a foreign handle; it reports whether as is
// one. It is a call, not inline code, to keep Error small: the runtime's
// unwinding of a panic reads Error's tables up to the panic site.
func (as AsyncSteps) foreignError(code string, info []string) bool {
	f := as.foreign()
	if f == nil {
		return false
	}
	if code == "" {
		code = InternalError
	}
	if f.Error(code, firstString(info)) {
		panic(unwindError)
	}
	return true
}

func foreignLoopCtl(f Foreign, u *unwinding, label []string) {
	var unwind bool
	if u == unwindBreak {
		unwind = f.Break(firstString(label))
	} else {
		unwind = f.Continue(firstString(label))
	}
	if unwind {
		panic(u)
	}
}

func foreignPromise(f Foreign) *Future {
	f.Misuse("Promise on a foreign flow: execute it and learn its end from its own steps")
	fu := &Future{done: make(chan struct{}), err: &Error{Code: InternalError, Info: "Promise on a foreign flow"}}
	close(fu.done)
	return fu
}

// foreignStack is Stack for a foreign flow. Foreign memory is invisible to
// the collector, so a T holding Go pointers lives on the Go heap, kept
// reachable by the destroy function until the step ends; so does a T the
// foreign memory is not aligned for.
//
// Every request is for a byte at least: an engine built on C's malloc may
// serve 0 bytes with NULL, its answer to a failed allocation. A T of no
// size asks the engine all the same, which judges the handle (a step that
// has ended gets nil, and its misuse report).
func foreignStack[T any](f Foreign) *T {
	var zero T
	if !stackalloc.HasPointers[T]() {
		p := f.Stack(max(int(unsafe.Sizeof(zero)), 1), nil)
		if p == nil {
			return nil
		}
		if uintptr(p)%unsafe.Alignof(zero) == 0 {
			t := (*T)(p)
			*t = zero
			return t
		}
	}
	t := new(T)
	if f.Stack(1, func(unsafe.Pointer) { runtime.KeepAlive(t) }) == nil {
		return nil
	}
	return t
}
