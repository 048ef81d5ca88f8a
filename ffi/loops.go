package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"

	"github.com/stepvm/stepvm/vm"
)

// loopState is what package ffi keeps per event loop. Like the loop, it
// belongs to the loop's goroutine.
type loopState struct {
	l  *vm.Loop
	id C.uint32_t // what C code running for this loop reports; see ffi.h

	// The innermost C call made for this loop: the frame it runs for (zero
	// when it is not a step), the values lent to it, which of them it
	// passed on, and the first panic a call back into stepvm recovered,
	// raised again once the C function returns. While stash is set, calls
	// back into stepvm are ignored: Go code would not have run them.
	frame     vm.AsyncSteps
	lent      vm.Args
	forwarded uint8
	stash     any

	roots   map[vm.AsyncSteps]*rootInfo
	spare   []*rootInfo
	sweepAt int

	tasks     []*task
	freeTasks []uint32

	free ring // records this loop released, oldest first
}

// loopReg maps loops to their state, and ids (as C reports them) to states.
// Entries are never removed: a loop that ran C code stays reachable, with
// its state, for the life of the process. Loops are meant to live that long.
var loopReg struct {
	m    sync.Map // *vm.Loop -> *loopState
	mu   sync.Mutex
	byID atomic.Pointer[[]*loopState] // index id-1
}

// lastLoop caches the state loopOf returned last: most programs run one
// loop, or one per goroutine, so it mostly saves a map lookup.
var lastLoop atomic.Pointer[loopState]

// loopOf returns the state of l, creating it on first use.
func loopOf(l *vm.Loop) *loopState {
	if ls := lastLoop.Load(); ls != nil && ls.l == l {
		return ls
	}
	if v, ok := loopReg.m.Load(l); ok {
		ls := v.(*loopState)
		lastLoop.Store(ls)
		return ls
	}
	loopReg.mu.Lock()
	defer loopReg.mu.Unlock()
	if v, ok := loopReg.m.Load(l); ok {
		return v.(*loopState)
	}
	var ids []*loopState
	if p := loopReg.byID.Load(); p != nil {
		ids = *p
	}
	ls := &loopState{l: l, id: C.uint32_t(len(ids) + 1), roots: make(map[vm.AsyncSteps]*rootInfo), sweepAt: minSweep}
	grown := append(ids[:len(ids):len(ids)], ls)
	loopReg.byID.Store(&grown)
	loopReg.m.Store(l, ls)
	return ls
}

// loopByID returns the state C code reported, or nil for 0 (no ffi call
// runs on this thread).
func loopByID(id C.uint32_t) *loopState {
	if id == 0 {
		return nil
	}
	ids := *loopReg.byID.Load()
	if int(id) > len(ids) {
		return nil
	}
	return ids[id-1]
}

// callSave is what a C call replaces in its loop's state.
type callSave struct {
	frame     vm.AsyncSteps
	lent      vm.Args
	forwarded uint8
	stash     any
}

// enter records the start of a C call for frame (zero if none) with the
// values lent to it.
func (ls *loopState) enter(frame vm.AsyncSteps, lent vm.Args) callSave {
	s := callSave{ls.frame, ls.lent, ls.forwarded, ls.stash}
	ls.frame, ls.lent, ls.forwarded, ls.stash = frame, lent, 0, nil
	return s
}

// leave ends a C call and returns what it stashed and which lent values
// it passed on.
func (ls *loopState) leave(s callSave) (stash any, forwarded uint8) {
	stash, forwarded = ls.stash, ls.forwarded
	ls.frame, ls.lent, ls.forwarded, ls.stash = s.frame, s.lent, s.forwarded, s.stash
	return stash, forwarded
}

// settle ends a C call and raises what it stashed: Error, Break, Continue
// or a misuse, taking effect as the C function returns.
func (ls *loopState) settle(s callSave) {
	if p, _ := ls.leave(s); p != nil {
		panic(p)
	}
}

// callback is the context of a call from C into stepvm.
type callback struct {
	ls *loopState // loop of the ffi call running on this thread; nil if none
}

// begin starts a call from C through bsi: it resolves the record, and
// reports a bad one as misuse. It returns a nil entry when the call must do
// nothing: the record is bad, or the C function has already raised
// something and must return.
func begin(bsi *C.FutoInAsyncSteps, cur C.uint32_t, what string) (callback, *entry) {
	c := callback{loopByID(cur)}
	if c.ls != nil && c.ls.stash != nil {
		return c, nil
	}
	e, bad := lookup(bsi)
	if e == nil {
		c.misuse(what + bad)
	}
	return c, e
}

// misuse fails the C call running on this thread with InternalError. With
// no ffi call running, as when Go code calls C directly, there is no flow
// to fail, and the call is ignored, as misuse of an idle root from Go is.
func (c callback) misuse(info string) {
	if c.ls != nil && c.ls.stash == nil {
		c.ls.stash = &vm.Error{Code: vm.InternalError, Info: info}
	}
}

// done is deferred by every call from C: it catches what the VM raised
// (Error, Break, Continue unwind by panicking) so that no panic crosses C
// frames, and stashes it for the Go function that called C.
func (c callback) done() {
	if p := recover(); p != nil && c.ls != nil && c.ls.stash == nil {
		c.ls.stash = p
	}
}
