package vm

import (
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Clock is the event loop's source of time. The loop reads it when it arms
// a timer outside a pass, once per pass while timers are pending (and again
// after that pass's timers fired, if one of them moved a ManualClock), and
// when Iterate tells how long to wait. A Clock that goes back makes the
// loop's time stand still until it moves on again: timers count only the
// time it moves forward. A panic in Now reaches whoever made the loop read
// it (the caller of RunUntilIdle, Iterate or Run, or of the call that armed
// a timer); the loop stays usable, and the timers of a pass that could not
// read the clock start counting at the next pass.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, so that tests of
// timeouts are deterministic. It is safe for concurrent use. A Loop that
// sleeps in Run is woken by Advance.
type ManualClock struct {
	mu    sync.Mutex
	now   time.Time
	loops []weak.Pointer[Loop] // weak: a clock outliving its loops does not keep them
	// moves counts the Advances, raised after now moves and before the
	// loops are roused: see Loop.Run.
	moves atomic.Uint64
	reads uint64 // Now calls, under mu: tests tell from them when a loop read the clock
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's reading: start plus every Advance so far.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

// Advance moves the clock forward by d and wakes the loops that use it.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	loops := c.loops
	c.mu.Unlock()
	c.moves.Add(1)
	for _, w := range loops {
		if l := w.Value(); l != nil {
			l.rouse()
		}
	}
}

// attach makes Advance wake l, and forgets the loops collected since the
// last attach. The list is copied, not compacted: Advance reads the old one
// outside the lock.
func (c *ManualClock) attach(l *Loop) {
	c.mu.Lock()
	loops := make([]weak.Pointer[Loop], 0, len(c.loops)+1)
	for _, w := range c.loops {
		if w.Value() != nil {
			loops = append(loops, w)
		}
	}
	c.loops = append(loops, weak.Make(l))
	c.mu.Unlock()
}
