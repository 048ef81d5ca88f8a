package wheel_test

import (
	"fmt"
	"time"

	"github.com/stepvm/stepvm/internal/wheel"
)

// An event loop driven by a manual clock: jump to the next deadline, then
// pop everything due.
func Example() {
	const ms = int64(time.Millisecond)
	w := wheel.New(0, time.Millisecond)
	w.Add(30*ms, 3)
	w.Add(10*ms, 1)
	t := w.Add(20*ms, 2)
	w.Add(10*ms, 11) // same tick as 1: comes out after it
	w.Stop(t)

	for w.Len() > 0 {
		now, _ := w.NextDeadline()
		for {
			slot, ok := w.Pop(now)
			if !ok {
				break
			}
			fmt.Printf("%dms: %d\n", now/ms, slot)
		}
	}
	// Output:
	// 10ms: 1
	// 10ms: 11
	// 30ms: 3
}
