package vm

import (
	"context"
	"math"
	"testing"
	"time"
)

// A Resumer slot reused 2^32 times still hands out Resumers that work: the
// generation a Resumer carries is 32 bits, so the slot's must wrap with it.
func TestResumerGenerationWraps(t *testing.T) {
	l := NewLoop(WithClock(NewManualClock(time.Unix(0, 0))))
	slot, s := l.resumers.acquire()
	s.state.Store(math.MaxUint32 << 1) // the generation of 2^32-1 releases
	l.resumers.release(slot)           // the 2^32nd: the next use is generation 0
	var res Resumer
	root := l.NewSteps()
	root.Add(func(as AsyncSteps, _ Args) {
		res = as.Resumer()
		as.WaitExternal()
	})
	f := root.Promise()
	l.RunUntilIdle()
	if res.slot != slot {
		t.Fatalf("the flow's Resumer has slot %d, want the reused slot %d", res.slot, slot)
	}
	if !res.Success(Int(7)) {
		t.Fatal("Success through a live Resumer of the wrapped slot refused")
	}
	l.RunUntilIdle()
	select {
	case <-f.Done():
	default:
		t.Fatal("the flow did not complete")
	}
	if a, err := f.Wait(context.Background()); err != nil || a.Int(0) != 7 {
		t.Fatalf("flow = %v, %v; want 7", a.Values(), err)
	}
	if res.Success() {
		t.Fatal("a second Success accepted")
	}
}
