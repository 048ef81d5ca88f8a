//go:build cgo

package ffi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// expectClean checks, once every root of l has been released, that l
// holds nothing more than base says it did and that no record of its loop
// names anything.
func expectClean(t *testing.T, l *vm.Loop, base vm.LoopStats) {
	t.Helper()
	s := l.Stats()
	if s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || s.LiveRoots != base.LiveRoots {
		t.Errorf("stats %+v, baseline %+v", s, base)
	}
	if n := ffi.RecordsInUse(l); n != 0 {
		t.Errorf("%d records in use", n)
	}
}

// canceled is the outcome expectOutcome takes for a flow that Cancel or
// Release ended.
const canceled = "canceled"

// expectOutcome checks that err is what a flow ending as want ("": with
// success) returns.
func expectOutcome(t *testing.T, err error, want string) {
	t.Helper()
	e, _ := err.(*vm.Error)
	switch {
	case want == "" && err == nil, want == canceled && errors.Is(err, vm.ErrCanceled),
		e != nil && e.Code == want:
		return
	}
	t.Errorf("flow error %v, want %q", err, want)
}

// FTN12 2.2.2: setTimeout, setCancel and waitExternal are for the step's
// function. A C error handler that calls one, through its own record or
// the one the step's function had (the same frame), fails its flow with
// InternalError, whatever it does next; nothing it set up stays behind,
// and the cancel handler it gave never runs. So does the C error handler
// of a parallel step, which has no step to configure.
func TestCErrorHandlerCannotWait(t *testing.T) {
	names := []string{"", "SetTimeout", "SetCancel", "WaitExternal"}
	for what := 1; what <= 3; what++ {
		for _, through := range []bool{false, true} {
			for then, thenName := range []string{"returns", "adds a step", "succeeds"} {
				for _, parallel := range []bool{false, true} {
					if through && parallel {
						continue
					}
					name := fmt.Sprintf("%s/through-step-record=%v/%s/parallel=%v", names[what], through, thenName, parallel)
					t.Run(name, func(t *testing.T) {
						ctest.ResetTrace()
						l, clk := newLoop()
						base := l.Stats()
						root := l.NewSteps()
						root.Add(func(as vm.AsyncSteps, _ vm.Args) {
							ctest.HandlerWait(ffi.Binary(as), what, through, then, parallel)
						}, func(as vm.AsyncSteps, code string) { ctest.Say("outer handler " + code) })
						root.Add(say("next"))
						f := root.Promise()
						l.RunUntilIdle()
						clk.Advance(time.Second)
						l.RunUntilIdle()
						_, err := result(t, f)
						e, ok := err.(*vm.Error)
						if !ok || e.Code != vm.InternalError || !strings.Contains(e.Info, names[what]) {
							t.Fatalf("flow error = %#v, want InternalError about %s", err, names[what])
						}
						if !parallel && !strings.Contains(e.Info, "error handler") {
							t.Errorf("info %q does not say the call came from an error handler", e.Info)
						}
						expectLines(t, "C", takeTrace(), "handler E", "handler went on", "outer handler InternalError")
						root.Release()
						expectClean(t, l, base)
					})
				}
			}
		}
	}
}

// Stack memory from C in every kind of frame of a parallel step's
// branches (their steps, a loop body, a section of a C sync, a step's
// error handler) and of the parallel step itself (its host step, its
// error handler, the step that handler adds) is cleaned up once, each
// frame's newest first, as each frame ends: by an error of one branch
// that cancels the other, by Cancel, by Release.
func TestCStackInThreads(t *testing.T) {
	a := []string{"cancel A section", "cleanup A section 2", "cleanup A section 1",
		"cleanup A iteration 2", "cleanup A iteration 1", "cleanup A 2", "cleanup A 1"}
	bWaitCanceled := []string{"cancel B wait", "cleanup B wait 2", "cleanup B wait 1", "cleanup B 2", "cleanup B 1"}
	host := []string{"cleanup host 2", "cleanup host 1"}
	var timeout []string
	timeout = append(timeout, "B handler Timeout", "cleanup B handler 2", "cleanup B handler 1",
		"cleanup B wait 2", "cleanup B wait 1", "cleanup B 2", "cleanup B 1")
	timeout = append(timeout, a...)
	timeout = append(timeout, "P handler Timeout", "cleanup P added 2", "cleanup P added 1",
		"cleanup P handler 2", "cleanup P handler 1")
	timeout = append(timeout, host...)
	timeout = append(timeout, "after")
	var cancel []string
	cancel = append(cancel, a...)
	cancel = append(cancel, bWaitCanceled...)
	cancel = append(cancel, host...)
	for _, tc := range []struct {
		name string
		mode int
		end  func(l *vm.Loop, clk *vm.ManualClock, root vm.AsyncSteps)
		want []string
		err  string
	}{
		{"timeout", 0, func(l *vm.Loop, clk *vm.ManualClock, root vm.AsyncSteps) {
			clk.Advance(20 * time.Millisecond)
			l.RunUntilIdle()
		}, timeout, ""},
		{"Cancel", 1, func(l *vm.Loop, _ *vm.ManualClock, root vm.AsyncSteps) {
			root.Cancel()
			l.RunUntilIdle()
		}, cancel, canceled},
		{"Release", 1, func(l *vm.Loop, _ *vm.ManualClock, root vm.AsyncSteps) {
			root.Release()
			l.RunUntilIdle()
		}, cancel, canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, clk := newLoop()
			base := l.Stats()
			root := l.NewSteps()
			ctest.StackThreads(ffi.Binary(root), ctest.CMutex(), tc.mode)
			root.Add(say("after"))
			f := root.Promise()
			l.RunUntilIdle()
			expectLines(t, "before the end", takeTrace())
			tc.end(l, clk, root)
			expectLines(t, "C", takeTrace(), tc.want...)
			_, err := result(t, f)
			expectOutcome(t, err, tc.err)
			if root.Valid() {
				root.Release()
			}
			expectClean(t, l, base)
		})
	}
}

