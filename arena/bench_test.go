package arena

import (
	"testing"
	"unsafe"
)

// Each arena benchmark has a Go heap counterpart so that the two can be
// quoted side by side. The heap ones keep their result reachable through a
// global so that new escapes; the GC, not a Free, reclaims it.

var heapSink *[64]byte

func BenchmarkAllocFree64(b *testing.B) {
	var a Arena
	a.Init(new(Account))
	defer a.Release()
	b.ReportAllocs()
	for b.Loop() {
		a.Free(a.Alloc(64), 64)
	}
}

func BenchmarkHeapNew64(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		heapSink = new([64]byte)
	}
}

func BenchmarkAllocReset(b *testing.B) {
	var a Arena
	a.Init(new(Account))
	defer a.Release()
	b.ReportAllocs()
	for b.Loop() {
		for range 10 {
			a.Alloc(64)
		}
		a.Reset()
	}
}

func BenchmarkHeapNew64x10(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for range 10 {
			heapSink = new([64]byte)
		}
	}
}

// BenchmarkArenaChurn measures a whole short-lived arena: Init, a few
// blocks, Release, with the chunks coming from and going to the source.
func BenchmarkArenaChurn(b *testing.B) {
	var acct Account
	b.ReportAllocs()
	for b.Loop() {
		var a Arena
		a.Init(&acct)
		for range 4 {
			a.Alloc(96)
		}
		a.Release()
	}
}

func BenchmarkOwns(b *testing.B) {
	var a Arena
	a.Init(nil)
	defer a.Release()
	var p unsafe.Pointer
	for range 100 {
		p = a.Alloc(256) // about 8 chunks
	}
	for b.Loop() {
		if !a.Owns(p) {
			b.Fatal("not owned")
		}
	}
}
