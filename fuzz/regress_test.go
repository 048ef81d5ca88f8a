package fuzz

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// openBugs are the repro programs of testdata/bugs whose bug (BUGS.md) is
// not fixed yet: they are skipped so that the suite stays green. Once
// fixed, a repro leaves this list and joins the seed corpus.
var openBugs = map[string]string{}

// TestBugRepros runs the programs that made the fuzzer fail.
func TestBugRepros(t *testing.T) {
	files, err := filepath.Glob("testdata/bugs/*.step")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".step")
		t.Run(name, func(t *testing.T) {
			if title, open := openBugs[name]; open {
				t.Skip("BUGS.md: " + title)
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := prog.Parse(string(src))
			if err != nil {
				t.Fatal(err)
			}
			check(t, p, Options{GC: true})
		})
	}
}

// TestHarnessFreesItsLoop checks that many runs do not accumulate loops
// (BUG-F3 made the fuzzer's worker grow by 250 KB a run).
func TestHarnessFreesItsLoop(t *testing.T) {
	p := prog.Generate([]byte("\x01\x01\x00\x02"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 2000 {
		if _, err := Run(p, fuzzLimits, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	// A loop retained per run would hold more than 300 MB here.
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 32<<20 {
		t.Fatalf("the heap grew by %d MB over 2000 runs", grown>>20)
	}
}
