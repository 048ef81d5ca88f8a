package arena

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"
)

// bytesOf views n bytes at p.
func bytesOf(p unsafe.Pointer, n uintptr) []byte { return unsafe.Slice((*byte)(p), n) }

// fill sets every byte of s to b.
func fill(s []byte, b byte) {
	if len(s) == 0 {
		return
	}
	s[0] = b
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// mismatch returns the index of the first byte of s other than b, or -1.
// The fast path keeps the model test quick under the race detector.
func mismatch(s []byte, b byte) int {
	if bytes.Count(s, []byte{b}) == len(s) {
		return -1
	}
	return slices.IndexFunc(s, func(c byte) bool { return c != b })
}

// wantClassSize is the accounted size of an Alloc(size), computed
// independently of the arena's class tables.
func wantClassSize(size uintptr) int64 {
	n := (size + 15) &^ 15
	switch {
	case n <= 256:
		return int64(n)
	case n <= maxClass:
		c := uintptr(512)
		for c < n {
			c *= 2
		}
		return int64(c)
	default:
		c := uintptr(1)
		for c < n+largeHdr {
			c *= 2
		}
		return int64(c)
	}
}

func TestClasses(t *testing.T) {
	for size := uintptr(1); size <= maxClass; size++ {
		c := classOf(size)
		if c < 0 || c >= numClasses {
			t.Fatalf("classOf(%d) = %d out of range", size, c)
		}
		if got, want := int64(classSize[c]), wantClassSize(size); got != want {
			t.Fatalf("class size of %d = %d, want %d", size, got, want)
		}
	}
}

func TestAllocAlignedZeroed(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	sizes := []uintptr{1, 8, 15, 16, 17, 64, 96, 255, 256, 257, 1000, 4096, 16 << 10, 16<<10 + 1, 100 << 10, 3 << 20}
	for round := range 3 {
		var ps []unsafe.Pointer
		for _, size := range sizes {
			p := a.Alloc(size)
			if uintptr(p)%align != 0 {
				t.Fatalf("Alloc(%d) = %p, not %d-aligned", size, p, align)
			}
			if !a.Owns(p) || !a.Owns(unsafe.Add(p, size-1)) {
				t.Fatalf("Alloc(%d) = %p, not owned", size, p)
			}
			if i := mismatch(bytesOf(p, size), 0); i >= 0 {
				t.Fatalf("round %d: Alloc(%d)[%d] != 0", round, size, i)
			}
			// Dirty the whole class size so that reuse must clear it.
			n := uintptr(wantClassSize(size))
			if size > maxClass {
				n = (size + 15) &^ 15
			}
			fill(bytesOf(p, n), 0xAA)
			ps = append(ps, p)
		}
		for i, p := range ps {
			a.Free(p, sizes[i])
		}
		if a.InUse() != 0 || acct.InUse != 0 {
			t.Fatalf("after freeing all: InUse %d, acct.InUse %d", a.InUse(), acct.InUse)
		}
	}
}

func TestFreeReusesBlock(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	p := a.Alloc(64)
	bytesOf(p, 64)[63] = 1
	a.Free(p, 64)
	q := a.Alloc(50) // same class as 64
	if q != p {
		t.Fatalf("Alloc after Free = %p, want the freed block %p", q, p)
	}
	if bytesOf(q, 64)[0] != 0 || bytesOf(q, 64)[63] != 0 {
		t.Fatal("reused block not zeroed")
	}
	// LIFO: the last block freed is the first reused.
	r := a.Alloc(64)
	a.Free(q, 64)
	a.Free(r, 64)
	if a.Alloc(64) != r || a.Alloc(64) != q {
		t.Fatal("free list is not LIFO")
	}
}

// Blocks of the larger classes are reused too: their lists' heads, made
// in the arena's memory on the first such Free and not counted in InUse,
// go with the other blocks on Reset and are made anew after it.
func TestFreeReusesLargerClass(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	for range 2 {
		p, q := a.Alloc(100), a.Alloc(1000)
		bytesOf(p, 100)[99], bytesOf(q, 1000)[999] = 1, 1
		a.Free(p, 100)
		a.Free(q, 1000)
		if a.InUse() != 0 {
			t.Fatalf("InUse %d after freeing every block, want 0", a.InUse())
		}
		if a.Alloc(1000) != q || a.Alloc(100) != p {
			t.Fatal("Alloc after Free of a larger class did not reuse the freed block")
		}
		if bytesOf(p, 100)[99] != 0 || bytesOf(q, 1000)[999] != 0 {
			t.Fatal("reused block not zeroed")
		}
		a.Reset()
	}
}

func TestReuseRecycle(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	if p := a.Reuse(64); p != nil {
		t.Fatalf("Reuse on an empty free list = %p, want nil", p)
	}
	p := a.Alloc(64)
	fill(bytesOf(p, 64), 0xa5)
	a.Recycle(p, 64)
	if a.InUse() != 0 {
		t.Fatalf("InUse after Recycle = %d, want 0", a.InUse())
	}
	if a.Reuse(32) != nil {
		t.Fatal("Reuse(32) served a block of another class")
	}
	q := a.Reuse(49) // the class of 64
	if q != p {
		t.Fatalf("Reuse after Recycle = %p, want %p", q, p)
	}
	if i := mismatch(bytesOf(q, 49), 0); i >= 0 {
		t.Fatalf("reused block byte %d not zeroed", i)
	}
	if a.InUse() != 64 || a.acct.InUse != 64 {
		t.Fatalf("InUse after Reuse = %d (account %d), want 64", a.InUse(), a.acct.InUse)
	}
	a.Free(q, 64) // Recycle and Free share the free lists
	if a.Alloc(64) != q {
		t.Fatal("Alloc did not take the block Free returned")
	}
}

func TestChunkGrowth(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	a.Alloc(16)
	if a.Reserved() != firstChunk {
		t.Fatalf("Reserved after first Alloc = %d, want %d", a.Reserved(), firstChunk)
	}
	for range 10000 {
		a.Alloc(96)
	}
	want := uintptr(firstChunk)
	for c := &a.h.chunk; c != nil; c = c.next {
		if c.size != want {
			t.Fatalf("chunk size %d, want %d", c.size, want)
		}
		if c != &a.h.chunk {
			want = min(2*want, maxChunk)
		}
	}
}

func TestLarge(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	p := a.Alloc(40 << 10)
	// The dedicated chunk, and the first chunk every arena with memory has.
	if got, want := a.Reserved(), int64(64<<10+firstChunk); got != want {
		t.Fatalf("Reserved = %d, want %d", got, want)
	}
	if a.InUse() != 64<<10 || acct.InUse != a.InUse() || acct.Reserved != a.Reserved() {
		t.Fatalf("InUse %d Reserved %d acct %+v", a.InUse(), a.Reserved(), acct)
	}
	q := a.Alloc(2 << 20) // its own mapping
	before := ReadSourceStats().Idle
	a.Free(p, 40<<10)
	if a.Owns(p) {
		t.Fatal("freed dedicated chunk still owned")
	}
	if got := ReadSourceStats().Idle - before; got != 64<<10 {
		t.Fatalf("Idle grew by %d after freeing a dedicated chunk, want %d", got, 64<<10)
	}
	a.Free(q, 2<<20)
	if a.InUse() != 0 || a.Reserved() != firstChunk || acct.InUse != 0 || acct.Reserved != firstChunk {
		t.Fatalf("after Free: InUse %d Reserved %d acct %+v", a.InUse(), a.Reserved(), acct)
	}
}

func TestReset(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	for i := range 2000 {
		a.Alloc(uintptr(1 + i%300))
	}
	a.Alloc(20 << 10)
	held := a.Reserved()
	idle := ReadSourceStats().Idle
	a.Reset()
	if a.InUse() != 0 || acct.InUse != 0 {
		t.Fatalf("after Reset: InUse %d, acct.InUse %d", a.InUse(), acct.InUse)
	}
	kept := a.Reserved()
	if kept > KeepBytes || kept == 0 || acct.Reserved != kept {
		t.Fatalf("after Reset: Reserved %d (acct %d), want in (0, %d]", kept, acct.Reserved, KeepBytes)
	}
	if got := ReadSourceStats().Idle - idle; got != held-kept {
		t.Fatalf("Reset returned %d bytes to the source, want %d", got, held-kept)
	}
	if acct.Arenas != 1 {
		t.Fatalf("acct.Arenas = %d after Reset, want 1", acct.Arenas)
	}
	// The kept chunks serve the next allocations without new chunks.
	for range 20 {
		p := a.Alloc(96)
		if !a.Owns(p) {
			t.Fatal("allocation after Reset not owned")
		}
		if mismatch(bytesOf(p, 96), 0) >= 0 {
			t.Fatal("allocation after Reset not zeroed")
		}
	}
	if a.Reserved() != kept {
		t.Fatalf("Reserved grew from %d to %d while kept chunks had room", kept, a.Reserved())
	}
	// Reset of an arena that never allocated, or twice in a row, is fine.
	a.Reset()
	a.Reset()
	if a.Reserved() != kept || a.InUse() != 0 {
		t.Fatalf("double Reset: InUse %d Reserved %d", a.InUse(), a.Reserved())
	}
}

func TestRelease(t *testing.T) {
	var acct Account
	var a, b Arena
	a.Init(&acct)
	b.Init(&acct)
	for i := range 500 {
		a.Alloc(uintptr(1 + i*7%5000))
	}
	a.Alloc(100 << 10)
	if acct.Arenas != 2 {
		t.Fatalf("acct.Arenas = %d, want 2", acct.Arenas)
	}
	held := a.Reserved()
	before := ReadSourceStats()
	a.Release()
	after := ReadSourceStats()
	if after.Idle-before.Idle != held || after.Mapped != before.Mapped {
		t.Fatalf("Release: Idle grew by %d (want %d), Mapped by %d", after.Idle-before.Idle, held, after.Mapped-before.Mapped)
	}
	if acct != (Account{Arenas: 1}) {
		t.Fatalf("account after Release = %+v, want only b", acct)
	}
	a.Release() // harmless
	b.Release()
	if acct != (Account{}) {
		t.Fatalf("account after releasing all = %+v", acct)
	}
	a.Init(&acct) // a released arena can be reused
	a.Alloc(1)
	a.Release()
	if acct != (Account{}) {
		t.Fatalf("account after reuse = %+v", acct)
	}
}

func TestInitInUsePanics(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("Init of an arena in use did not panic")
		}
	}()
	a.Init(&acct)
}

