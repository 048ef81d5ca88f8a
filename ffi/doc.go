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
// (or freed from C), an accessor's until the step that created it ends.
// Records are recycled in FIFO order and only ever as records, so a call
// through a record that has expired reaches stepvm, which sees the stale
// generation and reports the misuse instead of crashing. A record is reused
// only after 512 other records its loop released, so an expired record
// cannot name another step unless C keeps it across that many.
//
// # Calls from C
//
// C has no exceptions. handle_error, breakLoop and continueLoop called from
// a C step take effect when the C function returns, and so does any misuse
// of the interface (a NULL or stale FutoInAsyncSteps, success after add, an
// unknown value type, ...), which fails the step with InternalError and a
// descriptive ErrorInfo exactly as the same misuse from Go would. Until the
// C function returns, further calls it makes are ignored. success, add and
// the other calls take effect at once, as they do from Go.
//
// # Values
//
// A C step receives the values of the previous step as a FutoInArgs valid
// for the duration of the call: Go integers as INT64 or UINT64, floats as
// DOUBLE, bools as BOOL, strings as UTF-8 STRING and byte slices as
// UINT8 arrays (copied to the frame's arena memory, NUL-terminated), custom objects that
// came from C as they were, and other Go values as opaque custom objects
// that C can only pass on. Values a C step passes to success become Go
// Values: integers as Int or Uint, floats as Float, strings of any width as
// UTF-8 Str (a length of 0 means NUL-terminated; a NUL before the length is
// an error), UINT8 arrays as Bytes and other arrays as Any of a Go slice,
// all copied, their cleanup run at once; custom objects become Any(*Object),
// whose cleanup runs exactly once. success takes the values: it empties the
// caller's FutoInArgs.
//
// # Synchronization
//
// addSync accepts a FutoInSync implemented in C (lock and unlock are called
// from steps of the flow, as in the reference implementation) and the Go
// primitives Sync hands out; WrapSync gives Go flows either kind.
//
// # Limits
//
// Wrap cannot adopt a FutoInAsyncSteps implemented by foreign code yet.
package ffi
