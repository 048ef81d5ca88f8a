package fuzz

import (
	"math/rand/v2"
	"testing"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// randomPrograms returns n programs generated from a fixed seed.
func randomPrograms(seed uint64, n int) []*prog.Program {
	rng := rand.New(rand.NewPCG(seed, 11))
	ps := make([]*prog.Program, n)
	for i := range ps {
		data := make([]byte, rng.IntN(300))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		ps[i] = prog.Generate(data)
	}
	return ps
}

// TestRandomPrograms runs generated programs from a fixed seed, so that
// plain go test covers the generator's space beyond the corpus.
func TestRandomPrograms(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	for _, p := range randomPrograms(7, n) {
		check(t, p, Options{})
	}
}

// TestRandomProgramsGC collects garbage after every pass of the loop: a
// value the VM keeps out of the collector's sight would be freed while in
// use and show in the trace.
func TestRandomProgramsGC(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 5
	}
	for _, p := range randomPrograms(8, n) {
		check(t, p, Options{GC: true})
	}
}
