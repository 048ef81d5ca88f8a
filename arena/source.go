package arena

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slabSize is the unit in which the source takes memory for chunks of up to
// slabSize bytes from the region; larger chunks get a mapping of their own.
const slabSize = 1 << 20

// pageSize is the OS's, to which the chunks larger than a slab are rounded.
var pageSize = uintptr(unix.Getpagesize())

// The region is one reservation of address space that every slab is
// committed from, so that any block of a bump chunk (every block of up to
// maxClass bytes, and every fixed block) is named by a 32-bit [Link]: its
// distance from the region's base in 16-byte units. The VM links its nodes
// with Links instead of pointers: a store of a Link into arena memory is a
// plain store, where a store of a pointer would pass through the garbage
// collector's write barrier whenever a collection is marking.
//
// The reservation is address space only (PROT_NONE, no swap reserved); a
// slab's pages are committed when the slab is carved, and the kernel backs
// them when they are first touched. maxRegion is what a 32-bit Link reaches;
// where the system refuses that much address space, the reservation halves
// until it succeeds.
var region struct {
	base unsafe.Pointer // read without locking: set by init, never changed
	size uintptr
	used uintptr // bytes committed as slabs; guarded by src.mu
}

const (
	linkShift = 4 // a Link counts 16-byte units: align
	maxRegion = 1 << (32 + linkShift)
	minRegion = 64 * slabSize
)

func init() {
	for size := uintptr(maxRegion); ; size /= 2 {
		p, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
		if err == nil {
			region.base, region.size = p, size
			return
		}
		if size <= minRegion {
			panic("arena: cannot reserve address space for the node region: " + err.Error())
		}
	}
}

// Link names a 16-byte-aligned address of the region: a block of a bump
// chunk or a fixed block. The zero Link names no block (the region's first
// bytes are a chunk header).
type Link uint32

// LinkOf returns the Link of p, which must point into a bump chunk or a
// fixed block of some arena (not into a block larger than 16 KiB).
func LinkOf(p unsafe.Pointer) Link {
	return Link((uintptr(p) - uintptr(region.base)) >> linkShift)
}

// At returns the address k names. At(0) is not nil: test a Link against 0
// before resolving it.
func At(k Link) unsafe.Pointer {
	return unsafe.Add(region.base, uintptr(k)<<linkShift)
}

// The source is the process-wide supply of chunks: power-of-two blocks of at
// least firstChunk bytes, carved from slabs or mapped on their own. Chunks
// carved from slabs that come back go into per-size pools; they are never
// unmapped, split or merged (those mapped on their own are unmapped). A pool hands out its lowest chunk first: arenas give chunks back in
// whatever order their flows end (or the garbage collector finds them), and
// handing them out in that order would scatter the chunks of flows created
// one after another across memory. Measured on ParallelWaitLoop after a
// shuffled release of 70,000 arenas, that scattering costs 3x per iteration:
// a flow's turn touches its chunks cold, and neighbours no longer share pages
// and cache lines. Reuse alone bounds the mapped total by the sum, over chunk
// sizes, of the peak bytes of that size held at once, plus the current slab's
// rest and the rests of earlier slabs (pooled as chunks of the sizes they
// split into when a larger chunk did not fit them), whereas unmapping would
// need coalescing and would make the kernel work whenever arenas come and go.
//
// src.mu guards everything but the statistics, which are atomic so that
// ReadSourceStats needs no lock.
var src struct {
	mu   sync.Mutex
	free [bits.UintSize]addrHeap // free[k] holds the idle chunks of 1<<k bytes
	slab unsafe.Pointer          // uncarved rest of the current slab
	left uintptr                 // bytes at slab

	mapped atomic.Int64
	idle   atomic.Int64
}

// addrHeap is a min-heap of chunk addresses. Its elements point to off-heap
// memory, which the garbage collector ignores.
type addrHeap []unsafe.Pointer

