package benchmarks

import (
	"runtime"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Workload is one benchmark workload run on stepvm and on goroutines.
type Workload struct {
	Name       string // "Simple", ...
	Unit       string // "flow" or "iter"
	Stepvm     func(b *testing.B)
	Goroutines func(b *testing.B)
	// Variants are further sub-benchmarks of the workload, such as the
	// stepvm side written with Loop.Spawn; nil for most workloads.
	Variants []Variant
}

// Variant is a sub-benchmark beyond the two tracked sides of a Workload.
type Variant struct {
	Name string // sub-benchmark name, e.g. "stepvm-spawn"
	Run  func(b *testing.B)
}

// Workloads are the tracked workloads, in the order they are reported.
//
// B/waitflow, reported by ParallelWaitLoop, is the growth of the memory the
// process holds from just before the waiting flows are created to when all
// of them wait, divided by their number. It is HeapAlloc plus StackInuse of
// runtime.MemStats, each read after full collections (so HeapAlloc is the
// live heap, not garbage waiting for a sweep), plus, for stepvm, the growth
// of Loop.Stats().ArenaReserved. HeapAlloc rather than Sys because Sys grows
// in the runtime's large reservation steps and never shrinks, so a few
// megabytes of flows would show as noise; StackInuse is added because
// goroutine stacks are not part of the heap, and ArenaReserved because the
// arenas are mapped directly from the OS and appear in neither. The driver's
// slices of handles and channels are allocated before the first reading
// and are not counted; a goroutine's channel, its runtime descriptor (when
// not reused from a goroutine that exited earlier in the process) and its
// blocked-receive record are. Left out is the record the runtime keeps
// off its heap for each runtime.AddCleanup (56 bytes in Go 1.26), which
// every stepvm root and floor flow registers and a goroutine does not:
// MemStats shows it only inside OtherSys, a reserve that grows in steps
// and is reused, so it cannot be read per flow (the README counts it).
var Workloads = []Workload{
	{Name: "Simple", Unit: "flow", Stepvm: simpleStepvm, Goroutines: simpleGoroutines,
		Variants: []Variant{{"stepvm-spawn", simpleSpawn}, {"floor", floorSimple}}},
	{Name: "Parallel", Unit: "flow", Stepvm: parallelStepvm, Goroutines: parallelGoroutines,
		Variants: []Variant{{"stepvm-spawn", parallelSpawn}, {"stepvm-300flows", withBatch(300, parallelStepvm)}}},
	{Name: "ParallelWaitLoop", Unit: "iter", Stepvm: waitLoopStepvm, Goroutines: waitLoopGoroutines,
		Variants: []Variant{{"stepvm-300flows", withBatch(300, waitLoopStepvm)}, {"floor", floorWaitLoop}}},
	{Name: "Sequence", Unit: "iter", Stepvm: sequenceStepvm, Goroutines: sequenceGoroutines,
		Variants: []Variant{{"goroutines-pull", sequencePull}}},
	{Name: "ErrorPath", Unit: "flow", Stepvm: errorStepvm, Goroutines: errorGoroutines,
		Variants: []Variant{{"stepvm-spawn", errorSpawn}, {"floor", floorErrorPath}}},
	{Name: "TimeoutCancel", Unit: "flow", Stepvm: timeoutStepvm, Goroutines: timeoutGoroutines,
		Variants: []Variant{{"stepvm-spawn", timeoutSpawn}, {"goroutines-afterfunc", timeoutAfterFunc}}},
}

// withBatch runs bench with batches of n flows instead of batchSize: few
// enough for all of them to stay in the near caches, which separates the
// cost of the path from that of reaching each flow's memory.
func withBatch(n int, bench func(*testing.B)) func(*testing.B) {
	return func(b *testing.B) {
		prev := batchSize
		batchSize = min(n, prev) // tests lower batchSize further
		defer func() { batchSize = prev }()
		bench(b)
	}
}

// batchSize is the number of flows Parallel creates before completing them
// and ParallelWaitLoop keeps waiting: 30,000 as in the reference benchmark.
// Tests lower it.
var batchSize = 30000

// reportPer reports the timed duration per benchmark op as ns/unit. Every
// workload counts one op per unit (flow or iteration), so the metric equals
// ns/op; it is reported under its own name so that figures of differently
// shaped workloads are not mistaken for one another.
func reportPer(b *testing.B, unit string) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/"+unit)
}

// timeFlows runs flow once to warm the loop's pools, calls reset (if not
// nil) to zero what the workload counts, then times b.N runs of flow and
// reports them per flow.
func timeFlows(b *testing.B, flow, reset func()) {
	flow()
	if reset != nil {
		reset()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		flow()
	}
	b.StopTimer()
	reportPer(b, "flow")
}

// memInUse returns the bytes of live Go heap and goroutine stacks, plus the
// arena chunks held by l's roots when l is not nil (see Workloads).
func memInUse(l *vm.Loop) int64 {
	// The second collection frees what the cleanups run after the first
	// (those of roots dropped earlier) let go of.
	runtime.GC()
	runtime.Gosched()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := int64(ms.HeapAlloc) + int64(ms.StackInuse)
	if l != nil {
		n += l.Stats().ArenaReserved
	}
	return n
}
