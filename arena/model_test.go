package arena

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/internal/fuzzinput"
)

// block is a live allocation in the model: its bytes are all fill.
type block struct {
	p     unsafe.Pointer
	size  uintptr
	arena int
	fill  byte
}

// TestModel runs seeded random sequences of operations on several arenas
// sharing an account and checks them against a model of the live blocks.
// Small blocks come and go through Alloc or Reuse and Free or Recycle
// alike.
func TestModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			testModel(t, rand.New(rand.NewPCG(seed, 0x5eed)), 30000)
		})
	}
}

// FuzzArena is TestModel with the choices read from the input: it makes
// the first choices of 3,000 operations, and a generator seeded from the
// input makes the others.
//
//	go test -run '^$' -fuzz '^FuzzArena$' -fuzztime 10m -parallel 1 ./arena
func FuzzArena(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0xff, 0xe0, 0x10, 0x80, 0, 0, 0, 0, 0x40, 0x7f, 0x33})
	f.Fuzz(func(t *testing.T, in []byte) {
		testModel(t, rand.New(fuzzinput.NewSource(in)), 3000)
	})
}

func testModel(t *testing.T, rng *rand.Rand, ops int) {
	const numArenas = 8
	var acct Account
	var arenas [numArenas]Arena
	var inited [numArenas]bool
	var live [numArenas][]*block // per arena, in allocation order
	baseHeld := held()

	randSize := func() uintptr {
		switch r := rng.IntN(100); {
		case r < 80:
			return uintptr(1 + rng.UintN(256)) // step and frame records
		case r < 97:
			return uintptr(1 + rng.UintN(maxClass))
		default:
			return uintptr(maxClass + 1 + rng.UintN(200<<10)) // dedicated
		}
	}
	check := func(op int) {
		var inUse [numArenas]int64
		blocks := slices.Concat(live[:]...)
		for _, b := range blocks {
			inUse[b.arena] += wantClassSize(b.size)
			if !arenas[b.arena].Owns(b.p) || !arenas[b.arena].Owns(unsafe.Add(b.p, b.size-1)) {
				t.Fatalf("op %d: live block %p+%d not owned by its arena", op, b.p, b.size)
			}
			if i := mismatch(bytesOf(b.p, b.size), b.fill); i >= 0 {
				t.Fatalf("op %d: block %p+%d byte %d != %#x", op, b.p, b.size, i, b.fill)
			}
		}
		// A block spans its whole class size (Alloc clears all of it);
		// a dedicated one its size rounded to the alignment.
		span := func(b *block) uintptr {
			if b.size > maxClass {
				return (b.size + align - 1) &^ (align - 1)
			}
			return uintptr(wantClassSize(b.size))
		}
		// The fills catch most overlaps; this catches the rest.
		slices.SortFunc(blocks, func(x, y *block) int { return cmp.Compare(uintptr(x.p), uintptr(y.p)) })
		for i := 1; i < len(blocks); i++ {
			x, y := blocks[i-1], blocks[i]
			if uintptr(x.p)+span(x) > uintptr(y.p) {
				t.Fatalf("op %d: blocks %p+%d and %p overlap", op, x.p, span(x), y.p)
			}
		}
		var sum Account
		for i := range arenas {
			a := &arenas[i]
			if a.InUse() != inUse[i] {
				t.Fatalf("op %d: arena %d InUse %d, model %d", op, i, a.InUse(), inUse[i])
			}
			if a.InUse() > a.Reserved() {
				t.Fatalf("op %d: arena %d InUse %d > Reserved %d", op, i, a.InUse(), a.Reserved())
			}
			sum.InUse += a.InUse()
			sum.Reserved += a.Reserved()
			if inited[i] {
				sum.Arenas++
			}
		}
		if acct != sum {
			t.Fatalf("op %d: account %+v, sum of arenas %+v", op, acct, sum)
		}
		if got := held() - baseHeld; got != sum.Reserved {
			t.Fatalf("op %d: source handed out %d bytes, arenas hold %d", op, got, sum.Reserved)
		}
	}

	for op := range ops {
		i := rng.IntN(numArenas)
		a := &arenas[i]
		if !inited[i] {
			a.Init(&acct)
			inited[i] = true
		}
		switch r := rng.IntN(1000); {
		case r < 550 || len(live[i]) == 0:
			size := randSize()
			var p unsafe.Pointer
			if size <= SmallSize && rng.IntN(2) == 0 {
				p = a.Reuse(size) // the VM's fast path for its nodes
			}
			if p == nil {
				p = a.Alloc(size)
			}
			if uintptr(p)%align != 0 {
				t.Fatalf("op %d: Alloc(%d) = %p misaligned", op, size, p)
			}
			b := &block{p: p, size: size, arena: i, fill: byte(op) | 1}
			if j := mismatch(bytesOf(p, size), 0); j >= 0 {
				t.Fatalf("op %d: Alloc(%d) byte %d not zeroed", op, size, j)
			}
			fill(bytesOf(p, size), b.fill)
			live[i] = append(live[i], b)
		case r < 990:
			// Free mostly the newest block, as the VM does, else any.
			j := len(live[i]) - 1
			if rng.IntN(4) == 0 {
				j = rng.IntN(len(live[i]))
			}
			b := live[i][j]
			if b.size <= SmallSize && rng.IntN(2) == 0 {
				a.Recycle(b.p, b.size)
			} else {
				a.Free(b.p, b.size)
			}
			live[i] = slices.Delete(live[i], j, j+1)
		case r < 995:
			a.Reset()
			live[i] = nil
			// The first chunk stays, however large; the others within KeepBytes.
			if a.Reserved() > KeepBytes {
				t.Fatalf("op %d: Reserved %d after Reset", op, a.Reserved())
			}
		default:
			a.Release()
			inited[i] = false
			live[i] = nil
		}
		if a.Settled() != (a.InUse() == 0 && a.Reserved() <= KeepBytes) {
			t.Fatalf("op %d: Settled %v with InUse %d, Reserved %d", op, a.Settled(), a.InUse(), a.Reserved())
		}
		if op%500 == 0 {
			check(op)
		}
	}
	check(ops)
	for i := range arenas {
		arenas[i].Release()
	}
	if acct != (Account{}) {
		t.Fatalf("account after releasing all = %+v", acct)
	}
	if got := held() - baseHeld; got != 0 {
		t.Fatalf("source still hands out %d bytes after releasing all", got)
	}
}

// held returns the chunk bytes currently handed out by the source.
func held() int64 {
	s := ReadSourceStats()
	return s.Mapped - s.Idle
}
