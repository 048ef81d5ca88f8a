package opcodes

import "testing"

func TestNodeIs64Bytes(t *testing.T) {
	if NodeSize != 64 {
		t.Fatalf("Node is %d bytes, want 64", NodeSize)
	}
}

func TestQueueFIFO(t *testing.T) {
	var base Node
	nodes := make([]Node, 5)
	for i := range nodes {
		nodes[i].Seq = uint32(i + 1)
		base.Push(&nodes[i])
	}
	for i := range nodes {
		got := base.Pop()
		if got == nil || got.Seq != uint32(i+1) {
			t.Fatalf("pop %d: got %v", i, got)
		}
	}
	if base.Pop() != nil || base.Tail != nil {
		t.Fatal("queue not empty after draining")
	}
}

func TestOperandViews(t *testing.T) {
	var n, f Node
	n.SetTop(&f)
	if n.Top() != &f {
		t.Fatal("Top does not round-trip")
	}
	n.B = 0
	n.SetCancelSlot(7)
	n.SetTimerSlot(9)
	if n.CancelSlot() != 7 || n.TimerSlot() != 9 {
		t.Fatalf("slots: cancel %d timer %d", n.CancelSlot(), n.TimerSlot())
	}
	n.SetCancelSlot(0)
	if n.CancelSlot() != 0 || n.TimerSlot() != 9 {
		t.Fatal("clearing cancel slot disturbed timer slot")
	}
}

func TestOpNames(t *testing.T) {
	for o := OpNone; o < opCount; o++ {
		if o.String() == "" || o.String() == "op?" {
			t.Fatalf("op %d has no name", o)
		}
	}
	if !OpRepeat.IsLoop() || OpExec.IsLoop() || !OpBranch.IsBase() {
		t.Fatal("op predicates wrong")
	}
}
