//go:build cgo

package ffi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// Where reentry.c makes its call from.
const (
	reStep = iota + 1
	reCancel
	reError
	reStack
	reState
	reSched
	reUnhandled
	reObject
	reWheres
	reWhats = 18
)

// Every call of the table, made from every kind of C callback on a root C
// made with newInstance, ends the flow exactly once and leaves nothing
// behind once C frees the root: no running root, no timer, no arena byte,
// no root ffi tracks, no record of the root that stays valid.
func TestReentryFromCallbacks(t *testing.T) {
	for where := reStep; where < reWheres; where++ {
		for what := 1; what <= reWhats; what++ {
			t.Run(fmt.Sprintf("where%d/what%d", where, what), func(t *testing.T) {
				reentry(t, where, what)
			})
		}
	}
}

func reentry(t *testing.T, where, what int) {
	ctest.ResetTrace()
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	ls := loopOf(l)
	host := l.NewSteps()
	hostRec := Binary(host)
	base := l.Stats()
	tracked := ls.trackedRoots()
	p := ctest.Reentry(hostRec, where, what)
	root := Wrap(p)
	var f *vm.Future
	if where == reUnhandled {
		ctest.ReentryExecute()
	} else {
		f = root.Promise()
	}
	l.RunUntilIdle()
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	if root.Valid() {
		root.Cancel() // a flow that waits, or the scenario of cancel handlers
	}
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	if f != nil {
		select {
		case <-f.Done():
		default:
			t.Fatal("the flow has not completed")
		}
	}
	if n := strings.Count(strings.Join(ctest.Trace(), "\n"), "unhandled:"); where == reUnhandled && n != 1 {
		t.Errorf("the handler of unhandled errors ran %d times, want 1: %q", n, ctest.Trace())
	}
	if ctest.IsValid(p) {
		ctest.ReentryFree()
	}
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	if ctest.IsValid(p) || root.Valid() {
		t.Error("the freed root is still valid")
	}
	if n := ctest.ReentryRunaway(); n > 100 {
		t.Errorf("stack cleanups ran %d times", n)
	}
	s := l.Stats()
	if s.LiveRoots != base.LiveRoots || s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse {
		t.Errorf("stats after free: %+v; baseline %+v", s, base)
	}
	if ls.trackedRoots() != tracked || len(ls.owned) != 0 || ls.stash != nil || ls.frame != (vm.AsyncSteps{}) {
		t.Errorf("ffi state after free: tracked %d (want %d), owned %d, stash %v, frame %v",
			ls.trackedRoots(), tracked, len(ls.owned), ls.stash, ls.frame)
	}
	host.Release()
}
