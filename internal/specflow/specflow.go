// Package specflow holds the example flows of the FTN12 specification,
// written once against package vm together with the trace each must print.
// The tests run them on the VM (package vm), next to their C versions
// through the binary interface, and on a C engine through ffi.Wrap (package
// ffi): one text of each example, so the three cannot drift apart.
package specflow

import "github.com/stepvm/stepvm/vm"

// Flow is one example: Build adds its steps to a root that has not run,
// printing through say; the flow then prints Want and ends with error Err
// ("" for success).
type Flow struct {
	Name  string
	Build func(root vm.AsyncSteps, say func(string))
	Want  []string
	Err   string
}

// All lists every example, in the order of the specification.
var All = []Flow{Levels, ErrorHandling, StepsInErrorHandler, Parallel, ParallelAbort, Loops}

// sayStep returns a step that prints line.
func sayStep(say func(string), line string) vm.ExecFunc {
	return func(vm.AsyncSteps, vm.Args) { say(line) }
}

// Levels is FTN12 1.1: the order in which steps of nested levels and
// parallel branches run.
var Levels = Flow{
	Name: "Levels",
	Build: func(root vm.AsyncSteps, say func(string)) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			say("Level 0 add #1")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				say("Level 1 add #1")
				as.Add(sayStep(say, "Level 2 add #1"))
				as.Parallel().Add(sayStep(say, "Level 2 parallel #2"))
				as.Add(sayStep(say, "Level 2 add #3"))
			})
			as.Parallel().Add(sayStep(say, "Level 1 parallel #2"))
			as.Add(sayStep(say, "Level 1 add #3"))
		})
		root.Parallel().Add(sayStep(say, "Level 0 parallel #2"))
		root.Add(sayStep(say, "Level 0 add #3"))
	},
	Want: []string{
		"Level 0 add #1",
		"Level 1 add #1",
		"Level 2 add #1",
		"Level 2 parallel #2",
		"Level 2 add #3",
		"Level 1 parallel #2",
		"Level 1 add #3",
		"Level 0 parallel #2",
		"Level 0 add #3",
	},
}

// ErrorHandling is FTN12 1.2: an error handler replaces the error, the
// outer one recovers with a value for the next step. The lines after Error
// are never printed: Error does not return.
var ErrorHandling = Flow{
	Name: "ErrorHandling",
	Build: func(root vm.AsyncSteps, say func(string)) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			say("Level 0 func")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				say("Level 1 func")
				as.Error("myerror")
				say("Error returned")
			}, func(as vm.AsyncSteps, code string) {
				say("Level 1 onerror: " + code)
				as.Error("newerror")
				say("Error returned")
			})
		}, func(as vm.AsyncSteps, code string) {
			say("Level 0 onerror: " + code)
			as.Success(vm.Str("Prm"))
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) {
			say("Level 0 func2: " + args.String(0))
			as.Success()
		})
	},
	Want: []string{
		"Level 0 func",
		"Level 1 func",
		"Level 1 onerror: myerror",
		"Level 0 onerror: newerror",
		"Level 0 func2: Prm",
	},
}

// StepsInErrorHandler is FTN12 1.2.1: steps added by an error handler run
// on its level, and their error goes to the outer handler.
var StepsInErrorHandler = Flow{
	Name: "StepsInErrorHandler",
	Build: func(root vm.AsyncSteps, say func(string)) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			say("Level 0 func")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				say("Level 1 func")
				as.Error("first")
			}, func(as vm.AsyncSteps, code string) {
				say("Level 1 onerror: " + code)
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					say("Level 2 func")
					as.Error("second")
				}, func(as vm.AsyncSteps, code string) {
					say("Level 2 onerror: " + code)
				})
			})
		}, func(as vm.AsyncSteps, code string) {
			say("Level 0 onerror: " + code)
		})
	},
	Want: []string{
		"Level 0 func",
		"Level 1 func",
		"Level 1 onerror: first",
		"Level 2 func",
		"Level 2 onerror: second",
		"Level 0 onerror: second",
	},
	Err: "second",
}

