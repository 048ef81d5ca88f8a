package ffi

/*
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The Go objects a foreign engine refers to: the functions of Go steps it
// runs, Go values it carries, the records that say when to drop them. C
// must not hold Go pointers, so each crosses as an id (the data pointer of
// a callback, the custom_data of a value): an index into fx.slots and a
// generation, so that an id the engine keeps after the object was dropped
// finds nothing rather than another object. Ids are never 0. The table is
// locked: foreign engines may call from any thread.
var fx struct {
	mu    sync.Mutex
	slots []fxSlot
	free  ring[uint32] // released indexes, oldest first: an index is reused late
}

type fxSlot struct {
	gen uint32
	v   any
}

// fxGenBits is the width of the generation in an id: 16 bits of 64, 8 of
// 32, the rest is the index.
const (
	fxGenBits = 8 * unsafe.Sizeof(uintptr(0)) / 4
	fxGenMask = 1<<fxGenBits - 1
)

// fxPut stores v and returns its id.
func fxPut(v any) uintptr {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	var i uint32
	if fx.free.n > 0 {
		i = fx.free.pop()
	} else {
		if len(fx.slots) == 0 {
			fx.slots = append(fx.slots, fxSlot{}) // index 0 stays unused
		}
		i = uint32(len(fx.slots))
		fx.slots = append(fx.slots, fxSlot{gen: 1})
	}
	s := &fx.slots[i]
	s.v = v
	return uintptr(i)<<fxGenBits | uintptr(s.gen)&fxGenMask
}

// fxSlotOf returns the live slot of id, or nil. fx.mu is held.
func fxSlotOf(id uintptr) *fxSlot {
	i := id >> fxGenBits
	if i == 0 || i >= uintptr(len(fx.slots)) {
		return nil
	}
	s := &fx.slots[i]
	if s.v == nil || uintptr(s.gen)&fxGenMask != id&fxGenMask {
		return nil
	}
	return s
}

// fxGet returns the object of id, or nil if it has been dropped.
func fxGet(id uintptr) any {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if s := fxSlotOf(id); s != nil {
		return s.v
	}
	return nil
}

// fxDel drops the object of id and returns it, or nil if it was dropped
// already.
func fxDel(id uintptr) any {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	s := fxSlotOf(id)
	if s == nil {
		return nil
	}
	v := s.v
	s.v = nil
	s.gen++
	fx.free.push(uint32(id >> fxGenBits))
	return v
}

// fxTakeCancel returns the cancel handler of id and empties it, so that
// it runs at most once however often the engine calls it. The entry stays
// for the record that owns it to drop: deleting it here would leave that
// record an id whose slot may be reused, its generation wrapped (8 bits on
// 32-bit platforms), by the time it is dropped.
func fxTakeCancel(id uintptr) (c fxCancel) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if s := fxSlotOf(id); s != nil {
		if p, ok := s.v.(*fxCancel); ok {
			c = *p
			*p = fxCancel{}
		}
	}
	return c
}

// fxRelease drops the object of id and what it owns.
func fxRelease(id uintptr) {
	switch v := fxDel(id).(type) {
	case *fxOwner:
		v.release()
	case *fxFlow:
		v.release()
	case *fxLoopBody:
		if v.label != nil {
			C.free(unsafe.Pointer(v.label))
		}
	}
}

// fxLive returns how many objects the table holds (for tests).
func fxLive() int {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	n := 0
	for _, s := range fx.slots {
		if s.v != nil {
			n++
		}
	}
	return n
}

// fxOwner owns the objects that calls through a foreign step (or through
// the flow's root) handed to the engine: the functions of the steps it
// added, its loop bodies, its cancel handler. A step's owner is named by
// memory the step's stack function gave, whose cleanup drops it when the
// step ends, after its sub-steps; a flow's is a state variable, dropped
// when the engine destroys the flow's state.
type fxOwner struct {
	ids  []uintptr
	dead bool
}

func (o *fxOwner) release() {
	o.dead = true
	ids := o.ids
	o.ids = nil
	for _, id := range ids {
		fxRelease(id)
	}
}

// fxFlow is what Go keeps per foreign flow, in the state variable
// fxFlowName: the Go-side State, and the objects calls through handles
// with no step to own them (the root) handed out.
type fxFlow struct {
	fxOwner
	state vm.State
}

// fxShared is the Go-side state a Go step of a foreign flow sees: the
// flow's record, or, when the engine offers no state variables, a State
// passed down from step to step.
type fxShared struct {
	flow  *fxFlow
	local *vm.State
}

// fxStep is a Go step (or the error handler of a parallel step) a foreign
// engine runs.
type fxStep struct {
	fxShared
	fn      vm.ExecFunc
	onError vm.ErrorFunc
}

// fxLoopBody is the body of a Go loop (loop) or repeat (repeat).
type fxLoopBody struct {
	fxShared
	loop   func(vm.AsyncSteps)
	repeat func(vm.AsyncSteps, int)
	label  *C.char // kept as long as the loop: the engine may keep the pointer
}

// fxCancel is a Go cancel handler.
type fxCancel struct {
	fxShared
	fn vm.CancelFunc
}

// fxStack is the destroy function of memory StackRaw got from the engine.
type fxStack struct{ destroy func(unsafe.Pointer) }

// fxValue is a Go value that a foreign engine carries from one step to the
// next as a custom object.
type fxValue struct{ v vm.Value }
