//go:build cgo

package ffi

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// recordsInUse returns how many records ls has handed out and not
// released.
func (ls *loopState) recordsInUse() int {
	n := len(ls.blocks)*blockSize - len(ls.fresh) - ls.free.n
	for _, b := range ls.blocks {
		if b[0].idx == 0 {
			n-- // record 0, never handed out
		}
	}
	return n
}

// The unlock of a C primitive that a cancel handler runs as a flow is
// canceled, released or timed out binds a record to the frame being torn
// down: it is released with the frame.
func TestSyncUnlockFromTeardownReleasesRecords(t *testing.T) {
	for _, how := range []string{"Cancel", "Release", "Timeout", "Done"} {
		t.Run(how, func(t *testing.T) {
			clk := vm.NewManualClock(time.Unix(0, 0))
			l := vm.NewLoop(vm.WithClock(clk))
			ls := loopOf(l)
			s := WrapSync(ctest.OddSync(ctest.OddLockMutex, ctest.OddUnlockCount))
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetTimeout(10 * time.Millisecond)
				as.Sync(s, func(as vm.AsyncSteps, _ vm.Args) {
					if how != "Done" {
						as.WaitExternal()
					}
				})
			}, func(as vm.AsyncSteps, _ string) {})
			root.Execute()
			l.RunUntilIdle()
			EndRunBy(l, clk, root, how)
			if how != "Release" {
				root.Release()
			}
			l.RunUntilIdle()
			if locks, unlocks, _ := ctest.OddCounts(); locks != 1 || unlocks != 1 {
				t.Errorf("lock ran %d times, unlock %d", locks, unlocks)
			}
			if n := ls.recordsInUse(); n != 0 {
				t.Errorf("%d records in use after the flow ended", n)
			}
			if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 || st.Timers != 0 {
				t.Errorf("the loop holds %+v", st)
			}
		})
	}
}
