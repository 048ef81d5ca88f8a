package vm

import (
	"runtime"
	"testing"
)

// The table reuses the entries of collected Mutexes, so binding one Mutex
// after another keeps it small, and a number from before the reuse names
// nothing (its generation is the entry's previous one).
func TestMutexTableReusesCollectedEntries(t *testing.T) {
	var tb mutexTable
	keep := NewMutex(1, 0)
	kept := tb.bind(keep)
	stale := tb.bind(NewMutex(1, 0))
	for i := range 1000 {
		tb.bind(NewMutex(1, 0))
		if i%64 == 0 {
			runtime.GC()
		}
	}
	runtime.GC()
	for range 100 {
		tb.bind(NewMutex(1, 0))
	}
	if n := len(tb.entries); n > 200 {
		t.Errorf("the table holds %d entries for 1,102 Mutexes bound one after another", n)
	}
	if m := tb.lookup(kept); m != keep {
		t.Errorf("lookup of a live Mutex's number = %p, want %p", m, keep)
	}
	if m := tb.lookup(stale); m != nil {
		t.Errorf("lookup of a collected Mutex's number = %p, want nil", m)
	}
	if m := tb.lookup(0); m != nil {
		t.Errorf("lookup(0) = %p, want nil", m)
	}
	runtime.KeepAlive(keep)

	// Once a collected Mutex's entry holds a live Mutex again, the old
	// number still names nothing: the generation tells them apart.
	var tr mutexTable
	old := tr.bind(NewMutex(1, 0))
	runtime.GC()
	var next *Mutex
	var ref uint64
	for i := 0; uint32(ref) != uint32(old); i++ {
		if i == 1000 {
			t.Fatal("the entry of a collected Mutex is not reused")
		}
		next = NewMutex(1, 0)
		ref = tr.bind(next)
	}
	if m := tr.lookup(old); m != nil {
		t.Errorf("lookup of a collected Mutex's number, its entry reused = %p, want nil", m)
	}
	if m := tr.lookup(ref); m != next {
		t.Errorf("lookup of the reusing Mutex's number = %p, want %p", m, next)
	}
	runtime.KeepAlive(next)
}
