package fuzz

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stepvm/stepvm/fuzz/prog"
	"github.com/stepvm/stepvm/vm"
)

// openBugs are the repro programs of testdata/bugs whose bug (BUGS.md) is
// not fixed yet: they are skipped so that the suite stays green. Once
// fixed, a repro leaves this list and joins the seed corpus.
var openBugs = map[string]string{}

// TestBugRepros runs the programs that made the fuzzer fail.
func TestBugRepros(t *testing.T) {
	files, err := filepath.Glob("testdata/bugs/*.step")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".step")
		t.Run(name, func(t *testing.T) {
			if title, open := openBugs[name]; open {
				t.Skip("BUGS.md: " + title)
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := prog.Parse(string(src))
			if err != nil {
				t.Fatal(err)
			}
			check(t, p, Options{GC: true})
		})
	}
}

// BUG-F1: a flow's queued turn is dropped when it reuses a run-queue entry
// that held an Immediate.
func TestBugF1RunQueueEntryReuse(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	l.Immediate(func() {})
	root := l.NewSteps()
	n := 0
	root.Repeat(100, func(as vm.AsyncSteps, i int) {
		as.Parallel().Add(func(vm.AsyncSteps, vm.Args) { n++ })
	})
	f := root.Promise()
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatalf("flow stalled after %d of 100 branches", n)
	}
}

// BUG-F2: a stale run-queue turn of a freed branch runs on reused memory.
func TestBugF2StaleBranchTask(t *testing.T) {
	l := vm.NewLoop(vm.WithClock(vm.NewManualClock(time.Unix(0, 0))))
	root := l.NewSteps()
	ran := false
	p := root.Parallel(func(as vm.AsyncSteps, code string) {
		as.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
	})
	p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") })
	p.SuccessStep()
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); err != nil || !ran {
		t.Fatalf("ran=%v err=%v; want the handler's step to run and the flow to succeed", ran, err)
	}
}

// BUG-F3: a root the loop can reach is never collected, and neither is the
// loop.
func TestBugF3LoopWithPooledRootIsCollected(t *testing.T) {
	var w weak.Pointer[vm.Loop]
	func() {
		l := vm.NewLoop()
		l.NewSteps().Release() // the released root waits in the loop's pool
		l.Close()
		w = weak.Make(l)
	}()
	for i := 0; i < 10 && w.Value() != nil; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if w.Value() != nil {
		t.Fatal("a closed, dropped loop with a pooled root is never collected")
	}
}

// TestHarnessFreesItsLoop checks that many runs do not accumulate loops
// (BUG-F3 made the fuzzer's worker grow by 250 KB a run).
func TestHarnessFreesItsLoop(t *testing.T) {
	p := prog.Generate([]byte("\x01\x01\x00\x02"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 2000 {
		if _, err := Run(p, fuzzLimits, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	// A loop retained per run would hold more than 300 MB here.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 32<<20 {
		t.Fatalf("the heap grew by %d MB over 2000 runs", grown>>20)
	}
}
