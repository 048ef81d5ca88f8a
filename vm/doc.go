// Package vm runs FutoIn AsyncSteps flows (FTN12 v1.14) as a step VM: steps
// are encoded as fixed-size instruction records (package opcodes) in
// per-root off-heap arenas (package arena) and executed by one dispatch
// loop, driven by an event loop with a hierarchical timer wheel. Other
// goroutines hand work in through a lock-free ring (package ringbuf). The
// hot paths allocate nothing on the Go heap.
//
// # Flows
//
// A flow is a root (NewSteps, Spawn) and the steps added to it. Add queues
// a step; inside a running step, Add queues a sub-step, which runs after the
// step's function returns, before the step's next sibling (FTN12 1.1). A
// step completes by Success (passing up to four Values to the next step as
// Args), by Error, or implicitly when its function returns without adding
// sub-steps, setting a timeout or cancel handler, or calling WaitExternal
// (FTN12 1.6). A step with sub-steps completes when the last of them does,
// with that sub-step's values. Args are a copy of the values: a sub-step,
// a loop body or an Await function may capture its step's Args and read
// them later, as FTN12 code written for closures does.
//
// # Scheduling
//
// The rules below make every trace deterministic under a ManualClock:
//
//   - Each step's function, and each loop iteration's body, runs in its own
//     turn of the loop. Turns are FIFO: Execute, a completion, or a branch
//     start queues the flow's next step behind the work already queued.
//     (A flow whose step is ready while the run queue is otherwise empty
//     keeps running without going through the queue, for up to 256 steps
//     and loop iterations in all; nothing can tell the difference except
//     timers due in the same pass, such as a zero timeout. This budget is
//     an implementation detail.)
//   - Execute does not run anything: the first step runs in a later turn.
//   - Completion is synchronous: Success pops the step, and every enclosing
//     step whose queue is drained completes with it, in the same call. The
//     one exception: when that reaches the bottom of the root (or of a
//     branch) from inside that thread's own step or error handler (which
//     a timeout or a Resumer may run outside the thread's turn), the
//     thread ends in its next turn, so that misuse later in the same call
//     is still caught.
//   - A parallel step starts its branches in the order added, each queuing
//     its first step; branches then interleave turn by turn.
//   - Error handlers and cancel handlers run synchronously, inside the turn
//     (or external call) that raised the error or canceled the flow.
//   - Timers fire after the immediate work of a pass, in deadline order
//     (rounded up to the 1 ms tick), ties in the order they were armed. A
//     timer set outside a pass is armed at once, counting from then; one
//     set in a pass is armed with the pass's reading of the clock, after
//     the pass's immediate work; and one that a timer callback sets, in
//     the next pass, so a chain of zero delays takes one pass per link
//     (and a timer set between those two passes, due as early, fires
//     before it).
//   - A pass first runs the callbacks posted since the last one, in the
//     order posted, then the work queued when it began (what they queued
//     included). A Post made by a posted callback runs in the same pass
//     or the next, still in order, and the pass reports more work either
//     way (Iterate, RunUntilIdle).
//
// # Errors
//
// Error unwinds from the innermost running step of its thread (for a
// timeout, too: its sub-steps' handlers see Timeout first). For each frame
// on the way, innermost first: its timeout is stopped, its cancel handler
// runs, then its error handler, if it has one that has not run yet. The
// handler may Success (the flow continues after that step, with the
// values), Error (the code changes and unwinding goes on), add steps (they
// run as that step's sub-steps; the handler is retired so it is not called
// again for their errors; FTN12 1.2.1) or return (unwinding goes on). An
// error that leaves a parallel branch cancels the other branches and
// continues in the parallel step's thread. One that leaves the root ends
// the flow; its Future reports it.
//
// A panic in a step function or error handler becomes an error of its
// flow: InternalError with the panic value as LastException and its text
// as ErrorInfo, except panic(*Error), which raises that error's code and
// info (InternalError if it has no code or is nil, as Error("") does). A
// panic in a cancel handler or a Stack destroy callback is only recorded
// as LastException: the flow is already ending. So is the panic of a step
// function or error handler whose thread ended during its call (a branch
// that failed a sibling through its handle, aborting the parallel step),
// unless the root has been released since. Such a callback
// runs while the VM holds frames of its flow: calls through the handle of
// the step being torn down do nothing, Error through another step's handle
// of the same flow is misuse (recorded as LastException only, like any
// misuse there: ErrorInfo stays that of the error being raised), and a
// Cancel or Release of its own root from a destroy callback takes effect
// in the loop's next turn.
//
// runtime.Goexit out of such code (t.FailNow in a step, say) ends the
// goroutine that drives the loop, which nothing can prevent; the loop's
// next pass, on any goroutine, recovers: the flow whose step function,
// loop body or error handler did not return fails as if it had panicked,
// and one whose cancel handler or destroy callback did not return has its
// other frames canceled and ends with InternalError; one out of an
// Immediate, Deferred or Post callback goes to the panic handler. The
// other flows go on.
// (Under GODEBUG=panicnil=1, where a protected call cannot tell a Goexit
// from a panic(nil), a Goexit is not handled.)
//
// API misuse (Success or Error from a step after
// it added sub-steps, Success twice, a function that recovers the panic
// with which Error, Break or Continue unwind it and goes on, calls
// through the handle of a step that has ended, SetTimeout, SetCancel,
// WaitExternal or Resumer from an error handler (Success, Error, Add and
// Stack serve there), Execute on a running root, Add on a running root
// from outside, running the loop from inside one of
// its own steps) raises InternalError with a descriptive ErrorInfo
// in the flow that made the call (FTN12 2.1). Inside a step function,
// error handler or loop body the report is a panic; a function that
// recovers it and goes on fails its flow with it all the same, and the
// flow the handle names is not touched. Made from outside the loop's
// calls (the driving goroutine, an Immediate, Deferred or Post callback),
// misuse fails the flow the handle names, in the thread of the step whose
// handle was used, so that the step's own error handlers see it (through
// a root's handle, or a parallel accessor whose step has not started: in
// the root's main thread). Misuse in setting up a root that does not run
// (Add(nil) on it, Success through its handle) has no flow to fail yet:
// the root's next run fails, before any of its steps, with the first such
// report made on it, and so does a run of steps copied from it (Clone,
// CopyFrom): the report is queued as a step, behind any report made on the
// copy itself. From a cancel handler or a destroy callback, misuse is only
// recorded as the named flow's LastException.
//
// # Loops
//
// Loop, Repeat, ForEach and ForEachMap add one step that runs the body as
// an iteration frame, one iteration per turn. Break and Continue are not
// errors: they unwind to the innermost loop (or the labelled one) running
// the cancel handlers of the steps they leave but not their error
// handlers. Leaving a parallel branch this way cancels its siblings.
//
// # Synchronization
//
// Sync adds a step that runs its function inside a critical section of an
// ISync (FTN12 1.11). Mutex, Throttle and Limiter implement it natively: the
// step is an OpSync instruction whose section is its only sub-step, so an
// uncontended entry allocates nothing. A flow (the main thread of a root, or
// one parallel branch) that cannot enter waits in the primitive's FIFO queue
// with its incoming values; the section is left however the step ends, and a
// flow canceled while queued leaves the queue. A full queue rejects the
// entry with DefenseRejected through the flow's enclosing error handlers.
//
// # Threads and memory
//
// A Loop belongs to one goroutine. Other goroutines hand it work through
// Post and complete its steps through Resumers, which wake a sleeping Run
// (and a foreign loop that drives Iterate, through WithWakeup's function);
// they may also Close it, ask IsSameThread, wait for a Future, move a
// ManualClock and make Mutexes, Throttles and Limiters. The rest of the Loop's methods, and every
// AsyncSteps method, belong to its goroutine. Run, RunUntilIdle and
// Iterate do not nest: called from a step, handler or callback of the
// same loop, they panic
// with an InternalError *Error (which fails that step's flow), and so does
// Future.Wait of a flow not yet complete inside the callbacks of the Run
// that drives its loop (a step hands such a wait to Await). Roots come
// from a per-loop pool; Release returns them, and a dropped root is
// reclaimed by the garbage collector together with its arena. One dropped
// while its flow waits for what nothing can deliver any more (no handle or
// timer left to complete it) is reclaimed too, without running its cancel
// handlers or destroy callbacks, which went with it: its Future reports
// InternalError, and a place it held in a Mutex goes to the next flow
// queued. A step that handed out a Resumer is not such a wait: a Resumer
// is a plain value whose loss the loop cannot see, so the loop keeps the
// root until the step ends (give the step a timeout, or Cancel the root,
// when its Resumer may be lost).
//
// What a program may keep, and for how long: handles (AsyncSteps values),
// Resumers and Handles as long as it likes, since they carry generations
// and a stale one is refused without reading memory another flow may own;
// Args and a Future's result as long as it likes, since they are copies;
// a *State only until its root's Release, after which the pool hands the
// same State to the next root; Stack memory only until its step ends.
package vm
