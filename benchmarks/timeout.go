package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// TimeoutCancel: per flow, a step sets a one-second timeout and waits; it
// is completed well before the deadline, which must stop its timer.

// timeoutFlows is the stepvm side's state.
type timeoutFlows struct {
	l      *vm.Loop
	step   vm.ExecFunc
	onErr  vm.ErrorFunc
	h      vm.AsyncSteps // the waiting step of the current flow
	failed int           // errors seen: timeouts would land here
}

func newTimeoutFlows() *timeoutFlows {
	t := &timeoutFlows{l: vm.NewLoop()}
	t.step = func(as vm.AsyncSteps, _ vm.Args) {
		as.SetTimeout(time.Second)
		t.h = as
	}
	t.onErr = func(vm.AsyncSteps, string) { t.failed++ }
	return t
}

// complete completes the waiting step through its handle from the loop
// goroutine; completion is synchronous, so the flow has ended on return.
// It reports whether a step was waiting.
func (t *timeoutFlows) complete() bool {
	if !t.h.Valid() {
		return false
	}
	t.h.Success()
	t.h = vm.AsyncSteps{}
	return true
}

func (t *timeoutFlows) check(b *testing.B) {
	if t.failed != 0 {
		b.Fatalf("%d flows failed", t.failed)
	}
	if s := t.l.Stats(); s.Timers != 0 || s.RunningRoots != 0 {
		b.Fatalf("%d timers pending and %d roots running, want none", s.Timers, s.RunningRoots)
	}
}

func timeoutStepvm(b *testing.B) {
	t := newTimeoutFlows()
	defer t.l.Close()
	flow := func() {
		as := t.l.NewSteps()
		as.Add(t.step, t.onErr)
		as.Execute()
		t.l.RunUntilIdle()
		if !t.complete() {
			b.Fatal("the step does not wait")
		}
		as.Release()
	}
	timeFlows(b, flow, nil)
	t.check(b)
}

func timeoutSpawn(b *testing.B) {
	t := newTimeoutFlows()
	defer t.l.Close()
	flow := func() {
		t.l.Spawn(t.step, t.onErr)
		t.l.RunUntilIdle()
		if !t.complete() {
			b.Fatal("the step does not wait")
		}
	}
	timeFlows(b, flow, nil)
	t.check(b)
}

// timeoutGoroutines runs each flow as a goroutine that waits for its reply
// under context.WithTimeout, the idiomatic deadline, and cancels the
// context when the reply comes. The driver sends the reply at once: making
// it wait until the goroutine blocks would only add a hand-off.
func timeoutGoroutines(b *testing.B) {
	reply := make(chan int, 1)
	done := make(chan bool, 1)
	timeouts := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			select {
			case <-reply:
				done <- true
			case <-ctx.Done():
				done <- false
			}
		}()
		reply <- 1
		if !<-done {
			timeouts++
		}
	}
	b.StopTimer()
	reportPer(b, "flow")
	if timeouts != 0 {
		b.Fatalf("%d flows timed out", timeouts)
	}
}

// timeoutAfterFunc is the timer alone: time.AfterFunc armed and stopped,
// with no goroutine. It is a lower bound for Go, not a flow.
func timeoutAfterFunc(b *testing.B) {
	fired := make(chan struct{}, 1)
	onTimeout := func() { fired <- struct{}{} }
	stopped := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t := time.AfterFunc(time.Second, onTimeout)
		if t.Stop() {
			stopped++
		}
	}
	b.StopTimer()
	reportPer(b, "flow")
	if stopped != b.N {
		b.Fatalf("%d timers stopped, want %d", stopped, b.N)
	}
}
