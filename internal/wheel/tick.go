package wheel

import (
	"math"
	"math/bits"
)

// Conversions between caller times (int64 ns) and tick numbers (uint64 ticks
// since w.start). Differences are taken in uint64, where they are exact for
// any pair of int64 times with t >= w.start.

// ceilTick returns the first tick that starts at or after t: the tick at
// which a deadline t is reached. Deadlines at or before the start map to 0.
func (w *Wheel) ceilTick(t int64) uint64 {
	if t <= w.start {
		return 0
	}
	d := uint64(t) - uint64(w.start)
	k := d / w.tick
	if d%w.tick != 0 {
		k++ // cannot wrap: w.tick == 1 leaves no remainder
	}
	return k
}

// floorTick returns the tick that contains t, the last tick reached by time
// t. ok is false when t precedes the start, when no tick has been reached.
func (w *Wheel) floorTick(t int64) (k uint64, ok bool) {
	if t < w.start {
		return 0, false
	}
	return (uint64(t) - uint64(w.start)) / w.tick, true
}

// timeOf returns the time at which tick k starts, or math.MaxInt64 if that is
// not representable.
func (w *Wheel) timeOf(k uint64) int64 {
	hi, d := bits.Mul64(k, w.tick)
	if hi != 0 || d > uint64(math.MaxInt64)-uint64(w.start) {
		return math.MaxInt64
	}
	return int64(uint64(w.start) + d)
}
