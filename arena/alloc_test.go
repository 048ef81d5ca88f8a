package arena

import (
	"testing"

	"github.com/stepvm/stepvm/internal/allocs"
)

// These tests pin down the promise that the hot paths never touch the Go
// heap. Any allocation fails them.

func TestAllocFreeNoHeapAlloc(t *testing.T) {
	var acct Account
	var a Arena
	a.Init(&acct)
	defer a.Release()
	a.Free(a.Alloc(64), 64) // warm up
	if n := allocs.Count(1000, func() {
		a.Free(a.Alloc(64), 64)
	}); n != 0 {
		t.Fatalf("Alloc+Free of 64 bytes: %v heap allocations in 1000 runs, want 0", n)
	}
	if n := allocs.Count(1000, func() {
		a.Recycle(a.Reuse(64), 64) // the block Recycle gave back last time
	}); n != 0 {
		t.Fatalf("Reuse+Recycle of 64 bytes: %v heap allocations in 1000 runs, want 0", n)
	}
}

func TestCycleNoHeapAlloc(t *testing.T) {
	var acct Account
	var a Arena
	cycle := func() {
		a.Init(&acct)
		for i := range 10 {
			a.Alloc(uintptr(32 + 16*i))
		}
		a.Reset()
		for i := range 10 {
			a.Alloc(uintptr(32 + 16*i))
		}
		a.Release()
	}
	cycle() // warm up: the source has the chunks afterwards
	if n := allocs.Count(1000, cycle); n != 0 {
		t.Fatalf("Init/Alloc×10/Reset/Alloc×10/Release: %v heap allocations in 1000 runs, want 0", n)
	}
	if acct != (Account{}) {
		t.Fatalf("account after cycles = %+v", acct)
	}
}
