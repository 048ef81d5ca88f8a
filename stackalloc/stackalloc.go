// Package stackalloc serves FTN12 1.14 stack allocations: memory that lives
// exactly as long as the step that asked for it, carved from the root's
// arena instead of the GC heap.
//
// A List records live allocations from an arena, newest first, each
// tagged with its owner (the vm keeps a List per thread of a flow, the
// root's and each parallel branch's, and names the owning frame by its
// link and stamp). When a step ends, the vm takes its allocations off the list newest first,
// runs their destroy callbacks, and frees them: the innermost-first order
// FTN12 asks of destructors.
//
// Arena memory is invisible to the garbage collector, so only pointer-free
// types may live there; HasPointers tells which types qualify.
package stackalloc

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
)

// header precedes every allocation in arena memory.
type header struct {
	next    *header
	owner   uint64
	size    uintptr // bytes including the header
	destroy uint32  // caller's token for the destroy callback, 0 for none
	_       uint32
}

const headerSize = unsafe.Sizeof(header{})

// List is a set of live allocations from one arena. The zero List is empty.
// A List is used by one goroutine at a time, like its arena.
type List struct{ head *header }

// Bytes returns what Alloc asks of the arena for size bytes: the size with
// its header.
func Bytes(size uintptr) uintptr { return headerSize + size }

// Alloc returns size zeroed bytes from a, 16-byte aligned, owned by owner.
// destroy is stored with the allocation and handed back by Take. A size
// whose header would not fit in a uintptr with it panics, as a size the
// arena cannot hold does there.
func (l *List) Alloc(a *arena.Arena, size uintptr, owner uint64, destroy uint32) unsafe.Pointer {
	total := headerSize + size
	if total < size {
		panic("stackalloc: bad allocation size")
	}
	h := (*header)(a.Alloc(total))
	h.next, h.owner, h.size, h.destroy = l.head, owner, total, destroy
	l.head = h
	return unsafe.Add(unsafe.Pointer(h), headerSize)
}

// Take unlinks the newest allocation of owner and returns it with its
// destroy token. The memory stays valid until Free, so a destroy callback
// can still read it. ok is false when owner has no allocation left.
func (l *List) Take(owner uint64) (p unsafe.Pointer, destroy uint32, ok bool) {
	for link := &l.head; *link != nil; link = &(*link).next {
		h := *link
		if h.owner == owner {
			*link = h.next
			h.next = nil
			return unsafe.Add(unsafe.Pointer(h), headerSize), h.destroy, true
		}
	}
	return nil, 0, false
}

// Free returns an allocation obtained from Take to its arena.
func (l *List) Free(a *arena.Arena, p unsafe.Pointer) {
	h := (*header)(unsafe.Add(p, -int(headerSize)))
	a.Free(unsafe.Pointer(h), h.size)
}

// Len returns the number of live allocations, walking the list.
func (l *List) Len() int {
	n := 0
	for h := l.head; h != nil; h = h.next {
		n++
	}
	return n
}

// Empty reports whether no allocation is live.
func (l *List) Empty() bool { return l.head == nil }

// Reset forgets every allocation without freeing; for use when the arena
// itself is being reset.
func (l *List) Reset() { l.head = nil }

// New allocates a zero T owned by owner, or returns nil when T holds Go
// pointers and so must not live in arena memory.
func New[T any](l *List, a *arena.Arena, owner uint64, destroy uint32) *T {
	if HasPointers[T]() {
		return nil
	}
	var zero T
	return (*T)(l.Alloc(a, unsafe.Sizeof(zero), owner, destroy))
}

var pointerFree sync.Map // reflect.Type -> bool (true: has pointers)

// HasPointers reports whether a T holds any Go pointer (pointers, strings,
// slices, maps, channels, funcs, interfaces, unsafe.Pointer), directly or in
// a field or element. The answer is cached per type.
func HasPointers[T any]() bool {
	t := reflect.TypeFor[T]()
	if v, ok := pointerFree.Load(t); ok {
		return v.(bool)
	}
	has := typeHasPointers(t)
	pointerFree.Store(t, has)
	return has
}

func typeHasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && typeHasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if typeHasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
