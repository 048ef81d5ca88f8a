//go:build cgo

package ffi_test

import (
	"unsafe"

	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// The FTN12 examples run twice, written in Go and written in C against the
// binary interface; both must print the same trace, the expected one.

// example is one FTN12 example in both languages.
type example struct {
	name  string
	goVer func(root vm.AsyncSteps)
	cVer  func(root vm.AsyncSteps)
	drive func(l *vm.Loop, clk *vm.ManualClock) // default: RunUntilIdle
	want  []string
	err   string // the code the flow ends with, if any
}

func runExample(t *testing.T, ex example, build func(root vm.AsyncSteps)) []string {
	t.Helper()
	l, clk := newLoop()
	root := l.NewSteps()
	build(root)
	f := root.Promise()
	if ex.drive != nil {
		ex.drive(l, clk)
	} else {
		l.RunUntilIdle()
	}
	_, err := result(t, f)
	switch {
	case ex.err == "" && err != nil:
		t.Fatalf("flow failed: %v", err)
	case ex.err != "" && (err == nil || err.(*vm.Error).Code != ex.err):
		t.Fatalf("flow error = %v, want %s", err, ex.err)
	}
	root.Release()
	return takeTrace()
}

func checkExample(t *testing.T, ex example) {
	ctest.ResetTrace()
	goTrace := runExample(t, ex, ex.goVer)
	expectLines(t, "Go", goTrace, ex.want...)
	cTrace := runExample(t, ex, ex.cVer)
	expectLines(t, "C", cTrace, ex.want...)
}

// c adapts a ctest builder to a root.
func c(build func(root unsafe.Pointer)) func(vm.AsyncSteps) {
	return func(root vm.AsyncSteps) { build(ffi.Binary(root)) }
}

func TestSpecLevels(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ctest.Say("Level 0 add #1")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("Level 1 add #1")
					as.Add(say("Level 2 add #1"))
					as.Parallel().Add(say("Level 2 parallel #2"))
					as.Add(say("Level 2 add #3"))
				})
				as.Parallel().Add(say("Level 1 parallel #2"))
				as.Add(say("Level 1 add #3"))
			})
			root.Parallel().Add(say("Level 0 parallel #2"))
			root.Add(say("Level 0 add #3"))
		},
		cVer: c(ctest.Levels),
		want: []string{
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
	})
}

// A flow of Go steps with a C sub-step that adds C steps and a C parallel
// runs as the all-Go flow does.
func TestSpecLevelsMixed(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		ctest.Say("Level 0 add #1")
		ctest.MixedLevel1(ffi.Binary(as))
		as.Parallel().Add(say("Level 1 parallel #2"))
		ctest.AddSay(ffi.Binary(as), "Level 1 add #3")
	})
	ctest.AddSay(ffi.Binary(root.Parallel()), "Level 0 parallel #2")
	root.Add(say("Level 0 add #3"))
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	expectLines(t, "mixed", takeTrace(),
		"Level 0 add #1",
		"Level 1 add #1",
		"Level 2 add #1",
		"Level 2 parallel #2",
		"Level 2 add #3",
		"Level 1 parallel #2",
		"Level 1 add #3",
		"Level 0 parallel #2",
		"Level 0 add #3",
	)
}

func TestSpecErrorHandling(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ctest.Say("Level 0 func")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("Level 1 func")
					as.Error("myerror")
				}, func(as vm.AsyncSteps, code string) {
					ctest.Say("Level 1 onerror: " + code)
					as.Error("newerror")
				})
			}, func(as vm.AsyncSteps, code string) {
				ctest.Say("Level 0 onerror: " + code)
				as.Success(vm.Str("Prm"))
			})
			root.Add(func(as vm.AsyncSteps, args vm.Args) {
				ctest.Say("Level 0 func2: " + args.String(0))
				as.Success()
			})
		},
		cVer: c(ctest.ErrorHandling),
		want: []string{
			"Level 0 func",
			"Level 1 func",
			"Level 1 onerror: myerror",
			"Level 0 onerror: newerror",
			"Level 0 func2: Prm",
		},
	})
}

func TestSpecStepsInErrorHandler(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ctest.Say("Level 0 func")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("Level 1 func")
					as.Error("first")
				}, func(as vm.AsyncSteps, code string) {
					ctest.Say("Level 1 onerror: " + code)
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						ctest.Say("Level 2 func")
						as.Error("second")
					}, func(as vm.AsyncSteps, code string) {
						ctest.Say("Level 2 onerror: " + code)
					})
				})
			}, func(as vm.AsyncSteps, code string) {
				ctest.Say("Level 0 onerror: " + code)
			})
		},
		cVer: c(ctest.StepsInErrorHandler),
		want: []string{
			"Level 0 func",
			"Level 1 func",
			"Level 1 onerror: first",
			"Level 2 func",
			"Level 2 onerror: second",
			"Level 0 onerror: second",
		},
		err: "second",
	})
}

