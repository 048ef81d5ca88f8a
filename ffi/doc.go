// Package ffi maps the FTN12 2.7 universal binary interface onto stepvm:
// C code (and any language that can call C) runs steps inside a flow, and
// Go steps and C steps mix freely in one flow.
//
// The C side is the header include/futoin/binaryapi.h, the layouts of FTN12
// 2.7.1-2.7.3 in ISO C11. Binary hands C a FutoInAsyncSteps* for a root, a
// running step or a parallel accessor; every such pointer shares one static
// function table.
//
// # Memory
//
// A FutoInAsyncSteps record lives in off-heap arena memory set aside for
// such records, never on the Go heap, so that passing it to C obeys the cgo
// pointer rules. It holds no Go pointer: an index into a Go-side table and
// a generation. A record is valid for the life of what it names: a step's
// record until the step's frame ends, a root's until the root is released
// (or freed from C) or collected, an accessor's until the step that
// created it ends (one made while no C step runs: as long as its root).
// Records are recycled in FIFO order and only ever as records, so a call
// through a record that has expired reaches stepvm, which sees the stale
// generation and reports the misuse instead of crashing. A record is reused
// only after 512 other records its loop released, so an expired record
// cannot name another step unless C keeps it across that many.
//
// What package ffi keeps for a root (its records, its C state variables,
// the accessors bound to it) hangs off the root, and the records name the
// root weakly: a root the program drops without Release is collected as it
// would be without C code, on a loop that lives on as well. Its records
// turn stale at once, and its loop gives them back, with the C cleanups of
// its state variables, each run exactly once and for that loop, in a
// callback posted from the garbage collector's cleanup goroutine, the next
// time the loop runs (a closed loop runs none: the cleanups then run on
// that goroutine, for no loop, and the records wait for the loop to be
// collected). A record C keeps of a collected root is a stale one: calls
// through it are misuse. A C state variable belongs to the root that
// allocated it: a root that Clone or CopyFrom gave the original's State
// allocates its own on first use. What a step's frame holds is held until the frame
// ends, so a flow the program drops while one of its C steps waits is kept
// until that step ends: C may still complete it through the step's record,
// which the garbage collector cannot see, as a Go vm.Resumer keeps its flow. A root that C made with newInstance belongs to C
// until C frees it, as memory from malloc does: ffi keeps it for C while
// its loop lives, and a root C never frees is C's leak.
//
// What package ffi keeps for a loop that runs C code (the records of its
// steps and roots, the C state variables of its roots, the C callbacks it
// scheduled) hangs off the loop, and nothing global holds it: a loop the
// program drops, closed or not, flows waiting or not, is collected as it
// would be without C code, and that state with it. Its records turn stale,
// like those of ended steps, and go to other loops only once 512 other
// records of collected loops have come back. The C state variables of its
// roots never released, and not collected before it, are destroyed, and the
// custom objects its flows held cleaned up, on a goroutine of the garbage
// collector and for no loop: calls they make into stepvm are ignored. The C
// callbacks it scheduled never run, as on any loop that is not run again. C
// code names the loop it runs for by an id, a serial number given again
// only after 2^32 more loops, so a call or a FutoInHandle that reports a
// collected loop finds nothing.
//
// # Calls from C
//
// C has no exceptions. handle_error, breakLoop and continueLoop called from
// a C step take effect when the C function returns, and so does any misuse
// of the interface (a NULL or stale FutoInAsyncSteps, success after add, an
// unknown value type, ...), which fails the step with InternalError and a
// descriptive ErrorInfo exactly as the same misuse from Go would. Until the
// C function returns, further calls it makes are ignored, but for free and
// sched_cancel, which let go of a root or a callback and are carried out
// (ignored, they would leave the root to no one and run the callback on
// what the program freed after canceling it). success, add and
// the other calls take effect at once, as they do from Go. C code that a Go
// step calls directly (not as a step of its own) has no ffi call to carry
// handle_error, breakLoop or continueLoop through the step's record back
// to the VM: the step then fails with InternalError when it returns.
//
// A step that waits for an external event (through its record: C's
// waitExternal, setTimeout, setCancel; or, a Go step that hands C its
// record, through its vm.AsyncSteps) may be completed from any thread, as
// a Go step through its vm.Resumer: success and handle_error called from
// a thread that does not run the step's loop hand the outcome to the loop,
// which may meanwhile have ended the step (canceled, timed out) and
// reused its record: the call then finds the record stale, as any call
// through an expired one. (The record takes the step's Resumer when C
// makes it wait; for a Go step that waits through its handle, the loop
// takes it when the outcome arrives, and a step that does not wait then
// fails with InternalError, as the misuse of its Resumer, as does the flow
// of a record that names no step, a root's or an accessor's.)
// isValid and is_same_thread answer on any thread too. The other calls
// belong to the loop's thread, as vm.AsyncSteps methods belong to its
// goroutine: one that a C step of another loop makes elsewhere fails that
// step with InternalError and leaves the record's loop alone. A
// FutoInHandle names its loop: sched_cancel and sched_is_valid reach the
// task of any loop the calling thread runs, through a record of any, and
// sched_cancel through a bad record still cancels a task of the loop whose
// C step calls it.
//
// # Values
//
// A C step receives the values of the previous step as a FutoInArgs valid
// for the duration of the call, also once success has ended the step (so
// is the code a C error handler receives): Go integers as INT64 or UINT64,
// floats as DOUBLE, bools as BOOL, strings as UTF-8 STRING and byte slices
// as UINT8 arrays (copied, NUL-terminated), custom objects that
// came from C as they were, and other Go values as opaque custom objects
// that C can only pass on. Values a C step passes to success become Go
// Values: integers as Int or Uint, floats as Float, strings of any width as
// UTF-8 Str (a length of 0 means NUL-terminated; a NUL before the length is
// an error), UINT8 arrays as Bytes and other arrays as Any of a Go slice,
// all copied, their cleanup run at once (a BOOL, alone or in an array, is
// true when its byte is not 0); custom objects become Any(*Object), owned
// by the loop of the step they complete, whose cleanup runs exactly once.
// success takes the values: it empties the
// caller's FutoInArgs, also when it is refused (a NULL or stale record, as
// of a completion that comes after the step timed out; a call ignored
// after handle_error) or fails on a value it cannot read, and then runs
// their cleanups at once. (One from another thread that the loop accepts
// and then drops, as when the step times out before the loop takes the
// completion, has the custom objects it made cleaned up as the loop drops
// it.) Values lent to the calling C step that it passes back stay as they
// are, a string with NULs in it too: they are stepvm's. So does a custom
// object lent to a C step whose call runs on, passed on by C code that
// stepvm runs during that call (a cancel handler, the cleanup of stack
// memory): it is valid until that call returns.
//
// # Synchronization
//
// addSync accepts a FutoInSync implemented in C (lock and unlock are called
// from steps of the flow, as in the reference implementation) and the Go
// primitives Sync hands out; WrapSync gives Go flows either kind. unlock
// follows every lock that entered or queued the flow, not one that refused
// it (handle_error as lock runs). The two calls get FutoInAsyncSteps of
// different steps: a C primitive must match them by rootId, not by the
// pointer. rootId names the flow, each parallel branch apart (FTN12
// 1.11.4), as in the reference implementation.
//
// # Foreign AsyncSteps
//
// Wrap also adopts a FutoInAsyncSteps implemented by foreign code (FTN12
// 2.2.1 wrap): Go code uses it through the vm.AsyncSteps API, and every call
// is forwarded to the foreign function table. The Go step functions, error
// handlers, loop bodies and cancel handlers added this way are run by the
// foreign engine through C functions of this package, which hand each a new
// handle on the FutoInAsyncSteps the engine passes. Error, Break and
// Continue in such a function unwind it, as in stepvm, and are passed on as
// handle_error, breakLoop and continueLoop once it has returned; misuse
// becomes handle_error(InternalError, info), a panic
// handle_error(InternalError, its text), a panic(*vm.Error) that error. No
// panic crosses C frames. A call through a handle whose function is not
// running (a step that waits for an external event, a root, a handle that
// Wrap made inside a C step) goes to the engine at once; Error, Break and
// Continue then return, as handle_error does in C.
//
// What works, each through its table entry (a NULL entry is misuse): Add,
// Parallel, SuccessStep, Loop, MakeLoop, Repeat, ForEach, ForEachMap, Break,
// Continue, Success, Error, SetTimeout, SetCancel, WaitExternal (from a
// step's function: from an error handler they are misuse, as on stepvm,
// whatever the engine would do), Stack, StackRaw, State, Valid, Execute,
// Cancel, NewInstance, Release of a root NewInstance made (free), Sync
// with a FutoInSync (WrapSync; addSync) or with an ISync built on the
// public API, and Binary, which gives the pointer back. Wrap needs add,
// success, handle_error and isValid.
//
// What does not: Tool returns nil, as the flow runs on the engine's event
// loop, not on a vm.Loop. Resumer, Promise, Await (it needs a Resumer),
// Clone and CopyFrom are misuse, and so is Sync with a vm.Mutex, Throttle
// or Limiter, which admit stepvm flows only. Release of a root Go did not
// make through NewInstance is misuse: its owner frees it. State is Go-side
// state: one vm.State per flow, kept in a state variable of the engine and
// separate from the variables C code reaches through stateVariable; its
// ErrorInfo, LastException and AsyncStack stay empty (the engine keeps its
// own error info). Valid is the engine's isValid: a handle must be used as
// the engine allows its pointer to be used, on the engine's thread, and
// while the engine keeps the memory it points to (one that keeps stale
// FutoInAsyncSteps readable, as stepvm does, turns late calls into its own
// misuse).
//
// Values reach Go steps as Args, converted as those of stepvm's own C steps
// are, except custom objects: a Go value Go handed the engine comes back
// as it was; any other is lent as an *Object that is valid during the call,
// whose Release does nothing and which cannot be passed on. Go Success
// values go out as for C steps of stepvm, but strings and byte slices in
// malloc'd memory that their type's cleanup frees, Go values as custom
// objects whose cleanup lets them go, and an *Object from a stepvm C step
// with its cleanup (Go lets go of it). The engine is expected to take
// success values by emptying the FutoInArgs, as stepvm does (values left
// there are reset), and to copy the strings it keeps past a call (error
// codes, break labels); loop labels stay valid as long as the loop.
//
// The Go objects a foreign engine refers to cross as ids into a Go-side
// table. The functions of the steps a Go step adds are dropped when that
// step ends (through memory from the engine's stack, whose cleanup drops
// them), those added through a root when the engine destroys the flow's
// state, a Go value by its cleanup. An engine without stack and
// stateVariable makes them live as long as the process.
package ffi