func TestAllocZeroPanics(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("Alloc(0) did not panic")
		}
	}()
	a.Alloc(0)
}

func TestOwns(t *testing.T) {
	var a, b Arena
	a.Init(nil)
	b.Init(nil)
	defer a.Release()
	defer b.Release()
	var x [64]byte
	p := a.Alloc(64)
	if !a.Owns(p) || b.Owns(p) || a.Owns(unsafe.Pointer(&x)) || a.Owns(nil) {
		t.Fatal("Owns is wrong")
	}
	a.Release()
	if a.Owns(p) {
		t.Fatal("released arena still owns its block")
	}
}

func TestFixed(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	f := a.Fixed()
	if acct.InUse != 0 || a.InUse() != 0 || a.Reserved() != firstChunk {
		t.Fatalf("after Fixed: InUse %d/%d Reserved %d, want 0/0/%d", acct.InUse, a.InUse(), a.Reserved(), firstChunk)
	}
	for i, b := range unsafe.Slice((*byte)(f), FixedSize) {
		if b != 0 {
			t.Fatalf("fixed block byte %d = %d, want 0", i, b)
		}
	}
	fill := func(p unsafe.Pointer, n uintptr, v byte) {
		for i := range unsafe.Slice((*byte)(p), n) {
			unsafe.Slice((*byte)(p), n)[i] = v
		}
	}
	fill(f, FixedSize, 0xAA)
	for round := range 3 {
		// Blocks of every kind, a large one among them, never overlap the
		// fixed block, and Reset leaves it where it is, with its contents.
		for _, size := range []uintptr{16, 64, 200, 4096, 20000, 64} {
			p := a.Alloc(size)
			if u, lo := uintptr(p), uintptr(f); u+size > lo && u < lo+FixedSize {
				t.Fatalf("round %d: block %#x+%d overlaps the fixed block at %#x", round, u, size, lo)
			}
			fill(p, size, 0x55)
		}
		a.Reset()
		if g, h := a.Fixed(), a.FixedAgain(); g != f || h != f {
			t.Fatalf("round %d: Fixed moved from %p to %p (FixedAgain %p)", round, f, g, h)
		}
		for i, b := range unsafe.Slice((*byte)(f), FixedSize) {
			if b != 0xAA {
				t.Fatalf("round %d: fixed block byte %d = %#x, want 0xaa", round, i, b)
			}
		}
		if a.InUse() != 0 || acct.InUse != 0 {
			t.Fatalf("round %d: InUse %d after Reset", round, a.InUse())
		}
	}
}

