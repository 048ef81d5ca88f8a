package arena

import (
	"math/bits"
	"unsafe"
)

// Arena is a chunked bump allocator with per-size-class free lists over
// off-heap memory. The zero value is not usable; call Init.
//
// Blocks of up to maxClass (16 KiB) bytes are carved from bump chunks of
// 256 bytes, 256 again, then doubling up to 64 KiB, so an idle flow costs
// little, one waiting a few levels deep costs two small chunks, and a busy
// one takes few chunks. A freed block goes onto the free list of its class,
// its link stored in the block itself; Alloc pops from that list before
// bumping. Larger blocks get a dedicated chunk each, given back to the
// source by Free.
//
// What must outlive the Arena value (the list of chunks, the byte counts and
// the owner's mark) lives in the header of the first chunk, off the heap:
// a [Ref] to it can return the arena's memory after the Arena value itself
// is gone, as when the garbage collector finds a flow's root unreachable.
// It also puts the counts next to the fixed block, which a flow touches on
// every turn anyway. The bump state lives there too, in the header's cache
// line: it holds no Go pointer, and off the heap it costs the Arena value
// (embedded in every flow's root) nothing.
//
// An Arena must be used by one goroutine at a time and must not be copied
// after first use.
type Arena struct {
	// Alloc and Free of the small classes touch only the first cache line
	// and the header. The heads of the larger classes are in the arena's
	// own memory, named by the header (see moreHeads).
	acct  *Account
	h     *header           // nil until the first chunk is taken
	small [inlineHeads]Link // free-list heads; a block's first word links the next
}

// moreHeads holds the free-list heads of the classes above inlineHeads. It
// is allocated from the arena when a block of one is first freed (most
// arenas never free one), is not counted in InUse, and goes with the other
// blocks on Reset. Off the heap, it costs the Arena value nothing.
type moreHeads [numClasses - inlineHeads]Link

// moreSize is moreHeads's size as allocated: a class size.
const moreSize = (unsafe.Sizeof(moreHeads{}) + align - 1) &^ (align - 1)

// chunk heads a bump chunk. Its pointers point to off-heap memory only.
type chunk struct {
	next *chunk
	size uintptr
}

// header heads an arena's first chunk; the fixed block follows it.
type header struct {
	chunk           // the first chunk; next links the other bump chunks, in the order bumped
	large    *large // dedicated chunks, doubly linked
	inUse    int64
	reserved int64
	mark     uint64 // the owner's word: see SetMark

	// The bump state. Alloc reaches it through the header: a chunk
	// pointer is off-heap memory, which the GC does not scan, and the
	// header line is one Alloc touches anyway for the counts.
	cur *chunk // chunk being bumped, up to its size
	off uint32 // next free byte of cur, as an offset from cur (bump chunks are <= maxChunk)

	more Link // the moreHeads, or 0
}

// large heads a dedicated chunk; the block follows at largeHdr.
type large struct {
	next, prev *large
	size       uintptr
}

// Header sizes. The headers of bump chunks take a whole cache line, so
// that the blocks carved after them start on a line boundary: a 32-byte
// node never straddles two lines (read cold, it costs one miss, not two),
// and a 64-byte one only when it follows an odd number of 32-byte blocks.
const (
	chunkHdr = (unsafe.Sizeof(chunk{}) + lineSize - 1) &^ (lineSize - 1)
	firstHdr = (unsafe.Sizeof(header{}) + lineSize - 1) &^ (lineSize - 1)
	largeHdr = (unsafe.Sizeof(large{}) + align - 1) &^ (align - 1)
)

// The first chunk's header fits one cache line: a waiting flow's first
// chunk (firstChunk bytes) holds it, the fixed block and four 32-byte nodes.
var _ [lineSize - firstHdr]struct{}

// lineSize is the cache line size the chunk layout is built for.
const lineSize = 64

// maxLarge bounds dedicated blocks so that size computations cannot overflow.
const maxLarge = 1 << (bits.UintSize - 2)

// Init prepares a for use and charges it to acct; with a nil acct, a
// counts into an account of its own (so that Alloc and Free need not test
// for one). a must be zero, released or abandoned: Init panics if a is
// still charged to an account or holds memory, which would otherwise leak.
func (a *Arena) Init(acct *Account) {
	if a.acct != nil || a.h != nil {
		panic("arena: Init of an arena in use")
	}
	if acct == nil {
		acct = new(Account)
	}
	*a = Arena{acct: acct}
	acct.Arenas++
}

