package opcodes

import (
	"reflect"
	"testing"
)

func TestNodeIs64Bytes(t *testing.T) {
	if NodeSize != 64 {
		t.Fatalf("Node is %d bytes, want 64: one cache line", NodeSize)
	}
}

func TestOperandViews(t *testing.T) {
	var n Node
	n.SetTop(0xfffffff0)
	if n.Top() != 0xfffffff0 {
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

// TestNodeHoldsNoPointers guards the rule that arena memory holds no Go
// pointers, and that linking Nodes never passes a write barrier.
func TestNodeHoldsNoPointers(t *testing.T) {
	typ := reflect.TypeFor[Node]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Name == "_" {
			continue
		}
		switch f := typ.Field(i); f.Type.Kind() {
		case reflect.Pointer, reflect.UnsafePointer, reflect.Interface, reflect.Slice,
			reflect.Map, reflect.Chan, reflect.Func, reflect.String, reflect.Struct, reflect.Array:
			t.Errorf("Node.%s is a %s", f.Name, f.Type)
		}
	}
}
