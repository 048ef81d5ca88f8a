// Package fuzzinput joins fuzz targets and seeded random tests. Run runs
// a fuzz target's check on inputs drawn from a fixed seed, so that plain
// go test covers more of the target's space than its seed corpus does, the
// same way on every run; Source turns a fuzz input into the random source
// of a seeded model test, which makes that test a fuzz target; Bytes deals
// out an input a byte at a time.
package fuzzinput

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Run calls check, each time as a subtest of t, on n inputs of 32 to 511
// bytes drawn from seed (a tenth of them with -short), and stops at the
// first that fails, quoting it. The environment variable env, when set to
// a count, replaces n: a longer search by hand.
func Run(t *testing.T, seed uint64, n int, env string, check func(*testing.T, []byte)) {
	t.Helper()
	if testing.Short() {
		n /= 10
	}
	if s := os.Getenv(env); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range n {
		in := make([]byte, 32+rng.IntN(480))
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		if !t.Run("", func(t *testing.T) { check(t, in) }) {
			t.Fatalf("input %d: %q", i, in)
		}
	}
}
