package stackalloc

import (
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/internal/allocs"
)

func TestHasPointers(t *testing.T) {
	type flat struct {
		A int64
		B [4]float32
		C struct{ D uint8 }
	}
	type withString struct {
		A int
		S string
	}
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{"int", HasPointers[int](), false},
		{"flat struct", HasPointers[flat](), false},
		{"array of flat", HasPointers[[3]flat](), false},
		{"string", HasPointers[string](), true},
		{"struct with string", HasPointers[withString](), true},
		{"pointer", HasPointers[*int](), true},
		{"slice", HasPointers[[]byte](), true},
		{"map", HasPointers[map[int]int](), true},
		{"func", HasPointers[func()](), true},
		{"interface", HasPointers[any](), true},
		{"unsafe.Pointer", HasPointers[unsafe.Pointer](), true},
		{"empty array of pointers", HasPointers[[0]*int](), false},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: HasPointers = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestTakeNewestFirstPerOwner(t *testing.T) {
	var acct arena.Account
	var a arena.Arena
	a.Init(&acct)
	defer a.Release()

	var l List
	p1 := l.Alloc(&a, 8, 1, 11)
	p2 := l.Alloc(&a, 24, 2, 22)
	p3 := l.Alloc(&a, 8, 1, 13)
	*(*uint64)(p1) = 0xAA
	*(*uint64)(p3) = 0xCC

	p, d, ok := l.Take(1)
	if !ok || p != p3 || d != 13 || *(*uint64)(p) != 0xCC {
		t.Fatalf("first take of owner 1: %v %d %v", p, d, ok)
	}
	l.Free(&a, p)
	p, d, ok = l.Take(1)
	if !ok || p != p1 || d != 11 {
		t.Fatalf("second take of owner 1: %v %d %v", p, d, ok)
	}
	l.Free(&a, p)
	if _, _, ok := l.Take(1); ok {
		t.Fatal("owner 1 still has allocations")
	}
	p, d, ok = l.Take(2)
	if !ok || p != p2 || d != 22 {
		t.Fatal("owner 2 lost its allocation")
	}
	l.Free(&a, p)
	if !l.Empty() || a.InUse() != 0 {
		t.Fatalf("list empty %v, arena in use %d", l.Empty(), a.InUse())
	}
}

func TestNewRejectsPointerTypes(t *testing.T) {
	var a arena.Arena
	a.Init(nil)
	defer a.Release()
	var l List
	if p := New[*int](&l, &a, 1, 0); p != nil {
		t.Fatal("a pointer type was placed in arena memory")
	}
	type pt struct{ X, Y float64 }
	p := New[pt](&l, &a, 1, 0)
	if p == nil || p.X != 0 || uintptr(unsafe.Pointer(p))%16 != 0 {
		t.Fatalf("bad allocation %p", p)
	}
	p.X, p.Y = 1, 2
}

func TestAllocZeroAllocs(t *testing.T) {
	var a arena.Arena
	a.Init(nil)
	defer a.Release()
	var l List
	type pt struct{ X, Y float64 }
	New[pt](&l, &a, 1, 0) // warm the type cache and the arena
	p, _, _ := l.Take(1)
	l.Free(&a, p)
	allocs := allocs.Count(1000, func() {
		q := New[pt](&l, &a, 7, 0)
		q.X = 1
		p, _, _ := l.Take(7)
		l.Free(&a, p)
	})
	if allocs != 0 {
		t.Fatalf("%d allocations in 1000 stack allocations, want 0", allocs)
	}
}

// A size whose header does not fit with it in a uintptr panics: it used to
// wrap to a small block whose header then overran the arena's next block.
func TestAllocSizeOverflowPanics(t *testing.T) {
	var a arena.Arena
	a.Init(nil)
	defer a.Release()
	var l List
	defer func() {
		if p := recover(); p != "stackalloc: bad allocation size" {
			t.Fatalf("recovered %v, want the bad size panic", p)
		}
	}()
	l.Alloc(&a, ^uintptr(0)-15, 1, 1)
	t.Fatal("Alloc returned")
}
