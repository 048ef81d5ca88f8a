package ffi

/*
#include "foreign.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// Synchronization across the binary interface (FTN12 2.7.3), both ways: a
// FutoInSync implemented in C guards stepvm flows through addSync, and the
// Go primitives (vm.Mutex, vm.Throttle, vm.Limiter, any vm.ISync) are
// handed to C as a FutoInSync for addSync.

// Sync returns a FutoInSync* naming s, for C code to pass to addSync. The
// record lives in off-heap memory until ReleaseSync. Its lock and unlock
// functions, meant for foreign AsyncSteps implementations, are not
// supported: the VM's primitives admit flows only through Sync, and a call
// to them fails the calling step with InternalError (lock called by a
// foreign engine refuses through the engine's handle_error, and its unlock
// then does nothing).
func Sync(s vm.ISync) unsafe.Pointer {
	if s == nil {
		return nil
	}
	syncs.mu.Lock()
	defer syncs.mu.Unlock()
	var i uint32
	if syncs.free.n > quarantine { // C may keep an expired record: it must stay expired
		i = syncs.free.pop()
	} else {
		if !syncs.init {
			syncs.mem.Init(nil)
			syncs.list = append(syncs.list, syncEntry{}) // index 0 stays unused
			syncs.init = true
		}
		i = uint32(len(syncs.list))
		rec := (*C.stepvm_sync)(syncs.mem.Alloc(C.sizeof_stepvm_sync))
		rec.base.api = &C.stepvm_sync_api
		rec.idx = C.uint32_t(i)
		syncs.list = append(syncs.list, syncEntry{rec: rec, gen: 1})
	}
	se := &syncs.list[i]
	se.s = s
	se.rec.gen = C.uint32_t(se.gen)
	return unsafe.Pointer(se.rec)
}

// WrapSync returns the primitive a FutoInSync* names, for Go flows to sync
// on: the Go primitive of a record Sync returned, or an adapter of a
// FutoInSync implemented in C. It returns nil for nil, for an expired
// record, and for a FutoInSync whose lock or unlock is NULL.
func WrapSync(p unsafe.Pointer) vm.ISync {
	if p == nil || (*C.FutoInSync)(p).api == nil {
		return nil
	}
	s, _ := syncObject((*C.FutoInSync)(p))
	return s
}

// ReleaseSync ends the record Sync returned; later uses of it from C are
// misuse, detected as long as C keeps it across fewer than 512 other
// releases (the record's memory is reused only then, as that of an expired
// FutoInAsyncSteps). Releasing nil or an expired record does nothing.
func ReleaseSync(p unsafe.Pointer) {
	syncs.mu.Lock()
	defer syncs.mu.Unlock()
	if se := syncAt((*C.FutoInSync)(p)); se != nil {
		se.s = nil
		se.gen++
		syncs.free.push(uint32(se.rec.idx))
	}
}

type syncEntry struct {
	rec *C.stepvm_sync
	gen uint32
	s   vm.ISync
}

var syncs struct {
	mu   sync.Mutex
	list []syncEntry
	free ring[uint32]
	mem  arena.Arena
	init bool
}

// syncAt returns the live entry of a stepvm FutoInSync. syncs.mu is held.
func syncAt(p *C.FutoInSync) *syncEntry {
	if p == nil || p.api != &C.stepvm_sync_api {
		return nil
	}
	rec := (*C.stepvm_sync)(unsafe.Pointer(p))
	i := int(rec.idx)
	if i <= 0 || i >= len(syncs.list) {
		return nil
	}
	if se := &syncs.list[i]; se.rec == rec && se.gen == uint32(rec.gen) && se.s != nil {
		return se
	}
	return nil
}

// syncObject returns the primitive a FutoInSync names: a Go one Sync
// handed out, or an adapter of one implemented in C.
func syncObject(p *C.FutoInSync) (vm.ISync, string) {
	if p.api == &C.stepvm_sync_api {
		syncs.mu.Lock()
		defer syncs.mu.Unlock()
		if se := syncAt(p); se != nil {
			return se.s, ""
		}
		return nil, " with a FutoInSync that has been released"
	}
	if lockOf(p) == nil || unlockOf(p) == nil {
		return nil, " with a FutoInSync whose lock or unlock is NULL"
	}
	return cSync{p}, ""
}

// cSync runs sections of stepvm flows under a FutoInSync implemented in C,
// with the protocol of the reference implementation: lock is called from a
// step of the flow and either returns (entered), makes the step wait and
// completes it later (queued), or raises an error as it runs (refused);
// unlock is called once the section ends, however it ends, and also when a
// flow leaves while queued, which the primitive must accept, but never after
// a refused lock: the flow holds nothing, and the primitive could not tell
// that unlock from one ending a section the same flow holds further out
// (FTN12 1.11.4 lets it refuse reentrance). A queued lock that later fails
// is unlocked: the primitive failing its waiter, and a timeout or cancel of
// the flow reaching the waiting step, look alike from here, and a waiter
// left in the queue would be granted a section no one ends.
//
// lock and unlock get FutoInAsyncSteps of different steps (the step that
// locks, and the one around it or its cancel handler that unlocks), so a C
// primitive must match them by the flow's rootId, as the reference Mutex
// does, not by the pointer. Each parallel branch has a rootId of its own
// (FTN12 1.11.4: branches are separate owners; vm.RootID).
type cSync struct{ p *C.FutoInSync }

func (cs cSync) Sync(as vm.AsyncSteps, fn vm.ExecFunc, onError vm.ErrorFunc) {
	if f := vm.ForeignOf(as); f != nil {
		// A foreign flow runs on no loop to call lock and unlock for: the
		// engine's addSync guards it, as Sync through the handle does.
		f.Sync(cs, fn, onError)
		return
	}
	as.Add(func(as vm.AsyncSteps, args vm.Args) {
		vals := args.Values()
		owed := false // lock was called and not refused: unlock is owed
		unlock := func(as vm.AsyncSteps) {
			if owed {
				owed = false
				if p := cs.call(as, unlockOf(cs.p)); p != nil {
					panic(p)
				}
			}
		}
		as.SetCancel(unlock) // runs when the section is left by error, Break or cancel
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			owed = true
			if p := cs.call(as, lockOf(cs.p)); p != nil {
				// handle_error (or breakLoop, continueLoop) unwinds:
				// refused. A misuse (an *Error: success twice) may
				// follow an entry.
				_, misuse := p.(*vm.Error)
				owed = misuse || !vm.IsUnwinding(p)
				panic(p)
			}
		})
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vals...) })
		as.Add(fn, onError)
		as.Add(func(as vm.AsyncSteps, args vm.Args) {
			unlock(as)
			as.Success(args.Values()...)
		})
	})
}

// lockOf and unlockOf read the FutoInSyncAPI entries, which cgo cannot name
// in their anonymous union.
func lockOf(p *C.FutoInSync) C.stepvm_sync_fn {
	return C.stepvm_sync_fn((*[2]unsafe.Pointer)(unsafe.Pointer(p.api))[0])
}

func unlockOf(p *C.FutoInSync) C.stepvm_sync_fn {
	return C.stepvm_sync_fn((*[2]unsafe.Pointer)(unsafe.Pointer(p.api))[1])
}

// call runs lock or unlock for the frame as and returns what it raised,
// for the caller to raise once it has looked at it.
func (cs cSync) call(as vm.AsyncSteps, f C.stepvm_sync_fn) any {
	ls := loopOf(as.Tool())
	bsi := bindFrame(ls, as)
	s := ls.enter(as)
	C.stepvm_call_sync(f, recordArg(bsi), C.uintptr_t(uintptr(unsafe.Pointer(cs.p))), ls.id)
	p := ls.leave(s)
	return p
}

//export stepvmSyncLock
func stepvmSyncLock(bsi *C.FutoInAsyncSteps, p *C.FutoInSync, cur C.uint32_t) {
	const info = "lock of a stepvm synchronization primitive: they admit flows through addSync only"
	if bsi != nil && bsi.api != nil && bsi.api != &C.stepvm_api {
		// A foreign engine's step, its caller: refused through the engine,
		// as the protocol refuses, or the engine would take the return for
		// an entry. (The loop of cur, if any, runs another flow's C call.)
		if fxHas(bsi, C.stepvm_fx_handle_error_i) {
			ccode, cinfo := C.CString(vm.InternalError), C.CString(info)
			C.stepvm_fx_handle_error(bsi, ccode, cinfo)
			freeString(ccode)
			freeString(cinfo)
		}
		return
	}
	c := callback{ls: loopByID(cur)}
	c.misuse(info)
}

//export stepvmSyncUnlock
func stepvmSyncUnlock(bsi *C.FutoInAsyncSteps, p *C.FutoInSync, cur C.uint32_t) {
	if bsi != nil && bsi.api != nil && bsi.api != &C.stepvm_api {
		return // a foreign engine's: its lock was refused, nothing is held
	}
	c := callback{ls: loopByID(cur)}
	c.misuse("unlock of a stepvm synchronization primitive: they admit flows through addSync only")
}
