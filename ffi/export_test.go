//go:build cgo

package ffi

import (
	"time"

	"github.com/stepvm/stepvm/vm"
)

// ForeignLive returns how many Go objects the table of ids foreign engines
// refer to holds.
func ForeignLive() int { return fxLive() }

// LoopsLive returns how many loops the registry of loop ids holds.
func LoopsLive() int { return loopsLive() }

// LoopID returns the id C code reports for l, or 0 if ffi has no state
// for l.
func LoopID(l *vm.Loop) uint32 {
	if ls := knownLoop(l); ls != nil {
		return uint32(ls.id)
	}
	return 0
}

// LiveLoopIDs returns the ids the registry holds.
func LiveLoopIDs() map[uint32]bool {
	loops.mu.Lock()
	defer loops.mu.Unlock()
	ids := make(map[uint32]bool, len(loops.byID))
	for id := range loops.byID {
		ids[uint32(id)] = true
	}
	return ids
}

// RecordBlocks returns how many blocks of records are lent to loops that
// have not been collected, and how many block numbers exist.
func RecordBlocks() (lent, total int) {
	p := records.slots.Load()
	if p == nil {
		return 0, 0
	}
	for n := range *p {
		if blockOf(uint32(n)*blockSize) != nil {
			lent++
		}
	}
	return lent, len(*p)
}

// trackedRoots returns how many roots ffi holds state for on ls's loop.
func (ls *loopState) trackedRoots() int { return ls.tracked }

// EndRunBy ends root's run as how says: "Cancel" cancels it, "Release"
// releases it, "Timeout" moves clk past the 10 ms timeout its step set;
// any other how leaves it be. Then l runs until idle.
func EndRunBy(l *vm.Loop, clk *vm.ManualClock, root vm.AsyncSteps, how string) {
	switch how {
	case "Cancel":
		root.Cancel()
	case "Release":
		root.Release()
	case "Timeout":
		clk.Advance(20 * time.Millisecond)
	}
	l.RunUntilIdle()
}

// RecordsInUse returns how many records of l's loop name something: a
// frame, an accessor or a root.
func RecordsInUse(l *vm.Loop) int {
	ls := knownLoop(l)
	if ls == nil {
		return 0
	}
	n := 0
	for _, b := range ls.blocks {
		for i := range b {
			if b[i].kind != 0 {
				n++
			}
		}
	}
	return n
}
