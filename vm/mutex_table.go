package vm

import (
	"sync"
	"weak"
)

// mutexTable names the Mutexes bound to a loop by a number that a frame
// holding a place keeps in its A (see Mutex.ref). A root the program
// dropped inside a section is collected with its slots, the Mutex's only
// mention in it; its reclaim finds the Mutex here instead, and hands the
// place on (dropRecords), so that the flows queued behind a dead holder
// are not kept out for good.
//
// The table holds its Mutexes weakly: a Mutex the program drops is
// collected as if it had never been bound. Entries of collected Mutexes
// are swept for reuse once there is no free one and half as many Mutexes
// as the table has entries (16 at least) were bound since the last sweep,
// which makes a sweep's cost constant per bind and keeps the table within
// about twice the Mutexes alive. An entry's generation, bumped on reuse,
// keeps the number a frame of a root collected with its Mutex from naming
// the entry's next Mutex.
//
// NewLimiter binds its Mutex where it is called, which may be another
// goroutine than the loop's, while the loop's flows bind Mutexes they
// enter first: mu guards the table. Both happen once per Mutex, as does a
// lookup, once per dropped root.
type mutexTable struct {
	mu      sync.Mutex
	entries []mutexEntry
	free    []uint32 // entries whose Mutex was collected
	bound   int      // binds since the last sweep
}

type mutexEntry struct {
	m   weak.Pointer[Mutex]
	gen uint32
}

// bind returns m's number: the entry's index + 1 in the low half, its
// generation (never 0) in the high half.
func (t *mutexTable) bind(m *Mutex) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bound++; len(t.free) == 0 && t.bound >= max(16, len(t.entries)/2) {
		t.sweep()
	}
	i := takeEntry(&t.entries, &t.free)
	e := &t.entries[i]
	e.gen++
	if e.gen == 0 {
		e.gen = 1
	}
	e.m = weak.Make(m)
	return uint64(i+1) | uint64(e.gen)<<32
}

func (t *mutexTable) sweep() {
	for i := range t.entries {
		if e := &t.entries[i]; e.m != (weak.Pointer[Mutex]{}) && e.m.Value() == nil {
			e.m = weak.Pointer[Mutex]{}
			t.free = append(t.free, uint32(i))
		}
	}
	t.bound = 0
}

// lookup returns the Mutex numbered ref, or nil when it was collected
// (with the root whose frame names it) or ref names none.
func (t *mutexTable) lookup(ref uint64) *Mutex {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := uint32(ref) - 1 // 0, no number, wraps past every entry
	if i >= uint32(len(t.entries)) || t.entries[i].gen != uint32(ref>>32) {
		return nil
	}
	return t.entries[i].m.Value()
}
