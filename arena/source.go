package arena

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slabSize is the unit in which the source maps memory for chunks of up to
// slabSize bytes; larger chunks get a mapping of their own.
const slabSize = 1 << 20

// The source is the process-wide supply of chunks: power-of-two blocks of at
// least firstChunk bytes, carved from slabs or mapped on their own. Chunks
// that come back go onto per-size free lists; they are never unmapped, split
// or merged. Reuse alone bounds the mapped total by one slab plus the sum,
// over chunk sizes, of the peak bytes of that size held at once, whereas
// unmapping would need coalescing and would make the kernel work whenever
// arenas come and go.
//
// src.mu guards everything but the statistics, which are atomic so that
// ReadSourceStats needs no lock.
var src struct {
	mu   sync.Mutex
	free [bits.UintSize]*freeChunk // free[k] lists idle chunks of 1<<k bytes
	slab unsafe.Pointer            // uncarved rest of the current slab
	left uintptr                   // bytes at slab

	mapped atomic.Int64
	idle   atomic.Int64
}

// freeChunk overlays the first word of an idle chunk. The link is a pointer
// to off-heap memory, which the garbage collector ignores.
type freeChunk struct {
	next *freeChunk
}

// SourceStats describes the process-wide chunk source.
// Mapped-Idle is the chunk memory currently held by all arenas.
type SourceStats struct {
	Mapped int64 // bytes obtained from the OS; never decreases
	Idle   int64 // bytes sitting in the source: free lists and the uncarved rest of the current slab
}

// ReadSourceStats returns the statistics of the chunk source.
// It may be called from any goroutine. The fields are read separately, so
// they are consistent with each other only while no chunk changes hands.
func ReadSourceStats() SourceStats {
	return SourceStats{Mapped: src.mapped.Load(), Idle: src.idle.Load()}
}

// getChunk returns a chunk of size bytes, a power of two >= firstChunk.
// Its contents are undefined.
func getChunk(size uintptr) unsafe.Pointer {
	k := bits.TrailingZeros(uint(size))
	src.mu.Lock()
	p := unsafe.Pointer(src.free[k])
	switch {
	case p != nil:
		src.free[k] = src.free[k].next
	case size > slabSize:
		src.mu.Unlock()
		return mmap(size)
	default:
		if src.left < size {
			// Keep the tail of the old slab as idle chunks: it is a sum
			// of powers of two >= firstChunk since every chunk carved is.
			for src.left > 0 {
				n := uintptr(1) << (bits.Len(uint(src.left)) - 1)
				pushFree(src.slab, n)
				src.slab = unsafe.Add(src.slab, n)
				src.left -= n
			}
			src.slab, src.left = mmap(slabSize), slabSize
			src.idle.Add(slabSize)
		}
		p = src.slab
		src.slab = unsafe.Add(src.slab, size)
		src.left -= size
	}
	src.mu.Unlock()
	src.idle.Add(-int64(size))
	return p
}

// putChunk returns a chunk obtained from getChunk(size) to the source.
func putChunk(p unsafe.Pointer, size uintptr) {
	src.mu.Lock()
	pushFree(p, size)
	src.mu.Unlock()
	src.idle.Add(int64(size))
}

// pushFree adds the chunk p of size bytes to its free list. src.mu is held.
func pushFree(p unsafe.Pointer, size uintptr) {
	k := bits.TrailingZeros(uint(size))
	c := (*freeChunk)(p)
	c.next = src.free[k]
	src.free[k] = c
}

// mmap maps size bytes of private anonymous memory. Running out of address
// space or memory is fatal to the VM, hence the panic.
func mmap(size uintptr) unsafe.Pointer {
	p, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		panic("arena: mmap: " + err.Error())
	}
	src.mapped.Add(int64(size))
	return p
}
