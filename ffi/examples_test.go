//go:build cgo

package ffi_test

import (
	"unsafe"

	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/internal/specflow"
	"github.com/stepvm/stepvm/vm"
)

// The FTN12 examples run twice, written in Go and written in C against the
// binary interface; both must print the same trace, the expected one.

// example is one FTN12 example in both languages.
type example struct {
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

// cFlows are the C versions of the specification's examples.
var cFlows = map[string]func(root unsafe.Pointer){
	specflow.Levels.Name:              ctest.Levels,
	specflow.ErrorHandling.Name:       ctest.ErrorHandling,
	specflow.StepsInErrorHandler.Name: ctest.StepsInErrorHandler,
	specflow.Parallel.Name:            ctest.Parallel,
	specflow.ParallelAbort.Name:       ctest.ParallelAbort,
	specflow.Loops.Name:               ctest.Loops,
}

// TestSpecFlows runs each of the specification's examples written in Go
// (package specflow) and written in C.
func TestSpecFlows(t *testing.T) {
	for _, sf := range specflow.All {
		t.Run(sf.Name, func(t *testing.T) {
			cVer, ok := cFlows[sf.Name]
			if !ok {
				t.Fatalf("%s has no C version", sf.Name)
			}
			checkExample(t, example{
				goVer: func(root vm.AsyncSteps) { sf.Build(root, ctest.Say) },
				cVer:  c(cVer),
				want:  sf.Want,
				err:   sf.Err,
			})
		})
	}
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
	expectLines(t, "mixed", takeTrace(), specflow.Levels.Want...)
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
