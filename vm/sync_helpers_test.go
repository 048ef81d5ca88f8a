package vm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Helpers of the sync, mutex, throttle and limiter tests. Their names
// start with sy so that they never collide with other test files' helpers.

var syEpoch = time.Unix(1_700_000_000, 0)

// syLoop returns a loop driven by a manual clock.
func syLoop() (*vm.Loop, *vm.ManualClock) {
	clk := vm.NewManualClock(syEpoch)
	return vm.NewLoop(vm.WithClock(clk)), clk
}

// syMs is the time of clk in milliseconds since syEpoch.
func syMs(clk *vm.ManualClock) int64 { return clk.Now().Sub(syEpoch).Milliseconds() }

// syLog records events, one line each; loop goroutine only.
type syLog struct{ lines []string }

func (s *syLog) add(format string, a ...any) { s.lines = append(s.lines, fmt.Sprintf(format, a...)) }

func syExpect(t *testing.T, log *syLog, want ...string) {
	t.Helper()
	if g, w := strings.Join(log.lines, "\n"), strings.Join(want, "\n"); g != w {
		t.Fatalf("trace mismatch\n--- got ---\n%s\n--- want ---\n%s", g, w)
	}
}

// syCount returns how many of lines contain s.
func syCount(lines []string, s string) int {
	n := 0
	for _, line := range lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// syWant fails t unless f's flow ended with outcome want (as syOutcome
// names it); who names the flow in the message (fmt.Sprint of its parts).
func syWant(t *testing.T, f *vm.Future, want string, who ...any) {
	t.Helper()
	if o := syOutcome(t, f); o != want {
		name := fmt.Sprint(who...)
		if name == "" {
			name = "flow"
		}
		t.Fatalf("%s: %s, want %s", name, o, want)
	}
}

// syOutcome returns how a flow that must have completed ended: "ok", the
// error code, or "canceled".
func syOutcome(t *testing.T, f *vm.Future) string {
	t.Helper()
	select {
	case <-f.Done():
	default:
		t.Fatal("flow did not complete")
	}
	_, err := f.Wait(context.Background())
	var e *vm.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, vm.ErrCanceled):
		return "canceled"
	case errors.As(err, &e):
		return e.Code
	}
	t.Fatalf("unexpected error %v", err)
	return ""
}

// syPending fails t if f has completed.
func syPending(t *testing.T, f *vm.Future) {
	t.Helper()
	select {
	case <-f.Done():
		t.Fatalf("flow completed early: %s", syOutcome(t, f))
	default:
	}
}

// syStats fails t unless s has the given Inside and Queued counts.
func syStats(t *testing.T, what string, s vm.SyncStats, inside, queued int) {
	t.Helper()
	if s.Inside != inside || s.Queued != queued {
		t.Fatalf("%s: Inside %d Queued %d, want %d and %d (%+v)", what, s.Inside, s.Queued, inside, queued, s)
	}
}

// syIdle fails t unless no flow of l runs or holds arena memory.
func syIdle(t *testing.T, l *vm.Loop) {
	t.Helper()
	if s := l.Stats(); s.RunningRoots != 0 || s.ArenaInUse != 0 {
		t.Fatalf("loop not idle: %+v", s)
	}
}

// syEnd fails t unless, at a test's end, no flow is inside or queued in the
// primitive whose stats are s, and l is idle.
func syEnd(t *testing.T, l *vm.Loop, s vm.SyncStats) {
	t.Helper()
	syStats(t, "at the end", s, 0, 0)
	syIdle(t, l)
}

// syHold returns a section that logs "enter name" and keeps the flow inside
// for one more turn, logging "leave name" then.
func syHold(log *syLog, name string) vm.ExecFunc {
	return func(as vm.AsyncSteps, _ vm.Args) {
		log.add("enter %s", name)
		as.Add(func(vm.AsyncSteps, vm.Args) { log.add("leave %s", name) })
	}
}

// syWaitFor returns a section that logs "enter name" and stays inside
// until d has passed on the loop's clock.
func syWaitFor(log *syLog, name string, d time.Duration) vm.ExecFunc {
	return func(as vm.AsyncSteps, _ vm.Args) {
		log.add("enter %s", name)
		l := as.Tool()
		h := l.Deferred(d, func() {
			log.add("leave %s", name)
			as.Success()
		})
		as.SetCancel(func(vm.AsyncSteps) { l.Cancel(h) })
	}
}

// sySeeds runs the random test run with seeds 1 to n, stopping at the first
// that fails.
func sySeeds(t *testing.T, n uint64, run func(t *testing.T, seed uint64)) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		run(t, seed)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}