func TestSpecParallel(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			branch := func(n, arg, out string) vm.ExecFunc {
				return func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("Parallel Step " + n)
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						ctest.Say("Parallel Step " + n + ".1")
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
				ctest.Say("Parallel 1 result: " + p1.(string))
				ctest.Say("Parallel 2 result: " + p2.(string))
			})
		},
		cVer: c(ctest.Parallel),
		want: []string{
			"Parallel Step 1",
			"Parallel Step 2",
			"Parallel Step 1.1",
			"Parallel Step 2.1",
			"Parallel 1 result: abc1",
			"Parallel 2 result: xyz2",
		},
	})
}

func TestSpecParallelAbort(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Parallel(func(as vm.AsyncSteps, code string) {
					ctest.Say("parallel onerror: " + code)
					as.Success()
				}).Add(func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("branch 1 waits")
					as.SetCancel(func(vm.AsyncSteps) { ctest.Say("branch 1 canceled") })
				}).Add(func(as vm.AsyncSteps, _ vm.Args) {
					ctest.Say("branch 2 fails")
					as.Error("fail", "branch 2")
				})
				as.Add(say("after parallel"))
			})
		},
		cVer: c(ctest.ParallelAbort),
		want: []string{
			"branch 1 waits",
			"branch 2 fails",
			"branch 1 canceled",
			"parallel onerror: fail",
			"after parallel",
		},
	})
}

func TestSpecLoops(t *testing.T) {
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Repeat(3, func(as vm.AsyncSteps, i int) {
					ctest.Say("> Repeat: " + vm.Int(int64(i)).String())
				})
				count := 0
				as.Loop(func(as vm.AsyncSteps) {
					count++
					if count == 2 {
						as.Continue()
					}
					ctest.Say("> Loop: " + vm.Int(int64(count)).String())
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
						ctest.Say("> Inner: " + vm.Int(int64(outer)).String() + "." + vm.Int(int64(inner)).String())
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
					as.Add(say("never printed either"))
				}, "OUTER")
				as.Add(say("> Done"))
			})
		},
		cVer: c(ctest.Loops),
		want: []string{
			"> Repeat: 0", "> Repeat: 1", "> Repeat: 2",
			"> Loop: 1", "> Loop: 3", "> Loop: 4",
			"> Inner: 1.1", "> Inner: 1.2",
			"> Inner: 2.1", "> Inner: 2.2",
			"> Inner: 3.1",
			"> Done",
		},
	})
}

// C steps leave Go loops, and C errors reach Go handlers, as Go steps do.
func TestMixedLoopsAndErrors(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		n := 0
		as.Loop(func(as vm.AsyncSteps) {
			n++
			ctest.Say("Go iteration " + vm.Int(int64(n)).String())
			if n == 2 {
				ctest.AddBreak(ffi.Binary(as), "")
			}
		})
		as.Repeat(5, func(as vm.AsyncSteps, i int) {
			as.Loop(func(as vm.AsyncSteps) {
				ctest.AddBreak(ffi.Binary(as), "R")
			})
		}, "R")
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			ctest.AddFail(ffi.Binary(as), "CError", false)
		}, func(as vm.AsyncSteps, code string) {
			ctest.Say("Go handles " + code + ": " + as.State().ErrorInfo())
			as.Success()
		})
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			ctest.AddFail(ffi.Binary(as), "Again", true)
		})
		as.Add(func(as vm.AsyncSteps, args vm.Args) {
			ctest.Say("Go got " + args.String(0))
		})
	})
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := result(t, f); err != nil {
		t.Fatal(err)
	}
	expectLines(t, "mixed", takeTrace(),
		"Go iteration 1",
		"Go iteration 2",
		"C breaks",
		"C breaks",
		"C fails with CError",
		"Go handles CError: from C",
		"C fails with Again",
		"C handles Again",
		"Go got recovered in C",
	)
}

func TestSpecExternalWait(t *testing.T) {
	drive := func(l *vm.Loop, clk *vm.ManualClock) {
		l.RunUntilIdle()
		clk.Advance(999 * time.Millisecond)
		l.RunUntilIdle()
		if tr := ctest.Trace(); len(tr) != 1 {
			panic("timed out early")
		}
		clk.Advance(time.Millisecond)
		l.RunUntilIdle()
	}
	checkExample(t, example{
		goVer: func(root vm.AsyncSteps) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Tool().Immediate(func() { as.Success(vm.Str("async success()")) })
				as.SetTimeout(10 * time.Millisecond)
			}).Add(func(as vm.AsyncSteps, args vm.Args) {
				ctest.Say(args.String(0))
				as.SetCancel(func(vm.AsyncSteps) {})
				as.SetTimeout(time.Second)
			}, func(as vm.AsyncSteps, code string) {
				ctest.Say(code + ": " + as.State().ErrorInfo())
			})
		},
		cVer:  c(ctest.ExternalWait),
		drive: drive,
		want:  []string{"async success()", "Timeout: "},
		err:   vm.Timeout,
	})
}