// Alloc returns size bytes of zeroed memory aligned to 16 bytes. size must be
// positive. The memory stays valid until it is freed or the arena is reset,
// released or abandoned. Alloc never returns nil; it panics if the operating
// system refuses memory.
//
// A block is counted in InUse at its class size: size rounded up to a
// multiple of 16 up to 256 bytes, to a power of two up to 16 KiB, and above
// that to its whole dedicated chunk, the power of two that holds size plus a
// 32-byte header (so a block of exactly 32 KiB takes a 64 KiB chunk), or,
// past 1 MiB, size plus the header rounded up to the page size (a mapping
// of its own).
func (a *Arena) Alloc(size uintptr) unsafe.Pointer {
	if size-1 < SmallSize {
		if p := a.Reuse(size); p != nil {
			return p
		}
	}
	if size-1 >= maxClass { // also catches size == 0
		return a.allocLarge(size)
	}
	c := classOf(size)
	n := classSize[c]
	var p unsafe.Pointer
	switch k, h := a.head(c), a.h; {
	case k != nil && *k != 0:
		p = At(*k)
		*k = *(*Link)(p)
	case h != nil && uintptr(h.off)+n <= h.cur.size:
		p = unsafe.Add(unsafe.Pointer(h.cur), h.off)
		h.off += uint32(n)
	default:
		p = a.refill(n)
	}
	zero(p, n)
	a.count(int64(n))
	return p
}

// Free gives back the block p, which Alloc(size) returned on a. Passing any
// other size or pointer, or freeing twice, corrupts the arena. Blocks of a
// class go onto the arena's free list of that class; dedicated blocks return
// their chunk to the source.
func (a *Arena) Free(p unsafe.Pointer, size uintptr) {
	if size-1 < SmallSize {
		a.Recycle(p, size)
		return
	}
	if size-1 >= maxClass {
		a.freeLarge(p)
		return
	}
	c := classOf(size)
	if c >= inlineHeads && a.h.more == 0 {
		a.h.more = LinkOf(a.Alloc(moreSize)) // zeroed: every list empty
		a.count(-int64(moreSize))
	}
	h := a.head(c)
	*(*Link)(p) = *h
	*h = LinkOf(p)
	a.count(-int64(classSize[c]))
}

// SmallSize (64) is the largest block size that Reuse and Recycle serve:
// the classes whose free-list heads an Arena holds inline.
const SmallSize = inlineHeads * align

// Reuse is the fast path of Alloc (which starts with it) for a block of at
// most SmallSize bytes, small enough for the compiler to inline: it returns
// a zeroed block from the free list of size's class, or nil if that list is
// empty, and the caller then calls Alloc. With a constant size the class
// and the clearing fold to constants.
func (a *Arena) Reuse(size uintptr) unsafe.Pointer {
	c := (size - 1) / align
	k := a.small[c&(inlineHeads-1)]
	if k == 0 {
		return nil
	}
	p := At(k)
	a.small[c&(inlineHeads-1)] = *(*Link)(p)
	clear((*[SmallSize]byte)(p)[:(c+1)*align]) // the whole block, as Alloc
	a.count(int64((c + 1) * align))
	return p
}

// Recycle is Free for a block of at most SmallSize bytes (Free calls it for
// those), small enough for the compiler to inline.
func (a *Arena) Recycle(p unsafe.Pointer, size uintptr) {
	c := (size - 1) / align
	*(*Link)(p) = a.small[c&(inlineHeads-1)]
	a.small[c&(inlineHeads-1)] = LinkOf(p)
	a.count(-int64((c + 1) * align))
}

// count adds delta bytes to the blocks in use of a and of its account.
func (a *Arena) count(delta int64) {
	a.h.inUse += delta
	a.acct.InUse += delta
}

// charge adds delta bytes of chunks to a's reservation and its account's.
func (a *Arena) charge(delta int64) {
	a.h.reserved += delta
	a.acct.Reserved += delta
}

// zero clears the n-byte block p. Blocks of up to 64 bytes, the common
// case, are cleared with inline stores rather than a call to memclr.
func zero(p unsafe.Pointer, n uintptr) {
	switch n {
	case 16:
		*(*[2]uint64)(p) = [2]uint64{}
	case 32:
		*(*[4]uint64)(p) = [4]uint64{}
	case 48:
		*(*[6]uint64)(p) = [6]uint64{}
	case 64:
		*(*[8]uint64)(p) = [8]uint64{}
	default:
		clear(unsafe.Slice((*byte)(p), n))
	}
}

// head returns the free-list head of class c, or nil if the heads of the
// larger classes are not allocated yet.
func (a *Arena) head(c int) *Link {
	if c < inlineHeads {
		return &a.small[c]
	}
	if a.h == nil || a.h.more == 0 {
		return nil
	}
	return &(*moreHeads)(At(a.h.more))[c-inlineHeads]
}

// first takes the arena's first chunk, with its header and fixed block, if
// it has none yet. It is small enough to inline into its callers' fast path.
func (a *Arena) first() {
	if a.h == nil {
		a.takeFirst()
	}
}

