// Package benchmarks compares stepvm with the fastest idiomatic Go that does
// the same work on goroutines, in the same go test -bench run.
//
// The workloads are those of the FTN12 C++ reference implementation's
// benchmark: Simple (one empty step per flow), Parallel (flows waiting for an
// external completion, created and completed in batches), ParallelWaitLoop
// (flows looping on external completions), Sequence (an asynchronous loop of
// empty iterations), ErrorPath (a step that fails and whose handler
// recovers) and TimeoutCancel (a step with a timeout that completes before
// its deadline). Each is a [Workload] with a stepvm side and a goroutines
// side; every side checks its own result and fails the benchmark when the
// work was not done.
//
// Simple, ParallelWaitLoop and ErrorPath also have a floor variant: the
// least work a Go step VM can do for that workload alone (see floor.go),
// which bounds what tuning stepvm can reach.
//
// Every benchmark reports allocations and the time per unit of work (ns/flow
// or ns/iter). ParallelWaitLoop also reports B/waitflow, the memory one
// waiting flow holds (see [Workloads] for what is counted).
//
// Run them with
//
//	go test -run '^$' -bench . -benchmem ./benchmarks
//
// The stepvm side drives its Loop on the benchmark goroutine, with the real
// clock, and closes it when done, so that the garbage collector returns the
// arenas of the roots it drops. The goroutines side uses one goroutine per flow, as idiomatic Go
// does, with GOMAXPROCS as the test binary sets it.
package benchmarks
