package benchmarks

import (
	"flag"
	"testing"
)

// TestWorkloads runs every side of every workload once with a small N and
// small batches, so that go test checks that the work is done (each side
// verifies its own counters) and that the metrics are reported.
func TestWorkloads(t *testing.T) {
	prevBatch := batchSize
	batchSize = 64 // smallN spans several batches, the last one partial
	defer func() { batchSize = prevBatch }()
	defer setSmallN(t)()

	for _, w := range Workloads {
		sides := append([]Variant{{"stepvm", w.Stepvm}, {"goroutines", w.Goroutines}}, w.Variants...)
		for _, s := range sides {
			t.Run(w.Name+"/"+s.Name, func(t *testing.T) {
				r := runSmall(t, w.Name+"/"+s.Name, s.Run, w.Unit)
				// With 64 flows, B/waitflow is within the noise of the
				// collections around it: only its presence is checked.
				if _, ok := r.Extra["B/waitflow"]; w.Name == "ParallelWaitLoop" && !ok {
					t.Error("B/waitflow is not reported")
				}
			})
		}
	}
}

// TestSyncWorkloads is TestWorkloads for BenchmarkMutex and
// BenchmarkThrottle, whose sides check their own counters too.
func TestSyncWorkloads(t *testing.T) {
	defer setSmallN(t)()
	for _, s := range []Variant{
		{"Mutex/stepvm", mutexStepvm}, {"Mutex/goroutines", mutexChan}, {"Mutex/goroutines-cond", mutexCond},
		{"Throttle/stepvm", throttleStepvm}, {"Throttle/goroutines", throttleBucket},
	} {
		t.Run(s.Name, func(t *testing.T) { runSmall(t, s.Name, s.Run, "entry") })
	}
}

// smallN is the N of the benchmark runs of the tests.
const smallN = 150

// setSmallN makes testing.Benchmark run smallN ops, and returns what puts
// the flag back.
func setSmallN(t *testing.T) func() {
	bt := flag.Lookup("test.benchtime")
	prev := bt.Value.String()
	if err := bt.Value.Set("150x"); err != nil {
		t.Fatal(err)
	}
	return func() { bt.Value.Set(prev) }
}

// runSmall runs the benchmark side fn, named name, for smallN ops and
// fails t unless it did them all (a side that fails its check stops
// short) and reported a positive ns/unit.
func runSmall(t *testing.T, name string, fn func(*testing.B), unit string) testing.BenchmarkResult {
	t.Helper()
	r := testing.Benchmark(fn)
	if r.N != smallN {
		t.Fatalf("ran %d ops, want %d: the workload failed its check; "+
			"run go test -run '^$' -bench '%s$' to see why", r.N, smallN, name)
	}
	if v, ok := r.Extra["ns/"+unit]; !ok || v <= 0 {
		t.Errorf("ns/%s = %v, %v; want a positive figure", unit, v, ok)
	}
	return r
}

func TestWorkloadNames(t *testing.T) {
	want := []string{"Simple", "Parallel", "ParallelWaitLoop", "Sequence", "ErrorPath", "TimeoutCancel"}
	if len(Workloads) != len(want) {
		t.Fatalf("%d workloads, want %d", len(Workloads), len(want))
	}
	for i, w := range Workloads {
		if w.Name != want[i] || w.Stepvm == nil || w.Goroutines == nil || (w.Unit != "flow" && w.Unit != "iter") {
			t.Errorf("workload %d = %q (unit %q), want %q with both sides", i, w.Name, w.Unit, want[i])
		}
	}
}
