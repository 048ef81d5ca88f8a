package benchmarks

import (
	"flag"
	"testing"
)

// TestWorkloads runs every side of every workload once with a small N and
// small batches, so that go test checks that the work is done (each side
// verifies its own counters) and that the metrics are reported.
func TestWorkloads(t *testing.T) {
	const n = 150
	prevBatch := batchSize
	batchSize = 64 // n spans several batches, the last one partial
	defer func() { batchSize = prevBatch }()
	bt := flag.Lookup("test.benchtime")
	prevTime := bt.Value.String()
	if err := bt.Value.Set("150x"); err != nil {
		t.Fatal(err)
	}
	defer bt.Value.Set(prevTime)

	for _, w := range Workloads {
		sides := append([]Variant{{"stepvm", w.Stepvm}, {"goroutines", w.Goroutines}}, w.Variants...)
		for _, s := range sides {
			t.Run(w.Name+"/"+s.Name, func(t *testing.T) {
				r := testing.Benchmark(s.Run)
				if r.N != n {
					t.Fatalf("ran %d ops, want %d: the workload failed its check; "+
						"run go test -run '^$' -bench '%s/%s$' to see why", r.N, n, w.Name, s.Name)
				}
				if v, ok := r.Extra["ns/"+w.Unit]; !ok || v <= 0 {
					t.Errorf("ns/%s = %v, %v; want a positive figure", w.Unit, v, ok)
				}
				// With 64 flows, B/waitflow is within the noise of the
				// collections around it: only its presence is checked.
				if _, ok := r.Extra["B/waitflow"]; w.Name == "ParallelWaitLoop" && !ok {
					t.Error("B/waitflow is not reported")
				}
			})
		}
	}
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
