//go:build cgo

package ffi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// oddLeaves checks that l holds nothing once its roots are released.
func oddLeaves(t *testing.T, l *vm.Loop) {
	t.Helper()
	l.RunUntilIdle()
	if s := l.Stats(); s.ArenaInUse != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.LiveRoots != 0 {
		t.Errorf("the loop holds %+v after its flows ended", s)
	}
}

// oddCounts checks OddSync's counters.
func oddCounts(t *testing.T, locks, unlocks, queued int) {
	t.Helper()
	if l, u, q := ctest.OddCounts(); l != locks || u != unlocks || q != queued {
		t.Errorf("lock ran %d times, unlock %d, %d wait; want %d, %d, %d", l, u, q, locks, unlocks, queued)
	}
}

// A Go flow under a C primitive whose lock calls back synchronously: the
// section gets the values given to the sync step and passes on its own;
// unlock runs once per lock that was not refused, however the section ends.
func TestOddSyncLock(t *testing.T) {
	for _, c := range []struct {
		name           string
		mode           int
		code           string
		trace          []string
		locks, unlocks int
	}{
		{"success", ctest.OddLockSuccess, "", []string{"section got 5", "after got 6"}, 1, 1},
		{"wait then success", ctest.OddLockWaitSuccess, "", []string{"section got 5", "after got 6"}, 1, 1},
		{"add", ctest.OddLockAdd, "", []string{"lock sub-step", "section got 5", "after got 6"}, 1, 1},
		{"success twice", ctest.OddLockSuccessTwice, vm.InternalError, nil, 1, 1},
		{"refuse", ctest.OddLockRefuse, "Refused", nil, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, _ := newLoop()
			s := ffi.WrapSync(ctest.OddSync(c.mode, ctest.OddUnlockCount))
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(5)) })
			root.Sync(s, func(as vm.AsyncSteps, args vm.Args) {
				ctest.Say(fmt.Sprint("section got ", args.Int(0)))
				as.Success(vm.Int(6))
			})
			root.Add(func(as vm.AsyncSteps, args vm.Args) { ctest.Say(fmt.Sprint("after got ", args.Int(0))) })
			f := root.Promise()
			l.RunUntilIdle()
			_, err := result(t, f)
			if e, _ := err.(*vm.Error); (c.code == "") != (err == nil) || e != nil && e.Code != c.code {
				t.Errorf("flow ended with %v, want %q", err, c.code)
			}
			expectLines(t, c.name, takeTrace(), c.trace...)
			oddCounts(t, c.locks, c.unlocks, 0)
			root.Release()
			oddLeaves(t, l)
		})
	}
}

// A waiter granted twice, or granted after its flow was released and its
// root reused: the late calls find the lock step's record stale and touch
// nothing.
func TestOddSyncLateGrants(t *testing.T) {
	ctest.ResetTrace()
	l, _ := newLoop()
	s := ffi.WrapSync(ctest.OddSync(ctest.OddLockQueue, ctest.OddUnlockCount))
	section := func(name string) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) { ctest.Say(name + " section") }
	}
	a := l.NewSteps()
	a.Sync(s, section("A"))
	fa := a.Promise()
	l.RunUntilIdle()
	ctest.OddGrant(false)
	ctest.OddGrant(true)
	l.RunUntilIdle()
	if _, err := result(t, fa); err != nil {
		t.Fatalf("A: %v", err)
	}
	ctest.OddGrant(true)
	a.Release()

	b := l.NewSteps() // A's root, from the pool
	b.Sync(s, section("B"))
	b.Execute()
	l.RunUntilIdle()
	b.Release() // while queued: unlock runs for it
	ctest.OddGrant(false)
	c := l.NewSteps()
	c.Add(say("C runs"))
	fc := c.Promise()
	ctest.OddGrant(true)
	l.RunUntilIdle()
	if _, err := result(t, fc); err != nil {
		t.Fatalf("C: %v", err)
	}
	c.Release()
	expectLines(t, "trace", takeTrace(), "A section", "C runs")
	oddCounts(t, 2, 2, 0)
	oddLeaves(t, l)
}

// Branches of one flow under a C mutex that tells callers apart by their
// FutoInAsyncSteps: the second waits for the first. The flow is canceled or
// released while one holds it: its unlock, run by the cancel handler, hands
// the mutex over to the other branch, whose flow is being torn down.
func TestOddSyncHandoverDuringTeardown(t *testing.T) {
	for _, how := range []string{"Cancel", "Release", "Timeout"} {
		t.Run(how, func(t *testing.T) {
			ctest.ResetTrace()
			l, clk := newLoop()
			s := ffi.WrapSync(ctest.OddSync(ctest.OddLockMutex, ctest.OddUnlockHandover))
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if how == "Timeout" {
					as.SetTimeout(10 * time.Millisecond)
				}
				p := as.Parallel()
				for _, name := range []string{"A", "B"} {
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Sync(s, func(as vm.AsyncSteps, _ vm.Args) {
							ctest.Say(name + " holds")
							as.WaitExternal()
						})
					})
				}
			}, func(as vm.AsyncSteps, code string) { ctest.Say("root failed " + code) })
			f := root.Promise()
			l.RunUntilIdle()
			other := l.NewSteps() // a flow of its own, queued behind the branches
			other.Sync(s, func(as vm.AsyncSteps, _ vm.Args) { ctest.Say("other holds") })
			fo := other.Promise()
			l.RunUntilIdle()
			oddCounts(t, 3, 0, 2)
			ffi.EndRunBy(l, clk, root, how)
			if how != "Release" {
				select {
				case <-f.Done():
				default:
					t.Fatal("the flow has not ended")
				}
				root.Release()
			}
			if _, err := result(t, fo); err != nil {
				t.Fatalf("the other flow: %v", err)
			}
			other.Release()
			tr := takeTrace()
			want := []string{"A holds", "other holds"}
			if how == "Timeout" {
				want = []string{"A holds", "root failed Timeout", "other holds"}
			}
			expectLines(t, how, tr, want...)
			oddCounts(t, 3, 3, 0)
			oddLeaves(t, l)
		})
	}
}
