package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// What a record names.
// Kinds of record. Those from kindRoot on name their root weakly (see
// entry): resolve tells them apart with one compare.
const (
	kindFrame        uint8 = iota + 1 // a live frame: running step, handler, iteration
	kindAccessor                      // a parallel accessor bound to a frame
	kindRoot                          // a root
	kindRootAccessor                  // a parallel accessor bound to its root
)

// entry is the Go side of one stepvm_bsi record, at the same index. gen
// matches the record's gen while the record is valid. An entry belongs to
// the loop of its block: ls and rec are set as the block is lent to that
// loop and never change, so any thread that finds the block may read them.
// gen is atomic, and res is written under mu, so that a thread other than
// the loop's goroutine (a C thread completing an I/O, say) can tell a stale
// record and copy the Resumer of a waiting step without a data race (see
// resumer). Every other field belongs to the goroutine of ls's loop, which
// rewrites them as it releases the record and hands it out again: only
// that goroutine may read them (resolve).
//
// The record of a frame names it in as: the frame ends, and the record
// with it, whatever the program does. The records of a root and of the
// accessors bound to it name it weakly, through its rootInfo (ri, slot),
// so that they do not keep a root the program drops: once it has been
// collected they are stale, and its loop releases them (rootGone).
type entry struct {
	gen     atomic.Uint32
	idx     uint32
	kind    uint8
	waiting bool   // res is set; see res
	slot    int32  // kindRootAccessor: index in the rootInfo's accessors
	pos     uint32 // in ls's blocks; see releaseFrame
	mu      spin   // guards res
	rec     *C.stepvm_bsi
	ls      *loopState
	as      vm.AsyncSteps
	ri      weak.Pointer[rootInfo]

	// res is set once the step waits (waits) and cleared as the record is
	// released, both under mu, which release takes only then: a step that
	// never waits costs its loop no locking. Other threads read res, with
	// gen, only under mu. waiting tells the loop's goroutine, to which it
	// belongs, whether res is set: release, on the path of every record,
	// tests a byte in the entry's padding rather than the two words of a
	// Resumer.
	res vm.Resumer
}

// spin is a lock for sections of a few loads and stores: unlike a
// sync.Mutex, it fits in the padding of an entry, which keeps its size.
type spin struct{ v atomic.Uint32 }

func (s *spin) lock() {
	for !s.v.CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
}

func (s *spin) unlock() { s.v.Store(0) }

func (e *entry) bsi() *C.FutoInAsyncSteps { return (*C.FutoInAsyncSteps)(unsafe.Pointer(e.rec)) }

const (
	blockSize = 64
	// quarantine is how many released records wait before one is reused
	// (per loop, and, for records of collected loops, process-wide), so
	// that a stale record is detected rather than naming another step.
	quarantine = 512
)

// block holds the Go side of blockSize consecutive records. A block
// belongs to one loop, whose state holds it: its entries point at the
// loop's roots, so nothing global may hold a block, or the loop would
// never be collected. The process-wide directory refers to it weakly.
type block [blockSize]entry

// records is the process-wide directory of records, by block number. A
// number keeps its C memory for the life of the process; it is lent to one
// loop at a time, and given to another once that loop has been collected
// and enough other numbers have come back (quarantine). Readers need only
// load the directory: slots never move.
var records struct {
	slots atomic.Pointer[[]*blockSlot]

	mu    sync.Mutex
	spare ring[uint32] // numbers whose loop was collected, oldest first
	mem   arena.Arena
	init  bool
}

// blockSlot is one block number: the C memory of its records and the block
// of the loop it is lent to, if any.
type blockSlot struct {
	mem unsafe.Pointer
	cur atomic.Pointer[weak.Pointer[block]]
}

// ring is a FIFO that grows as needed.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *ring[T]) push(v T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 64))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

