package wheel

import "math/bits"

// Geometry. Lists 0-255 are the level-0 slots, one tick each; level l in 1..4
// owns lists 256+64(l-1) to 256+64l-1; the last list is the overflow. A list
// number below overflowList is also its bit in Wheel.occupied.
const (
	level0Bits   = 8
	levelBits    = 6
	numLevels    = 5
	wheelBits    = level0Bits + (numLevels-1)*levelBits // ticks covered: 2^32
	level0Slots  = 1 << level0Bits
	levelSlots   = 1 << levelBits
	overflowList = level0Slots + (numLevels-1)*levelSlots
	numLists     = overflowList + 1
)

// shift returns the position of level l's digit in a tick number.
func shift(l int) uint {
	return level0Bits + uint(l-1)*levelBits // l >= 1
}

// listFor returns the list for a timer due at tick due >= w.cur: the level of
// the most significant digit in which due differs from w.cur, indexed by due's
// digit there. The placement depends only on due and w.cur, so all timers
// with one due tick always share a list; that, and lists being FIFO, is why
// equal due ticks pop in insertion order.
func (w *Wheel) listFor(due uint64) uint16 {
	x := due ^ w.cur
	if x < level0Slots {
		return uint16(due % level0Slots)
	}
	l := 1 + (bits.Len64(x)-1-level0Bits)/levelBits
	if l >= numLevels {
		return overflowList
	}
	return uint16(level0Slots + (l-1)*levelSlots + int(due>>shift(l))%levelSlots)
}

// next returns the first tick at or after w.cur at which the wheel has work,
// and the list concerned. For a level-0 list that is the tick when its timers
// are due. For a higher list it is when w.cur enters the list's span, and the
// list must be cascaded before anything else happens at that tick: this
// keeps every timer at level l >= 1 in a slot strictly after w.cur's digit,
// so no slot is ever shared by two turns of its level. ok is false if the
// wheel is empty.
//
// Timers at lower levels are due before any at higher levels, and the
// overflow after all, so the first occupied slot of the lowest occupied level
// holds the earliest timer.
func (w *Wheel) next() (at uint64, l uint16, ok bool) {
	for k := range level0Slots / 64 {
		if m := w.occupied[k]; m != 0 {
			s := uint64(k*64 + bits.TrailingZeros64(m))
			return w.cur&^(level0Slots-1) | s, uint16(s), true
		}
	}
	for lv := 1; lv < numLevels; lv++ {
		if m := w.occupied[level0Slots/64+lv-1]; m != 0 {
			s := uint64(bits.TrailingZeros64(m))
			sh := shift(lv)
			turn := w.cur >> (sh + levelBits) << (sh + levelBits)
			return turn | s<<sh, uint16(level0Slots + (lv-1)*levelSlots + int(s)), true
		}
	}
	if w.head[overflowList] != nilIndex {
		// Overflow timers are due in a later turn of the top level, so w.cur
		// is not in the last turn and this does not wrap.
		return (w.cur>>wheelBits + 1) << wheelBits, overflowList, true
	}
	return 0, 0, false
}

// cascade re-files every timer of list l relative to w.cur, in list order.
// Called when w.cur enters the span of l; each timer moves to a lower level,
// or for the overflow possibly back to the overflow.
func (w *Wheel) cascade(l uint16) {
	for i := w.take(l); i != nilIndex; {
		next := w.nodes[i].next
		w.push(w.listFor(w.nodes[i].due), i)
		i = next
	}
}

// markOccupied records that list l has just gained its first timer, due at
// tick due.
func (w *Wheel) markOccupied(l uint16, due uint64) {
	if l < overflowList {
		w.occupied[l/64] |= 1 << (l % 64)
	}
	if l >= level0Slots {
		w.low[l-level0Slots] = due
	}
}

// noteDue records a further timer due at tick due on list l.
func (w *Wheel) noteDue(l uint16, due uint64) {
	if l >= level0Slots && due < w.low[l-level0Slots] {
		w.low[l-level0Slots] = due
	}
}

// markEmpty records that list l has no timers.
func (w *Wheel) markEmpty(l uint16) {
	if l < overflowList {
		w.occupied[l/64] &^= 1 << (l % 64)
	}
}
