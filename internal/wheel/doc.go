// Package wheel is a hierarchical timer wheel for a single-goroutine event
// loop. It schedules step timeouts and deferred callbacks with O(1) Stop and
// amortized O(1) Add, without allocating per timer.
//
// The wheel never reads a clock. Times are int64 nanoseconds on whatever
// monotonic clock the caller uses, and the wheel moves only when [Wheel.Pop]
// is given a time, so a manual clock drives it exactly as a real one does.
//
// # Ticks
//
// Time is cut into ticks of a fixed length (one millisecond by default),
// counted from the start time given to [New]. A timer becomes due at the first
// tick boundary at or after its deadline: it never fires early, and Pop(now)
// returns it once now has reached that boundary, less than one tick after the
// deadline.
//
// # Order
//
// Every timer has a due tick: its deadline rounded up to a tick boundary, or
// the wheel's current tick if that is later, so that a timer added with a
// deadline the wheel has already passed is due at once. Pop returns timers in
// non-decreasing order of due tick, and timers with equal due ticks in the
// order they were added, whatever the cascading between levels in between.
//
// Pop moves the wheel's current tick forward no further than it must: to the
// due tick of the timer it returns, or to the tick of now when it reports
// that none is due. Hence, if no deadline passed to Add precedes the latest time passed to
// Pop, the order is simply that of deadlines rounded up to ticks, ties broken
// by insertion order; this is what lets a reference model predict the wheel.
//
// # Levels
//
// Level 0 has 256 slots of one tick. Levels 1 to 4 have 64 slots each, a slot
// spanning one whole turn of the level below, so the wheel covers 2^32 ticks
// (49.7 days at one millisecond). A timer sits at the level of the most
// significant digit in which its due tick differs from the current tick, and
// moves one or more levels down when the current tick enters its slot. Due
// ticks beyond the top level's current turn wait in an overflow list that is
// re-examined whenever the top level turns over, so there is no limit on how
// far ahead a deadline may be. A timer therefore moves at most four times,
// plus once per turn of the top level that it spends in the overflow.
//
// # Staging
//
// Add does not file a timer into its list at once: it stages it, and
// staged timers are filed, in the order added, when the earliest of them
// may be due (Pop) or when maxStaged have piled up. An event loop's step
// timeouts are mostly stopped soon after they are set; a staged timer is
// stopped without touching a list (or rounding its deadline), which halves
// the cost of a timer that never fires. Filing computes the due tick Add
// would have: the wheel files before it moves past any staged deadline.
//
// AddAfter adds a timer whose deadline counts from the next Seal, which an
// event loop calls with one clock reading at the end of a pass: the timers
// set during the pass then share that reading (taken after each was set, so
// none fires early), and a pass whose timers were all stopped reads no
// clock. Until sealed a timer has no deadline: Pop and NextDeadline leave
// it out.
//
// Timers live in a slab of pointer-free nodes linked by uint32 indices and
// recycled through a free list. The slab grows only when every node is in
// use, so once a wheel has held its peak number of timers, Add, Stop and Pop
// do not allocate, and the garbage collector never needs to scan the slab.
//
// A Wheel is not safe for concurrent use: it belongs to one goroutine, the
// event loop's.
package wheel