func (q *ring[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v
}

// newEntry takes a record for as, of the given kind, on ls's loop. Each
// loop recycles the records it released itself, without locking, once
// enough of them wait; until then it takes fresh ones from its blocks.
func newEntry(ls *loopState, as vm.AsyncSteps, kind uint8) *entry {
	var e *entry
	if ls.free.n > quarantine {
		e = ls.free.pop()
	} else {
		if len(ls.fresh) == 0 {
			ls.grow()
		}
		e = &ls.fresh[0]
		ls.fresh = ls.fresh[1:]
	}
	e.kind, e.as = kind, as
	e.rec.gen = C.uint32_t(e.gen.Load())
	return e
}

// release invalidates e's record and queues it for reuse by its loop.
func (e *entry) release() {
	if e.waiting {
		e.mu.lock()
		e.gen.Add(1)
		e.res = vm.Resumer{}
		e.mu.unlock()
		e.waiting = false
	} else {
		e.gen.Add(1)
	}
	e.as, e.ri, e.kind = vm.AsyncSteps{}, weak.Pointer[rootInfo]{}, 0
	e.ls.free.push(e)
}

// waits prepares a step that waits for an external event to be completed
// from another thread.
func (e *entry) waits() {
	if e.kind == kindFrame && !e.waiting {
		r := e.as.Resumer()
		e.mu.lock()
		e.res = r
		e.mu.unlock()
		e.waiting = r != vm.Resumer{}
	}
}

// resumer returns the Resumer of the step that e's record names while it
// is still gen, and whether it is: any thread. The Resumer is zero when
// the step does not wait, or the record names no step; one copied just
// before the step ended is refused by the VM (Resumer's own generation).
func (e *entry) resumer(gen uint32) (vm.Resumer, bool) {
	e.mu.lock()
	defer e.mu.unlock()
	if e.gen.Load() != gen {
		return vm.Resumer{}, false
	}
	return e.res, true
}

// finishAway completes, from a thread that is not the loop's, the step
// that e's record names while it is still gen: through res, the Resumer
// the record took when C made the step wait, or, with none (a Go step
// that waits through its handle), in the loop, which takes the step's
// Resumer then, as C's waitExternal would have, if the record still names
// the step. A step that does not wait then fails with InternalError, the
// misuse of taking its Resumer, and so does the flow of a record that
// names no step (a root's, an accessor's), which no other thread can tell
// (kind is the loop's); one that has ended is not touched.
func (e *entry) finishAway(gen uint32, res vm.Resumer, complete func(vm.Resumer)) {
	if res != (vm.Resumer{}) {
		complete(res)
		return
	}
	e.ls.l.Post(func() {
		if e.gen.Load() != gen {
			complete(vm.Resumer{}) // refused: the step has ended
			return
		}
		if e.kind != kindFrame {
			if as, ok := e.resolve(); ok {
				as.Resumer() // reports the misuse
			}
			complete(vm.Resumer{})
			return
		}
		e.waits()
		complete(e.res)
	})
}

// grow lends ls a block of records. Each starts invalid, one generation
// past the last its record had: a record C code kept from a collected
// loop stays stale until handed out anew.
func (ls *loopState) grow() {
	records.mu.Lock()
	n, s := takeSlot()
	records.mu.Unlock()
	b := new(block)
	k := uint32(len(ls.blocks))
	for i := range b {
		e := &b[i]
		e.idx, e.pos, e.ls = n*blockSize+uint32(i), k*blockSize+uint32(i), ls
		e.rec = (*C.stepvm_bsi)(unsafe.Add(s.mem, i*C.sizeof_stepvm_bsi))
		e.gen.Store(uint32(e.rec.gen) + 1)
	}
	w := weak.Make(b)
	s.cur.Store(&w)
	runtime.AddCleanup(b, blockGone, n)
	ls.blocks = append(ls.blocks, b)
	ls.fresh = b[:]
	if n == 0 {
		ls.fresh = b[1:] // record 0 stays unused: a zeroed record is never valid
	}
}

// takeSlot returns a block number to lend: one a collected loop gave
// back, if enough wait, or else a new one. records.mu is held.
func takeSlot() (uint32, *blockSlot) {
	if records.spare.n > quarantine/blockSize {
		n := records.spare.pop()
		return n, (*records.slots.Load())[n]
	}
	if !records.init {
		records.mem.Init(nil)
		records.init = true
	}
	var slots []*blockSlot
	if p := records.slots.Load(); p != nil {
		slots = *p
	}
	n := uint32(len(slots))
	s := &blockSlot{mem: records.mem.Alloc(blockSize * C.sizeof_stepvm_bsi)}
	for i := range blockSize {
		rec := (*C.stepvm_bsi)(unsafe.Add(s.mem, i*C.sizeof_stepvm_bsi))
		rec.base.api = &C.stepvm_api
		rec.idx = C.uint32_t(n*blockSize + uint32(i))
		rec.gen = 0
	}
	// Readers of the old directory read only below its length, so the
	// append may write in place.
	slots = append(slots, s)
	records.slots.Store(&slots)
	return n, s
}

// blockGone gives back the number of a block whose loop was collected.
func blockGone(n uint32) {
	records.mu.Lock()
	records.spare.push(n)
	records.mu.Unlock()
}

// blockOf returns the block that holds record idx, or nil if its loop
// has been collected.
func blockOf(idx uint32) *block {
	p := records.slots.Load()
	if p == nil || idx/blockSize >= uint32(len(*p)) {
		return nil
	}
	if w := (*p)[idx/blockSize].cur.Load(); w != nil {
		return w.Value()
	}
	return nil
}

// Why a FutoInAsyncSteps pointer was refused.
const (
	badNone    = ""
	badNull    = " with a NULL FutoInAsyncSteps"
	badForeign = " with a FutoInAsyncSteps that is not stepvm's"
	badStale   = " through a FutoInAsyncSteps whose step or root has ended"
	badAway    = " through a FutoInAsyncSteps of another loop, whose goroutine this is not"
)

// found is what locate found: the entry of a live record and the
// generation the record holds, or why there is none (e nil). It is one
// value so that a call from C starts with locate(bsi).begin(cur, what):
// two calls from the exported function, and resolve below begin. Every
// level of calls more costs each call from C a frame (a begin that called
// locate, then a helper that resolved a root's record, cost the Simple
// workload's add 35 instructions).
type found struct {
	e   *entry
	gen uint32
	bad string
}

// locate returns the entry of a live record and the generation the record
// holds, or why it cannot. Any thread: it reads only the directory, what
// is fixed once a block is lent (rec, ls) and the generation. The record's
// gen is C memory the loop rewrites as it hands the record out; a thread
// that uses a record the loop has released reads it racily, but it is one
// word, so it reads a value that was written there: an old one, stale, or
// that of the record's next use, after 512 others (see the package
// documentation, Memory).
func locate(bsi *C.FutoInAsyncSteps) found {
	if bsi == nil {
		return found{bad: badNull}
	}
	if bsi.api != &C.stepvm_api {
		return found{bad: badForeign}
	}
	rec := (*C.stepvm_bsi)(unsafe.Pointer(bsi))
	idx := uint32(rec.idx)
	b := blockOf(idx)
	if b == nil {
		return found{bad: badStale}
	}
	e := &b[idx%blockSize]
	gen := uint32(rec.gen)
	if e.rec != rec || e.gen.Load() != gen {
		return found{bad: badStale}
	}
	return found{e: e, gen: gen}
}

// lookup returns the entry of a record and the handle it names, or why it
// cannot. A root's handle is held from here on: the root cannot be
// collected during the call. Loop goroutine only (resolve).
func lookup(bsi *C.FutoInAsyncSteps) (*entry, vm.AsyncSteps, string) {
	f := locate(bsi)
	if f.e == nil {
		return nil, vm.AsyncSteps{}, f.bad
	}
	as, ok := f.e.resolve()
	if !ok {
		return nil, vm.AsyncSteps{}, badStale
	}
	return f.e, as, badNone
}

// resolve returns the handle e names; ok is false for a root the program
// dropped, which its loop has yet to release the record of. Loop goroutine
// only: it reads what the loop writes as it hands out and releases
// records. It inlines: it is on every call's path (begin).
func (e *entry) resolve() (as vm.AsyncSteps, ok bool) {
	if e.kind < kindRoot {
		return e.as, true
	}
	return e.resolveRoot()
}

// resolveRoot is resolve for the records that name a root weakly.
func (e *entry) resolveRoot() (vm.AsyncSteps, bool) {
	ri := e.ri.Value()
	if ri == nil {
		return vm.AsyncSteps{}, false
	}
	return ri.handle(e.slot), true
}

// away reports whether the calling thread is not the goroutine of e's
// loop, cur being the loop of the ffi call running on it (0: none). A C
// call of e's loop tells at once; anything else costs IsSameThread.
func (e *entry) away(cur C.uint32_t) bool {
	return cur != e.ls.id && e.ls.elsewhere()
}

// elsewhere reports whether the caller is not the loop's goroutine. It
// stays out of line so that away, on the path of every C step's success,
// is inlined.
//
//go:noinline
func (ls *loopState) elsewhere() bool { return !ls.l.IsSameThread() }
