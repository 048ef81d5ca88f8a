package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
	"github.com/stepvm/stepvm/vm"
)

// What a record names.
const (
	kindFrame    uint8 = iota + 1 // a live frame: running step, handler, iteration
	kindRoot                      // a root
	kindAccessor                  // a parallel accessor
)

// entry is the Go side of one stepvm_bsi record, at the same index. gen
// matches the record's gen while the record is valid; it is atomic only so
// that a stale record used from a foreign thread is detected without a data
// race. The other fields belong to the goroutine of ls's loop.
type entry struct {
	gen  atomic.Uint32
	idx  uint32
	kind uint8
	rec  *C.stepvm_bsi
	as   vm.AsyncSteps
	ls   *loopState
	res  vm.Resumer // set once the step waits: lets foreign threads complete it
}

func (e *entry) bsi() *C.FutoInAsyncSteps { return (*C.FutoInAsyncSteps)(unsafe.Pointer(e.rec)) }

const (
	blockSize = 256
	// quarantine is how many released records wait before one is reused
	// (per loop, and in the process-wide table), so that a stale record is
	// detected rather than naming another step.
	quarantine = 2 * blockSize
)

type block [blockSize]entry

// records is the process-wide table of records. Blocks never move: an
// entry's address is stable, and readers need only load the block list.
var records struct {
	blocks atomic.Pointer[[]*block]

	mu   sync.Mutex
	free ring // released indexes, oldest first
	mem  arena.Arena
	init bool
}

// ring is a FIFO of uint32 that grows as needed.
type ring struct {
	buf  []uint32
	head int
	n    int
}

func (q *ring) push(v uint32) {
	if q.n == len(q.buf) {
		buf := make([]uint32, max(2*len(q.buf), 1024))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

func (q *ring) pop() uint32 {
	v := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v
}

// newEntry takes a record for as, of the given kind, on ls's loop. Each
// loop recycles the records it released itself, without locking, once
// enough of them wait; until then it takes fresh ones from the process-wide
// table.
func newEntry(ls *loopState, as vm.AsyncSteps, kind uint8) *entry {
	var idx uint32
	if ls.free.n > quarantine {
		idx = ls.free.pop()
	} else {
		records.mu.Lock()
		for records.free.n <= quarantine {
			growRecords()
		}
		idx = records.free.pop()
		records.mu.Unlock()
	}
	e := entryAt(idx)
	e.kind, e.as, e.ls = kind, as, ls
	e.rec.gen = C.uint32_t(e.gen.Load())
	return e
}

// release invalidates e's record and queues it for reuse by its loop.
func (e *entry) release() {
	ls := e.ls
	e.gen.Add(1)
	e.as, e.ls, e.res, e.kind = vm.AsyncSteps{}, nil, vm.Resumer{}, 0
	ls.free.push(e.idx)
}

// growRecords adds a block of records. records.mu is held.
func growRecords() {
	if !records.init {
		records.mem.Init(nil)
		records.init = true
	}
	var blocks []*block
	if p := records.blocks.Load(); p != nil {
		blocks = *p
	}
	b := new(block)
	mem := records.mem.Alloc(blockSize * C.sizeof_stepvm_bsi)
	base := uint32(len(blocks)) * blockSize
	for i := range b {
		e := &b[i]
		e.idx = base + uint32(i)
		e.rec = (*C.stepvm_bsi)(unsafe.Add(mem, i*C.sizeof_stepvm_bsi))
		e.rec.base.api = &C.stepvm_api
		e.rec.idx = C.uint32_t(e.idx)
		e.gen.Store(1)
		if e.idx != 0 { // index 0 stays unused: a zeroed record is never valid
			records.free.push(e.idx)
		}
	}
	grown := append(blocks[:len(blocks):len(blocks)], b)
	records.blocks.Store(&grown)
}

func entryAt(idx uint32) *entry {
	blocks := *records.blocks.Load()
	return &blocks[idx/blockSize][idx%blockSize]
}

// Why a FutoInAsyncSteps pointer was refused.
const (
	badNone    = ""
	badNull    = " with a NULL FutoInAsyncSteps"
	badForeign = " with a FutoInAsyncSteps that is not stepvm's"
	badStale   = " through a FutoInAsyncSteps whose step or root has ended"
)

// lookup returns the entry of a record, or why it cannot.
func lookup(bsi *C.FutoInAsyncSteps) (*entry, string) {
	if bsi == nil {
		return nil, badNull
	}
	if bsi.api != &C.stepvm_api {
		return nil, badForeign
	}
	rec := (*C.stepvm_bsi)(unsafe.Pointer(bsi))
	idx := uint32(rec.idx)
	p := records.blocks.Load()
	if p == nil || idx == 0 || int(idx/blockSize) >= len(*p) {
		return nil, badStale
	}
	e := &(*p)[idx/blockSize][idx%blockSize]
	if e.rec != rec || e.gen.Load() != uint32(rec.gen) {
		return nil, badStale
	}
	return e, badNone
}