// Parallel is FTN12 1.4: branches start together, each runs its sub-steps
// in order, and they share the flow's state.
var Parallel = Flow{
	Name: "Parallel",
	Build: func(root vm.AsyncSteps, say func(string)) {
		branch := func(n, arg, out string) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				say("Parallel Step " + n)
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					say("Parallel Step " + n + ".1")
					v, _ := as.State().Get(arg)
					as.State().Set(out, v.(string)+n)
					as.Success()
				})
			}
		}
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.State().Set("p1arg", "abc")
			as.State().Set("p2arg", "xyz")
			as.Parallel().Add(branch("1", "p1arg", "p1")).Add(branch("2", "p2arg", "p2"))
		}).Add(func(as vm.AsyncSteps, _ vm.Args) {
			p1, _ := as.State().Get("p1")
			p2, _ := as.State().Get("p2")
			say("Parallel 1 result: " + p1.(string))
			say("Parallel 2 result: " + p2.(string))
		})
	},
	Want: []string{
		"Parallel Step 1",
		"Parallel Step 2",
		"Parallel Step 1.1",
		"Parallel Step 2.1",
		"Parallel 1 result: abc1",
		"Parallel 2 result: xyz2",
	},
}

// ParallelAbort is FTN12 2.2.1: the first error of a branch cancels the
// others and goes to the parallel step's handler.
var ParallelAbort = Flow{
	Name: "ParallelAbort",
	Build: func(root vm.AsyncSteps, say func(string)) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Parallel(func(as vm.AsyncSteps, code string) {
				say("parallel onerror: " + code)
				as.Success()
			}).Add(func(as vm.AsyncSteps, _ vm.Args) {
				say("branch 1 waits")
				as.SetCancel(func(vm.AsyncSteps) { say("branch 1 canceled") })
			}).Add(func(as vm.AsyncSteps, _ vm.Args) {
				say("branch 2 fails")
				as.Error("fail", "branch 2")
			})
			as.Add(sayStep(say, "after parallel"))
		})
	},
	Want: []string{
		"branch 1 waits",
		"branch 2 fails",
		"branch 1 canceled",
		"parallel onerror: fail",
		"after parallel",
	},
}

// Loops is FTN12 1.8: Repeat, Loop with Continue and Break, and labelled
// Continue and Break of an outer loop from a sub-step of an inner one.
var Loops = Flow{
	Name: "Loops",
	Build: func(root vm.AsyncSteps, say func(string)) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(3, func(as vm.AsyncSteps, i int) {
				say("> Repeat: " + vm.Int(int64(i)).String())
			})
			count := 0
			as.Loop(func(as vm.AsyncSteps) {
				count++
				if count == 2 {
					as.Continue()
				}
				say("> Loop: " + vm.Int(int64(count)).String())
				if count == 4 {
					as.Break()
				}
			})
			outer, inner := 0, 0
			as.Loop(func(as vm.AsyncSteps) {
				outer++
				inner = 0
				as.Loop(func(as vm.AsyncSteps) {
					inner++
					say("> Inner: " + vm.Int(int64(outer)).String() + "." + vm.Int(int64(inner)).String())
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						if inner == 2 {
							as.Continue("OUTER")
						}
						if outer == 3 {
							as.Break("OUTER")
						}
						as.Success()
					})
				})
				as.Add(sayStep(say, "never printed either"))
			}, "OUTER")
			as.Add(sayStep(say, "> Done"))
		})
	},
	Want: []string{
		"> Repeat: 0", "> Repeat: 1", "> Repeat: 2",
		"> Loop: 1", "> Loop: 3", "> Loop: 4",
		"> Inner: 1.1", "> Inner: 1.2",
		"> Inner: 2.1", "> Inner: 2.2",
		"> Inner: 3.1",
		"> Done",
	},
}
