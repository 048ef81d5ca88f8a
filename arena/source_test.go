package arena

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// churn creates, uses and releases one arena, as a short-lived flow would.
func churn(acct *Account, i int) {
	var a Arena
	a.Init(acct)
	p := a.Alloc(96)
	q := a.Alloc(uintptr(1 + i%700))
	a.Alloc(64)
	a.Free(p, 96)
	a.Alloc(uintptr(1 + i%3000))
	if i%10 == 0 {
		a.Free(q, uintptr(1+i%700))
		a.Alloc(20 << 10) // dedicated chunk
	}
	a.Release()
}

func TestSourceReuseKeepsMappedFlat(t *testing.T) {
	var acct Account
	for i := range 1000 {
		churn(&acct, i)
	}
	before := ReadSourceStats()
	for i := range 100_000 {
		churn(&acct, i)
	}
	after := ReadSourceStats()
	if after.Mapped != before.Mapped {
		t.Fatalf("Mapped grew from %d to %d while arenas came and went", before.Mapped, after.Mapped)
	}
	if after.Mapped-after.Idle != before.Mapped-before.Idle {
		t.Fatalf("held chunks changed from %d to %d", before.Mapped-before.Idle, after.Mapped-after.Idle)
	}
	if acct != (Account{}) {
		t.Fatalf("account after churn = %+v", acct)
	}
}

// TestAbandonConcurrent abandons arenas on other goroutines, as GC cleanups
// would, while their owner keeps using other arenas of the same account.
func TestAbandonConcurrent(t *testing.T) {
	const rounds = 2000
	type lost struct{ inUse, reserved int64 }
	var acct Account
	abandon := make(chan *Arena)
	results := make(chan lost, rounds)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for a := range abandon {
				inUse, reserved := a.Abandon()
				results <- lost{inUse, reserved}
			}
		})
	}

	var mine [4]Arena
	for i := range mine {
		mine[i].Init(&acct)
	}
	var want Account
	for i := range rounds {
		victim := new(Arena)
		victim.Init(&acct)
		for j := range 1 + i%50 {
			victim.Alloc(uintptr(1 + (i*j)%2000))
		}
		want.InUse += victim.InUse()
		want.Reserved += victim.Reserved()
		abandon <- victim // victim belongs to the abandoning goroutine now
		a := &mine[i%len(mine)]
		for j := range 20 {
			p := a.Alloc(uintptr(16 + j*8))
			if j%2 == 0 {
				a.Free(p, uintptr(16+j*8))
			}
		}
		if i%100 == 99 {
			a.Reset()
		}
	}
	close(abandon)
	wg.Wait()
	close(results)
	var got Account
	for r := range results {
		got.InUse += r.inUse
		got.Reserved += r.reserved
		acct.InUse -= r.inUse
		acct.Reserved -= r.reserved
		acct.Arenas--
	}
	if got != want {
		t.Fatalf("Abandon returned %+v in total, want %+v", got, want)
	}
	var sum Account
	for i := range mine {
		sum.InUse += mine[i].InUse()
		sum.Reserved += mine[i].Reserved()
		sum.Arenas++
	}
	if acct != sum {
		t.Fatalf("account %+v after adjusting for abandoned arenas, want %+v", acct, sum)
	}
	for i := range mine {
		mine[i].Release()
	}
	if acct != (Account{}) {
		t.Fatalf("account after releasing all = %+v", acct)
	}
}

// flowRoot stands for a VM flow root whose arena is reclaimed by a cleanup.
type flowRoot struct {
	arena *Arena
}

func newAbandonedRoot(acct *Account, done chan<- [2]int64) {
	r := &flowRoot{arena: new(Arena)}
	r.arena.Init(acct)
	r.arena.Alloc(100)
	r.arena.Alloc(30 << 10)
	runtime.AddCleanup(r, func(a *Arena) {
		inUse, reserved := a.Abandon()
		done <- [2]int64{inUse, reserved}
	}, r.arena)
}

func TestAbandonFromCleanup(t *testing.T) {
	var acct Account
	done := make(chan [2]int64, 1)
	newAbandonedRoot(&acct, done)
	var lost [2]int64
	for i := 0; ; i++ {
		if i == 1000 {
			t.Skip("cleanup did not run after 1000 GCs")
		}
		runtime.GC()
		select {
		case lost = <-done:
		default:
			runtime.Gosched()
			continue
		}
		break
	}
	acct.InUse -= lost[0]
	acct.Reserved -= lost[1]
	acct.Arenas--
	if acct != (Account{}) {
		t.Fatalf("account after applying the cleanup's result = %+v", acct)
	}
}