func (a *Arena) takeFirst() {
	h := (*header)(getChunk(firstChunk))
	*h = header{chunk: chunk{size: firstChunk}}
	zero(unsafe.Add(unsafe.Pointer(h), firstHdr), FixedSize)
	a.h = h
	h.cur = &h.chunk
	h.off = uint32(firstHdr + FixedSize)
	a.charge(firstChunk)
}

// refill makes a chunk with room for an n-byte block current and returns
// that block. It moves to the next chunk kept by Reset if the block fits
// there; otherwise it takes a new chunk, as large as the first one or twice
// the size of the current one (capped at maxChunk, but large enough for the
// block), and links it right after the current one. The tail of the old
// chunk is left unused.
func (a *Arena) refill(n uintptr) unsafe.Pointer {
	if a.h == nil {
		a.takeFirst()
		if h := a.h; uintptr(h.off)+n <= h.size {
			p := unsafe.Add(unsafe.Pointer(h.cur), h.off)
			h.off += uint32(n)
			return p
		}
	}
	h := a.h
	need := chunkHdr + n
	if h.cur.next != nil && h.cur.next.size >= need {
		h.cur = h.cur.next
	} else {
		size := h.cur.size // the second chunk: see the Arena comment
		if h.cur != &h.chunk {
			size = min(2*h.cur.size, maxChunk)
		}
		size = max(size, roundPow2(need))
		c := (*chunk)(getChunk(size))
		*c = chunk{next: h.cur.next, size: size}
		h.cur.next = c
		h.cur = c
		a.charge(int64(size))
	}
	h.off = uint32(need)
	return unsafe.Add(unsafe.Pointer(h.cur), chunkHdr)
}

// Fixed returns the arena's fixed block: FixedSize bytes at the start of
// its first chunk, zeroed when that chunk is taken, and taking it if the
// arena has none yet. The block is the owner's: it is not counted in InUse,
// Reset leaves it alone, and it stays at the same address until Release or
// Abandon. A flow keeps its root frame there, so that running a flow on a
// pooled root allocates nothing for it.
func (a *Arena) Fixed() unsafe.Pointer {
	a.first()
	return unsafe.Add(unsafe.Pointer(a.h), firstHdr)
}

// allocLarge allocates a block too large for a class on a dedicated chunk.
func (a *Arena) allocLarge(size uintptr) unsafe.Pointer {
	if size == 0 || size > maxLarge {
		panic("arena: bad allocation size")
	}
	a.first()
	n := (size + align - 1) &^ (align - 1)
	csize := roundPow2(largeHdr + n)
	fresh := csize > slabSize
	if fresh {
		// A mapping of its own, unmapped when freed (putChunk): no pool
		// class to round to, and the OS hands it out zeroed.
		csize = (largeHdr + n + pageSize - 1) &^ (pageSize - 1)
	}
	l := (*large)(getChunk(csize))
	*l = large{next: a.h.large, size: csize}
	if a.h.large != nil {
		a.h.large.prev = l
	}
	a.h.large = l
	a.charge(int64(csize))
	a.count(int64(csize))
	p := unsafe.Add(unsafe.Pointer(l), largeHdr)
	if !fresh { // its pages stay untouched until used
		clear(unsafe.Slice((*byte)(p), n))
	}
	return p
}

// freeLarge unlinks the dedicated chunk of block p and returns it to the source.
func (a *Arena) freeLarge(p unsafe.Pointer) {
	l := (*large)(unsafe.Add(p, -int(largeHdr)))
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		a.h.large = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	size := int64(l.size)
	putChunk(unsafe.Pointer(l), l.size)
	a.charge(-size)
	a.count(-size)
}

// Reset frees every allocation of a at once. It keeps the first chunk (it
// holds the fixed block) and the bump chunks that follow it in the list
// while their total stays within KeepBytes, so that a reused arena needs
// no chunk for its first allocations, and returns every other chunk to the
// source. InUse drops to zero and Reserved to the kept total; the arena
// stays charged to its account.
func (a *Arena) Reset() {
	a.small = [inlineHeads]Link{}
	h := a.h
	if h == nil {
		return
	}
	h.more = 0 // its block goes with the others
	for l := h.large; l != nil; {
		next := l.next
		a.charge(-int64(l.size))
		putChunk(unsafe.Pointer(l), l.size)
		l = next
	}
	h.large = nil
	kept := h.size
	last := &h.chunk
	for last.next != nil && kept+last.next.size <= KeepBytes {
		last = last.next
		kept += last.size
	}
	for c := last.next; c != nil; {
		next := c.next
		a.charge(-int64(c.size))
		putChunk(unsafe.Pointer(c), c.size)
		c = next
	}
	last.next = nil
	h.cur = &h.chunk
	h.off = uint32(firstHdr + FixedSize)
	a.count(-h.inUse)
}

