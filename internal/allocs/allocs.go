// Package allocs counts heap allocations for the zero-allocation tests.
//
// testing.AllocsPerRun divides the count by the number of runs, rounding
// down, so a path that allocates once in a thousand runs reads as 0. The
// tests that claim a path allocates nothing use Count, which returns the
// total: they fail on the first allocation.
package allocs

import "runtime"

// Count runs fn once to warm up, then runs more times, and returns the
// heap allocations the measured runs made. As AllocsPerRun, it runs with
// GOMAXPROCS 1 and counts MemStats.Mallocs, which include those other
// goroutines make meanwhile (the runtime's own, a test's leftover timer):
// a measurement that counts any is made again, up to three times in all,
// and Count returns the least. A path that allocates in every measurement,
// once in runs calls or more, is not missed.
func Count(runs int, fn func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fn()
	var least uint64
	for try := range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			fn()
		}
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; try == 0 || n < least {
			least = n
		}
		if least == 0 {
			break
		}
	}
	return least
}
