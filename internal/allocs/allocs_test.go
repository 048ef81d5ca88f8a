package allocs

import "testing"

var sink []byte

// One allocation in every 1000 calls is counted, where AllocsPerRun rounds
// it away.
func TestCountSeesOneAllocationPerMeasurement(t *testing.T) {
	i := 0
	f := func() {
		if i++; i%1000 == 500 {
			sink = make([]byte, 64)
		}
	}
	if n := Count(1000, f); n != 1 {
		t.Fatalf("Count = %d for a function that allocates once in 1000 calls, want 1", n)
	}
	if avg := testing.AllocsPerRun(1000, f); avg != 0 {
		t.Fatalf("AllocsPerRun = %v: it no longer rounds down, and Count may not be needed", avg)
	}
}

// A measurement spoiled once is made again.
func TestCountRetries(t *testing.T) {
	i := 0
	if n := Count(1000, func() {
		if i++; i == 700 { // in the first measurement only
			sink = make([]byte, 64)
		}
	}); n != 0 {
		t.Fatalf("Count = %d for a single allocation in the first measurement, want 0 after a retry", n)
	}
}

func TestCountNone(t *testing.T) {
	x := 0
	if n := Count(1000, func() { x++ }); n != 0 {
		t.Fatalf("Count = %d for a function that allocates nothing", n)
	}
}