// Release returns every chunk of a to the source and removes a from its
// account. Afterwards a is zero again and may be Init-ed anew; releasing it
// twice is harmless.
func (a *Arena) Release() {
	acct := a.acct
	inUse, reserved := a.Abandon()
	if acct != nil {
		acct.Remove(inUse, reserved)
	}
}

// Abandon is Release without touching the account, so it may run on any
// goroutine provided nothing uses a any more. It returns the bytes the
// account still counts for a; the account's owner must subtract them, and
// one from Arenas, itself.
func (a *Arena) Abandon() (inUse, reserved int64) {
	if a.h != nil {
		inUse, reserved, _ = Ref{a.h}.Abandon()
	}
	*a = Arena{}
	return inUse, reserved
}

// InUse returns the bytes allocated from a and not yet freed, counted at
// their class size.
func (a *Arena) InUse() int64 {
	if a.h == nil {
		return 0
	}
	return a.h.inUse
}

// Reserved returns the bytes of chunks a holds.
func (a *Arena) Reserved() int64 {
	if a.h == nil {
		return 0
	}
	return a.h.reserved
}

// Settled reports whether a has no block in use and holds no more chunk
// memory than KeepBytes, so that a Reset would change only its free lists:
// InUse() == 0 && Reserved() <= KeepBytes, with one test for the first chunk.
func (a *Arena) Settled() bool {
	h := a.h
	return h == nil || h.inUse == 0 && h.reserved <= KeepBytes
}

// FixedAgain is Fixed for an arena that has its first chunk (Fixed,
// SetMark or Ref was called since Init, and it was not released): it
// skips the test for the chunk, for owners that call it on every use.
func (a *Arena) FixedAgain() unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(a.h), firstHdr)
}

// SetMark stores v in the arena's header, where [Ref.Abandon] reports it:
// the owner's record of its state, for whoever returns the memory after the
// owner is gone. It takes the first chunk if the arena has none.
func (a *Arena) SetMark(v uint64) {
	a.first()
	a.h.mark = v
}

// SetMarkAgain is SetMark for an arena that has its first chunk (see
// FixedAgain).
func (a *Arena) SetMarkAgain(v uint64) { a.h.mark = v }

// Ref returns a reference to a's memory, taking its first chunk if it has
// none. The reference stays valid, and names the same memory, until a is
// released or abandoned; Reset does not change it.
func (a *Arena) Ref() Ref {
	a.first()
	return Ref{a.h}
}

// Ref names the memory of an arena: its first chunk, which leads to the
// others. It holds no Go pointer, so it may be kept where the arena's owner
// must not be reachable from, such as the argument of a cleanup attached to
// the owner.
type Ref struct{ h *header }

// Abandon returns every chunk of the arena r names to the source, for an
// arena whose Arena value is gone or no longer used. It reports the bytes
// the arena's account still counts for it (its owner must subtract them, and
// one from Arenas) and the arena's mark. Abandon of a zero Ref does nothing.
func (r Ref) Abandon() (inUse, reserved int64, mark uint64) {
	h := r.h
	if h == nil {
		return 0, 0, 0
	}
	inUse, reserved, mark = h.inUse, h.reserved, h.mark
	for l := h.large; l != nil; {
		next := l.next
		putChunk(unsafe.Pointer(l), l.size)
		l = next
	}
	for c := &h.chunk; c != nil; {
		next := c.next
		putChunk(unsafe.Pointer(c), c.size)
		c = next
	}
	return inUse, reserved, mark
}

// Fixed returns the fixed block of r's arena, which its owner may read
// until Abandon; nil for a zero Ref.
func (r Ref) Fixed() unsafe.Pointer {
	if r.h == nil {
		return nil
	}
	return unsafe.Add(unsafe.Pointer(r.h), firstHdr)
}

// Owns reports whether p points into the usable part of a chunk a holds. It
// says nothing about whether p's block is allocated. Its cost is linear in the
// number of chunks: it checks where allocations land (the package's tests),
// not the VM's handles, which their generations validate.
func (a *Arena) Owns(p unsafe.Pointer) bool {
	if a.h == nil {
		return false
	}
	u := uintptr(p)
	for c := &a.h.chunk; c != nil; c = c.next {
		hdr := chunkHdr
		if c == &a.h.chunk {
			hdr = firstHdr
		}
		if b := uintptr(unsafe.Pointer(c)); u-b-hdr < c.size-hdr {
			return true
		}
	}
	for l := a.h.large; l != nil; l = l.next {
		if b := uintptr(unsafe.Pointer(l)); u-b-largeHdr < l.size-largeHdr {
			return true
		}
	}
	return false
}
