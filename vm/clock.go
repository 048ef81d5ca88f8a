package vm

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the event loop's source of time. The loop reads it when it arms
// a timer and once per pass while timers are pending.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, so that tests of
// timeouts are deterministic. It is safe for concurrent use. A Loop that
// sleeps in Run is woken by Advance.
type ManualClock struct {
	mu    sync.Mutex
	now   time.Time
	loops []*Loop
	// moves counts the Advances, raised after now moves and before the
	// loops are roused: see Loop.Run.
	moves atomic.Uint64
}

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and wakes the loops that use it.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	loops := c.loops
	c.mu.Unlock()
	c.moves.Add(1)
	for _, l := range loops {
		l.rouse()
	}
}

func (c *ManualClock) attach(l *Loop) {
	c.mu.Lock()
	c.loops = append(c.loops, l)
	c.mu.Unlock()
}
