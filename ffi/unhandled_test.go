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

// A C step (or C error handler) of flow A that fails a waiting step of
// flow B through its record ends B at once, and B's handler of unhandled
// errors runs nested in A's C function. Whatever call the handler makes,
// through its own record, through A's or through B's ended step's, B's
// end is reported once, A completes exactly once (as it would have when
// the call is not through A's record), and nothing is left behind: no running root,
// no timer, no arena byte, no C call state.
func TestUnhandledHandlerNestedInOtherFlow(t *testing.T) {
	unhandledMatrix(t, false)
}

// The same with B on a second loop, driven by the same goroutine: A's C
// function fails B's step through its record while no call of B's loop
// runs, and B's handler, nested in it, calls through records of either
// loop. Each loop ends as it would alone, and neither keeps anything.
func TestUnhandledHandlerNestedInOtherLoop(t *testing.T) {
	unhandledMatrix(t, true)
}

func unhandledMatrix(t *testing.T, twoLoops bool) {
	for _, inError := range []bool{false, true} {
		for through := 0; through <= 2; through++ {
			for what := 1; what <= 10; what++ {
				name := fmt.Sprintf("inError=%v/through%d/what%d", inError, through, what)
				t.Run(name, func(t *testing.T) { unhandledNested(t, twoLoops, inError, through, what) })
			}
		}
	}
}

func unhandledNested(t *testing.T, twoLoops, inError bool, through, what int) {
	ctest.ResetTrace()
	clk := vm.NewManualClock(time.Unix(0, 0))
	la := vm.NewLoop(vm.WithClock(clk))
	lb, loops := la, []*vm.Loop{la}
	if twoLoops {
		lb = vm.NewLoop(vm.WithClock(clk))
		loops = append(loops, lb)
	}
	var bases []vm.LoopStats
	for _, l := range loops {
		loopOf(l)
		bases = append(bases, l.Stats())
	}
	idle := func() {
		for _, l := range loops {
			l.RunUntilIdle()
		}
	}
	a, b := la.NewSteps(), lb.NewSteps()
	ctest.UnhandledNested(Binary(b), Binary(a), inError, through, what)
	idle() // b waits
	f := a.Promise()
	idle()
	clk.Advance(10 * time.Millisecond)
	idle()
	a.Cancel() // a step of a that waits: the handler's waitExternal through a's record
	idle()
	select {
	case <-f.Done():
	default:
		t.Fatal("flow A has not completed")
	}
	_, err := f.Wait(t.Context())
	if through != 1 { // not through a's record: a ends as it would have
		want := ""
		if inError {
			want = "Outer"
		}
		if e, _ := err.(*vm.Error); want == "" && err != nil || want != "" && (e == nil || e.Code != want) {
			t.Errorf("flow A: %v, want %q", err, want)
		}
	}
	if n := strings.Count(strings.Join(ctest.Trace(), "\n"), "unhandled: Nested"); n != 1 {
		t.Errorf("B's end reported %d times: %q", n, ctest.Trace())
	}
	a.Release()
	b.Release()
	idle()
	for i, l := range loops {
		base := bases[i]
		if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || s.LiveRoots != base.LiveRoots {
			t.Errorf("loop %d stats: %+v; baseline %+v", i, s, base)
		}
		if ls := loopOf(l); ls.stash != nil || ls.frame != (vm.AsyncSteps{}) {
			t.Errorf("loop %d ffi call state: stash %v, frame %v", i, ls.stash, ls.frame)
		}
	}
}