// A parallel step of 1,000 C branches that each hold stack memory in two
// frames, one of them waiting: however the branches end (Cancel, Release,
// the waiting steps completed last first, or failed last first, which
// aborts the others), every cleanup runs once, every cancel handler of a
// step that did not succeed once (the failed step's too, as it unwinds), and the root's arena, the loop's Stats and its
// records are as before.
func TestCStackManyBranches(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name    string
		end     func(root vm.AsyncSteps)
		cancels int
		err     string
	}{
		{"Cancel", func(root vm.AsyncSteps) { root.Cancel() }, n, canceled},
		{"Release", func(root vm.AsyncSteps) { root.Release() }, n, canceled},
		{"success", func(vm.AsyncSteps) { ctest.StackBranchesEnd(false) }, 0, ""},
		{"error", func(vm.AsyncSteps) { ctest.StackBranchesEnd(true) }, n, "Ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newLoop()
			base := l.Stats()
			root := l.NewSteps()
			ctest.StackBranches(ffi.Binary(root), n)
			f := root.Promise()
			l.RunUntilIdle()
			if c, _ := ctest.ThreadsCounts(); c != 0 {
				t.Fatalf("%d cleanups before the end", c)
			}
			tc.end(root)
			l.RunUntilIdle()
			cleanups, cancels := ctest.ThreadsCounts()
			wantCleanups := 3 * n
			if tc.err == "Ended" {
				wantCleanups++ // the failing step's handler takes one more
			}
			if cleanups != wantCleanups || cancels != tc.cancels {
				t.Errorf("%d cleanups and %d cancel handlers, want %d and %d", cleanups, cancels, wantCleanups, tc.cancels)
			}
			_, err := result(t, f)
			expectOutcome(t, err, tc.err)
			if root.Valid() {
				root.Release()
			}
			expectClean(t, l, base)
		})
	}
}

// A stack cleanup in one branch of a parallel step that cancels or frees
// its root, as the branch ends by success or by an error, while the other
// branch waits: the root ends once, its record turns stale, every other cleanup and the waiting
// step's cancel handler run once, and nothing stays behind.
func TestCStackCleanupEndsRoot(t *testing.T) {
	for _, free := range []bool{false, true} {
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("free=%v/fail=%v", free, fail), func(t *testing.T) {
				ctest.ResetTrace()
				l, _ := newLoop()
				base := l.Stats()
				host := l.NewSteps()
				ctest.StackEndsRoot(ffi.Binary(host), free, fail)
				l.RunUntilIdle()
				ctest.StackEndsRootFree()
				l.RunUntilIdle()
				// The host step, 3 of the ending branch, the waiting branch
				// and, with an error, the parallel step's handler: a Cancel
				// or Release a destroy callback asks for waits for the
				// unwinding under way, which runs that handler first.
				want, trace := 5, []string(nil)
				if fail {
					want, trace = 6, []string{"parallel handler Fail"}
				}
				if c, k := ctest.ThreadsCounts(); c != want || k != 1 {
					t.Errorf("%d cleanups and %d cancel handlers, want %d and 1", c, k, want)
				}
				expectLines(t, "C", takeTrace(), trace...)
				host.Release()
				expectClean(t, l, base)
			})
		}
	}
}
