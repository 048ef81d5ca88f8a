//go:build cgo

package ffi

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// failingClock panics in Now while fail is set.
type failingClock struct{ fail bool }

func (c *failingClock) Now() time.Time {
	if c.fail {
		panic("clock failure")
	}
	return time.Unix(1_700_000_000, 0)
}

// A sched_deferred made between passes, whose reading of a custom clock
// panics (C gets no handle: the call is refused), leaves no task behind:
// the task taken for it goes back to the pool, not live for a callback
// that no timer will ever fire, and the next call reuses it.
func TestScheduleWithFailingClock(t *testing.T) {
	clk := &failingClock{}
	l := vm.NewLoop(vm.WithClock(clk))
	ls := loopOf(l)
	clk.fail = true
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the clock's panic did not reach the caller")
			}
		}()
		ls.schedule(true, 5*time.Millisecond, nil, 0)
	}()
	clk.fail = false
	for _, tk := range ls.tasks {
		if tk.live {
			t.Fatalf("task %d is live with no timer behind it", tk.idx)
		}
	}
	if len(ls.freeTasks) != len(ls.tasks) {
		t.Fatalf("%d tasks, %d free: one left the pool for good", len(ls.tasks), len(ls.freeTasks))
	}
	h := ls.schedule(true, 5*time.Millisecond, nil, 0)
	if len(ls.tasks) != 1 || !ls.taskValid(&h) {
		t.Fatalf("%d tasks after a schedule that worked, valid %v", len(ls.tasks), ls.taskValid(&h))
	}
	ls.cancelTask(&h)
	if s := l.Stats(); s.Timers != 0 {
		t.Fatalf("%d timers after the task was canceled", s.Timers)
	}
}