// TestFixedFirstChunkLarge: an arena whose first block is large still has
// its fixed block in a small first chunk, which Reset keeps alone.
func TestFixedFirstChunkLarge(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	a.Alloc(maxClass)
	f := a.Fixed()
	if a.Reserved() <= KeepBytes {
		t.Fatalf("Reserved %d, want more than KeepBytes", a.Reserved())
	}
	a.Reset()
	if a.Fixed() != f || a.Reserved() != firstChunk {
		t.Fatalf("after Reset: Fixed %p (was %p), Reserved %d, want %d", a.Fixed(), f, a.Reserved(), firstChunk)
	}
}

// TestRef: a Ref returns the memory of an arena whose Arena value is gone,
// and reports its counts and mark.
func TestRef(t *testing.T) {
	a := new(Arena)
	a.Init(nil)
	a.Alloc(64)
	a.Alloc(maxClass + 1) // a dedicated chunk
	a.SetMark(6)
	a.SetMarkAgain(7)
	r := a.Ref()
	a.Reset()
	if a.Ref() != r {
		t.Fatal("Reset changed the Ref")
	}
	a.Alloc(100)
	inUse, reserved := a.InUse(), a.Reserved()
	a = nil // the owner is gone; only r is left
	before := ReadSourceStats().Idle
	gotUse, gotRes, mark := r.Abandon()
	if gotUse != inUse || gotRes != reserved || mark != 7 {
		t.Fatalf("Abandon = %d, %d, %d; want %d, %d, 7", gotUse, gotRes, mark, inUse, reserved)
	}
	if idle := ReadSourceStats().Idle; idle-before != reserved {
		t.Fatalf("source idle grew by %d, want %d", idle-before, reserved)
	}
	if u, r, m := (Ref{}).Abandon(); u != 0 || r != 0 || m != 0 {
		t.Fatal("Abandon of a zero Ref did something")
	}
}
