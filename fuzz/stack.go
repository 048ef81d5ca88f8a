package fuzz

import (
	"fmt"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/fuzz/prog"
	"github.com/stepvm/stepvm/vm"
)

// Stack memory. Every allocation is checked zeroed when made, filled with
// a pattern of its own, and checked intact when its step ends. StackRaw
// takes a destroy callback, which traces the "free" event; vm.Stack takes
// none, so a typed allocation is made between two StackRaw sentinels of
// its step, whose callbacks run newest first around its release: the
// newer one checks the typed memory is still intact and notes the arena
// bytes in use, the older one that the arena got back the bytes of the
// typed allocation and of the newer sentinel in between, and traces the
// event. A typed allocation that outlives its step's end (or dies before
// it) thus shows as a harness failure, or as a trace the model does not
// make.

// stack allocates the memory of statement s for the step id.
func (h *harness) stack(rr *rootRun, as vm.AsyncSteps, id string, s *prog.Stack) {
	free := func() { h.emit(rr, prog.FreeEvent(id, s)) }
	if s.Type == prog.StackRaw {
		h.stackRaw(as, id, s.Size, free)
		return
	}
	typed, ok := typedStacks[s.Size]
	if !ok {
		panic(fmt.Sprintf("harness: no type of %d bytes for vm.Stack", s.Size)) // Parse rejects such programs
	}
	var sentinel, size, inUse int64 // arena bytes: of the newer sentinel, of the typed allocation, in use before both are freed
	h.stackRaw(as, id, 0, func() {
		if freed := inUse - h.arenaInUse(); freed != sentinel+size {
			h.fail("stack %s memory of %s not freed when its step ended: the arena got back %d bytes, want %d",
				s.Type.String(), id, freed, sentinel+size)
		}
		free()
	})
	before := h.arenaInUse()
	intact := typed[s.Type-prog.StackArray](h, as, id)
	size = h.arenaInUse() - before
	if s.Type == prog.StackArray && size < int64(s.Size) {
		h.fail("stack array %d of %s took %d bytes of the arena (vm.Stack serves a pointer-free type from it)", s.Size, id, size)
	}
	before = h.arenaInUse()
	h.stackRaw(as, id, 0, func() {
		intact()
		inUse = h.arenaInUse()
	})
	sentinel = h.arenaInUse() - before
}

func (h *harness) arenaInUse() int64 { return h.loop.Stats().ArenaInUse }

// stackRaw allocates size bytes with StackRaw; free runs when they are
// destroyed, once checked.
func (h *harness) stackRaw(as vm.AsyncSteps, id string, size int, free func()) {
	var intact func()
	var p unsafe.Pointer
	p = as.StackRaw(size, func(q unsafe.Pointer) {
		if q != p {
			h.fail("stack memory of %s handed to its destructor is not the allocation", id)
		}
		intact()
		free()
	})
	if p == nil {
		h.fail("StackRaw(%d) in %s returned nil", size, id)
		return
	}
	intact = h.filled(id, unsafe.Slice((*byte)(p), size))
}

// fill checks that mem is zeroed and fills it with a pattern of its own.
func (h *harness) fill(id string, mem []byte) (pattern byte) {
	h.allocs++
	pattern = h.allocs | 1
	for i, b := range mem {
		if b != 0 {
			h.fail("stack memory of %s not zeroed at byte %d", id, i)
			break
		}
	}
	for i := range mem {
		mem[i] = pattern
	}
	return pattern
}

// intact checks that mem still holds the pattern fill wrote.
func (h *harness) intact(id string, mem []byte, pattern byte) {
	for i, b := range mem {
		if b != pattern {
			h.fail("stack memory of %s overwritten at byte %d of %d", id, i, len(mem))
			return
		}
	}
}

// filled fills arena memory and returns the check that it is intact.
func (h *harness) filled(id string, mem []byte) (intact func()) {
	pattern := h.fill(id, mem)
	return func() { h.intact(id, mem, pattern) }
}

// typedStacks allocate with vm.Stack a type of each size of
// prog.StackSizes: [0] a pointer-free one, [1] one with Go pointers.
// Each returns a check that the memory is intact.
var typedStacks = map[int][2]func(*harness, vm.AsyncSteps, string) func(){
	1:    {stackArray[[1]byte], stackPointers[[1]byte]},
	8:    {stackArray[[8]byte], stackPointers[[8]byte]},
	24:   {stackArray[[24]byte], stackPointers[[24]byte]},
	64:   {stackArray[[64]byte], stackPointers[[64]byte]},
	100:  {stackArray[[100]byte], stackPointers[[100]byte]},
	4096: {stackArray[[4096]byte], stackPointers[[4096]byte]},
}

// stackArray allocates an A, an array of bytes, with vm.Stack.
func stackArray[A any](h *harness, as vm.AsyncSteps, id string) func() {
	p := vm.Stack[A](as)
	if p == nil {
		h.fail("vm.Stack in %s returned nil", id)
		return func() {}
	}
	return h.filled(id, bytesOf(p))
}

// withPointers is a type of vm.Stack with Go pointers: the VM must keep it
// reachable while its step lives. The harness keeps only a weak pointer to
// it, and fills ref and name with objects of the Go heap.
type withPointers[A any] struct {
	ref  *int
	name string
	data A
}

// stackPointers allocates a withPointers[A] with vm.Stack.
func stackPointers[A any](h *harness, as vm.AsyncSteps, id string) func() {
	p := vm.Stack[withPointers[A]](as)
	if p == nil {
		h.fail("vm.Stack in %s returned nil", id)
		return func() {}
	}
	if p.ref != nil || p.name != "" {
		h.fail("stack pointers memory of %s not zeroed", id)
	}
	pattern := h.fill(id, bytesOf(&p.data))
	n := int(pattern)
	name := fmt.Sprintf("%s/%d", id, n)
	p.ref, p.name = new(int), name
	*p.ref = n
	w := weak.Make(p) // what the check keeps must not keep p reachable
	return func() {
		p := w.Value()
		if p == nil {
			h.fail("stack pointers memory of %s collected while its step lives", id)
			return
		}
		if p.ref == nil || *p.ref != n || p.name != name {
			h.fail("stack pointers memory of %s overwritten: its pointers no longer hold what was stored", id)
		}
		h.intact(id, bytesOf(&p.data), pattern)
	}
}

// bytesOf is the memory of *p.
func bytesOf[T any](p *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p)) }