func (h *addrHeap) push(p unsafe.Pointer) {
	s := append(*h, p)
	i := len(s) - 1
	for i > 0 {
		up := (i - 1) / 2
		if uintptr(s[up]) <= uintptr(p) {
			break
		}
		s[i] = s[up]
		i = up
	}
	s[i] = p
	*h = s
}

// pop removes and returns the lowest address; h must not be empty.
func (h *addrHeap) pop() unsafe.Pointer {
	s := *h
	n := len(s) - 1
	low, last := s[0], s[n]
	s[n] = nil
	s = s[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && uintptr(s[c+1]) < uintptr(s[c]) {
			c++
		}
		if uintptr(last) <= uintptr(s[c]) {
			break
		}
		s[i] = s[c]
		i = c
	}
	if n > 0 {
		s[i] = last
	}
	*h = s
	return low
}

// SourceStats describes the process-wide chunk source.
// Mapped-Idle is the chunk memory currently held by all arenas.
type SourceStats struct {
	Mapped int64 // bytes obtained from the OS: slabs, which are kept, and mappings of chunks larger than a slab, which are given back
	Idle   int64 // bytes sitting in the source: pooled chunks and the uncarved rest of the current slab
}

// ReadSourceStats returns the statistics of the chunk source.
// It may be called from any goroutine. The fields are read separately, so
// they are consistent with each other only while no chunk changes hands.
func ReadSourceStats() SourceStats {
	return SourceStats{Mapped: src.mapped.Load(), Idle: src.idle.Load()}
}

// getChunk returns a chunk of size bytes: a power of two >= firstChunk up
// to slabSize, a multiple of pageSize above, which is a fresh mapping, all
// zeros. The contents of a smaller one are undefined.
func getChunk(size uintptr) unsafe.Pointer {
	k := bits.TrailingZeros(uint(size))
	src.mu.Lock()
	var p unsafe.Pointer
	switch {
	case size > slabSize:
		src.mu.Unlock()
		return mmap(size)
	case len(src.free[k]) > 0:
		p = src.free[k].pop()
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
			src.slab, src.left = commitSlab(), slabSize
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

// putChunk returns a chunk obtained from getChunk(size) to the source. A
// chunk larger than a slab, a mapping of its own, goes back to the OS:
// pooled, one large Stack allocation would keep its pages resident for the
// life of the process, and such chunks are rare enough for the system
// calls not to matter.
func putChunk(p unsafe.Pointer, size uintptr) {
	if size > slabSize {
		munmap(p, size)
		return
	}
	src.mu.Lock()
	pushFree(p, size)
	src.mu.Unlock()
	src.idle.Add(int64(size))
}

// pushFree adds the chunk p of size bytes to its pool. src.mu is held.
func pushFree(p unsafe.Pointer, size uintptr) {
	src.free[bits.TrailingZeros(uint(size))].push(p)
}

// commitSlab makes the next slabSize bytes of the region usable. src.mu is
// held. Exhausting the region is fatal to the VM, as running out of memory
// is; the panic unlocks src.mu first: a caller such as the VM, which turns a
// panic in a step into the flow's error, recovers it, and a source left
// locked would hang every arena of the process on its next chunk.
func commitSlab() unsafe.Pointer {
	if region.size-region.used < slabSize {
		src.mu.Unlock()
		panic("arena: the node region is exhausted: more than " + strconv.FormatUint(uint64(region.size>>20), 10) + " MiB of chunks held at once")
	}
	p := unsafe.Add(region.base, region.used)
	if err := unix.Mprotect(unsafe.Slice((*byte)(p), slabSize), unix.PROT_READ|unix.PROT_WRITE); err != nil {
		src.mu.Unlock()
		panic("arena: mprotect: " + err.Error())
	}
	region.used += slabSize
	src.mapped.Add(slabSize)
	return p
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

// munmap gives back a chunk that mmap mapped.
func munmap(p unsafe.Pointer, size uintptr) {
	if err := unix.MunmapPtr(p, size); err != nil {
		panic("arena: munmap: " + err.Error())
	}
	src.mapped.Add(-int64(size))
}
