// Package prog is the step-program language: a small text format that
// describes AsyncSteps flows, its parser and printer, and the generator
// that maps fuzzer input to programs. Package fuzz runs programs on the VM,
// package fuzz/model on the reference model; both produce a Trace, and the
// two must agree.
//
// # Programs
//
// A program declares mutexes, models and roots. Statements end at the end
// of their line (or at a semicolon); blocks are braces; # starts a comment.
//
//	program   = { mutex | model | root } .
//	mutex     = "mutex" NAME INT INT .              # max inside, max queued (-1: unbounded)
//	          | "throttle" NAME INT DURATION INT .  # max entries a period, period, max queued
//	          | "limiter" NAME INT INT INT DURATION INT .  # Concurrent, MaxQueue, Rate, Period, Burst
//	model     = "model" NAME block .                # steps copied by copy, never run
//	root      = "root" NAME [ "cancel" DURATION ] block .
//	block     = "{" { stmt } "}" .
//
// Adders add steps (FTN12 2.2), at level 0 in a root or model, as
// sub-steps in a step, as branches in a parallel step:
//
//	step [NAME] block [ "catch" block ]          # Add(fn, onError)
//	parallel [NAME] { adder } [ "catch" block ]  # Parallel(onError); each adder is a branch
//	loop [LABEL] block                           # Loop
//	repeat INT [LABEL] block                     # Repeat; binds {i}
//	forEach [ v, ... ] [LABEL] block             # ForEach; binds {key} (the index) and {val}
//	forEach [ "k": v, ... ] [LABEL] block        # ForEachMap, in sorted key order ([:] is empty)
//	successStep { VALUE }                        # SuccessStep
//	sync MUTEX [NAME] block [ "catch" block ]    # Sync(mutex, fn, onError)
//	copy MODEL                                   # CopyFrom(model)
//
// A step body runs, in order: adders, and
//
//	print STRING        append the expanded string to the trace
//	set NAME STRING     set a state variable (also allowed at level 0)
//	timeout DURATION    SetTimeout
//	onCancel { { print | set } [ cancel ROOT ] }   SetCancel
//	stack INT           StackRaw(INT) with a destructor that traces "free"
//	stack array INT     vm.Stack of an INT-byte array: no Go pointers, arena memory
//	stack pointers INT  vm.Stack of an INT-byte array beside Go pointers: Go heap
//
// where the INT of a typed allocation is one of 1, 8, 24, 64, 100 and 4096
// (StackSizes). The memory lives as long as the step: until the step ends,
// by success, error or cancel, or is unwound; the harness checks it is
// zeroed, keeps what was written to it and, for vm.Stack, is freed then.
//
// and may end with one terminal statement:
//
//	success { VALUE }            Success (not after adders: use successStep)
//	error CODE [ STRING ]        Error(code, info); after adders, in a body, InternalError (FTN12 2.1)
//	panic STRING                 a Go panic (InternalError, info = the string)
//	wait                         WaitExternal, completed by nothing
//	wait INT success { VALUE }   WaitExternal, completed INT loop turns later
//	wait INT error CODE [STRING] by the harness, through the step's handle
//	wait DURATION success ...    the same, from a timer DURATION later
//	wait INT|DURATION resumer success { VALUE } | ... resumer error CODE [STRING]
//	                             the same through the step's vm.Resumer
//	break [LABEL]                Break
//	continue [LABEL]             Continue
//	cancel ROOT                  ROOT's Cancel, then the block ends as one without a
//	                             terminal statement; ROOT is this root or one declared
//	                             before (not in a model)
//	release ROOT                 the same with ROOT's Release
//
// An error handler (catch) may use print, set, stack, adders and the
// terminal statements but wait (its stack memory lives until the step or
// parallel step whose error it handles ends); a cancel handler print, set,
// cancel and release. A body that ends without a terminal statement
// succeeds implicitly unless it added steps, set a timeout or a cancel
// handler, or waits (FTN12 1.6). Values are integers, floats (with a point
// or an exponent), strings in Go syntax, true and false; a success has at
// most four. Durations are integers followed by ms.
//
// Strings of print and set are templates: {code} is the error code in a
// handler, {info} the flow's error_info, {arg0} to {arg3} the values the
// step received, {i}, {key} and {val} the variables of the innermost
// enclosing repeat or forEach (captured by the steps added inside it, as
// closures would), {state.NAME} a state variable. A reference that does
// not apply expands to nothing; other braces are kept.
//
// Parse accepts only well-formed programs: names are declared before use,
// Break and Continue are inside a loop with that label, terminal
// statements end their block, no step both adds sub-steps and succeeds
// or waits, blocks nest at most 100 deep, and the statements that copy
// statements copy, counted as they expand, number at most 1,048,576.
//
// # Example
//
//	mutex lock 1 -1
//
//	root main cancel 1000ms {
//	  step fetch {
//	    timeout 50ms
//	    wait 2 success "data" 42
//	  } catch {
//	    success "cached" 0
//	  }
//	  sync lock {
//	    print "got {arg0} {arg1}"
//	    repeat 2 {
//	      print "pass {i}"
//	    }
//	  }
//	}
//
// # Traces
//
// A run appends one line per event, "ROOT: EVENT":
//
//	enter ID VALUES      a step function (or a sync section) starts, with the values it received
//	iter ID [I | K V]    a loop iteration starts (repeat: its index; forEach: key and value)
//	catch ID CODE        an error handler starts
//	cancel ID            a cancel handler runs
//	free ID [TYPE] N     the memory of a stack statement (stack [TYPE] N) is freed
//	resume ID            the harness completes a waiting step
//	print TEXT           a print statement
//	stalled              nothing can move the root any more: the harness cancels it
//	done ok VALUES | done error CODE [INFO] | done canceled
//
// ID is the name or label of the statement, or s<N>, N counting the step,
// parallel, loop, repeat, forEach and sync statements of the program in
// source order (see IDs).
//
// The harness runs a program the same way on the VM and on the model: it
// builds the models, then each root in order (setting its state, adding
// its level 0 steps) and executes it; then it schedules the cancels. The
// loop runs with a manual clock that jumps to the next timer whenever
// nothing else is ready. A root's completion is reported before the next
// event, roots in declaration order, because that is when the harness can
// see it. When nothing is left to run, each root still running, in order,
// is reported stalled and canceled. A run stops after Limits.MaxTrace lines.
package prog
