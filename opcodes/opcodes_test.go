package opcodes

import (
	"reflect"
	"testing"
	"unsafe"
)

func TestNodeSizes(t *testing.T) {
	if NodeSize != 32 || WideSize != 64 {
		t.Fatalf("Node %d, wide %d bytes; want 32 and 64 (a cache line)", NodeSize, WideSize)
	}
}

func TestOperandViews(t *testing.T) {
	buf := make([]uint64, WideSize/8) // a wide node's memory
	n := (*Node)(unsafe.Pointer(&buf[0]))
	n.Wide = true
	n.Ops().SetTop(0xfffffff0)
	n.Ops().B = 7
	if n.Ops().Top() != 0xfffffff0 || buf[NodeSize/8] != 0xfffffff0 || buf[NodeSize/8+1] != 7 {
		t.Fatal("the operands are not the 16 bytes after the node")
	}
	if n.Size() != WideSize {
		t.Fatalf("wide node Size %d", n.Size())
	}
	n.Wide = false
	if n.Size() != NodeSize {
		t.Fatalf("narrow node Size %d", n.Size())
	}
}

func TestOpNames(t *testing.T) {
	for o := OpNone; o < opCount; o++ {
		if o.String() == "" || o.String() == "op?" {
			t.Fatalf("op %d has no name", o)
		}
	}
	if !OpRepeat.Wide() || OpLoop.Wide() || OpExec.Wide() || !OpRoot.Wide() || !OpBranch.Wide() {
		t.Fatal("wide ops wrong")
	}
	if !OpRepeat.IsLoop() || OpExec.IsLoop() || !OpBranch.IsBase() {
		t.Fatal("op predicates wrong")
	}
}

// TestNodeHoldsNoPointers guards the rule that arena memory holds no Go
// pointers, and that linking Nodes never passes a write barrier.
func TestNodeHoldsNoPointers(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Node](), reflect.TypeFor[Operands]()} {
		checkNoPointers(t, typ)
	}
}

func checkNoPointers(t *testing.T, typ reflect.Type) {
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Name == "_" {
			continue
		}
		switch f := typ.Field(i); f.Type.Kind() {
		case reflect.Pointer, reflect.UnsafePointer, reflect.Interface, reflect.Slice,
			reflect.Map, reflect.Chan, reflect.Func, reflect.String, reflect.Struct, reflect.Array:
			t.Errorf("%s.%s is a %s", typ.Name(), f.Name, f.Type)
		}
	}
}