// TestSourceConcurrent churns arenas on several goroutines at once.
func TestSourceConcurrent(t *testing.T) {
	base := held()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var acct Account
			for i := range 5000 {
				churn(&acct, g*5000+i)
			}
			if acct != (Account{}) {
				t.Errorf("goroutine %d: account after churn = %+v", g, acct)
			}
		})
	}
	wg.Wait()
	if got := held(); got != base {
		t.Fatalf("source hands out %d bytes after all arenas were released, want %d", got, base)
	}
}

// TestSourceLowestFirst: chunks given back in any order come out again
// lowest address first.
func TestSourceLowestFirst(t *testing.T) {
	const n = 1000
	const size = 8 << 10 // a size no other test of this package uses
	ps := make([]unsafe.Pointer, n)
	for i := range ps {
		ps[i] = getChunk(size)
	}
	rand.Shuffle(n, func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	for _, p := range ps {
		putChunk(p, size)
	}
	prev := uintptr(0)
	for i := range n {
		p := getChunk(size)
		if uintptr(p) < prev {
			t.Fatalf("chunk %d at %p, below the previous one at %#x", i, p, prev)
		}
		prev = uintptr(p)
		ps[i] = p
	}
	for _, p := range ps {
		putChunk(p, size)
	}
}

func TestAddrHeap(t *testing.T) {
	var h addrHeap
	var want []uintptr
	buf := make([]byte, 1<<16)
	for range 5000 {
		if len(h) > 0 && rand.IntN(3) == 0 {
			got := uintptr(h.pop())
			slices.Sort(want)
			if got != want[0] {
				t.Fatalf("pop = %#x, want %#x", got, want[0])
			}
			want = want[1:]
			continue
		}
		p := unsafe.Pointer(&buf[rand.IntN(len(buf))])
		h.push(p)
		want = append(want, uintptr(p))
	}
}

// inRegion reports whether p points into the committed part of the region.
func inRegion(p unsafe.Pointer) bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	return uintptr(p)-uintptr(region.base) < region.used
}

// TestLinks checks that every block an arena hands out below the large
// size, and its fixed block, is named by a Link that resolves back to it,
// and that no block is named by the zero Link.
func TestLinks(t *testing.T) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	blocks := []unsafe.Pointer{a.Fixed()}
	for size := uintptr(1); size <= maxClass; size = size*2 + 1 {
		blocks = append(blocks, a.Alloc(size), a.Alloc(min(size, SmallSize)))
	}
	for _, p := range blocks {
		if !inRegion(p) {
			t.Fatalf("block %p is outside the region", p)
		}
		k := LinkOf(p)
		if k == 0 || At(k) != p {
			t.Fatalf("block %p: Link %d resolves to %p", p, k, At(k))
		}
	}
}

// TestExhaustedRegionLeavesTheSourceUsable runs out of the node region
// (shrunk for the test to what is committed) and recovers the panic, as the
// VM does for a panic in a step: the source must not stay locked, or every
// arena of the process would hang on its next chunk.
func TestExhaustedRegionLeavesTheSourceUsable(t *testing.T) {
	const k = 20 // slabSize: a chunk only a new slab can give while its pool is empty
	src.mu.Lock()
	size, pooled := region.size, src.free[k]
	region.size, src.free[k] = region.used, nil
	src.mu.Unlock()
	restore := func() {
		src.mu.Lock()
		region.size = size
		for _, p := range src.free[k] {
			pooled.push(p)
		}
		src.free[k] = pooled
		src.mu.Unlock()
	}
	func() {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "node region is exhausted") {
				t.Errorf("getChunk of an exhausted region: panic %q", msg)
			}
		}()
		getChunk(slabSize)
	}()
	if !src.mu.TryLock() {
		t.Fatal("the source is still locked after the panic")
	}
	src.mu.Unlock()
	restore()
	var a Arena
	a.Init(nil)
	a.Alloc(slabSize / 2)
	a.Release()
}

// A chunk larger than a slab is a mapping of its own, of the block and
// its header rounded up to the page size, unmapped when it comes back: a
// large Stack allocation must not keep its pages for the life of the
// process. It used to be pooled, and Mapped never went down; and it took
// the power of two above, 16 MiB for a block of 8 MiB.
func TestLargeChunkUnmapped(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	a.Alloc(64) // the arena's first chunk, before the reading
	before := ReadSourceStats()
	p := a.Alloc(8 << 20)
	if got, want := ReadSourceStats().Mapped-before.Mapped, int64(8<<20+pageSize); got != want {
		t.Fatalf("Mapped grew by %d for an 8 MiB block, want %d", got, want)
	}
	if b := unsafe.Slice((*byte)(p), 8<<20); b[0] != 0 || b[len(b)-1] != 0 {
		t.Fatal("the block is not zeroed")
	}
	a.Free(p, 8<<20)
	if after := ReadSourceStats(); after != before {
		t.Fatalf("after Free: %+v, want %+v (unmapped, not pooled)", after, before)
	}
}
