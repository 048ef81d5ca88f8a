package fuzz

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stepvm/stepvm/fuzz/model"
	"github.com/stepvm/stepvm/fuzz/prog"
)

var update = flag.Bool("update", false, "rewrite the seed corpus from the example programs")

// seeds returns the programs of the seed corpus by name: the
// specification's examples, testdata/programs and the repros of the bugs
// the fuzzer found, testdata/bugs, once fixed.
func seeds(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range Examples() {
		out[e.Name] = e.Source
	}
	files, err := filepath.Glob("testdata/programs/*.step")
	if err != nil {
		t.Fatal(err)
	}
	bugs, err := filepath.Glob("testdata/bugs/*.step")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range bugs {
		if _, open := openBugs[strings.TrimSuffix(filepath.Base(f), ".step")]; !open {
			files = append(files, f)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".step")] = string(b)
	}
	return out
}

// corpusFile is the text of a corpus entry in the format of go test -fuzz.
func corpusFile(typ, value string) string {
	return "go test fuzz v1\n" + typ + "(" + strconv.Quote(value) + ")\n"
}

// TestSeedCorpus checks that testdata/fuzz holds every seed program, as
// text for FuzzParse and as generator input for FuzzVMvsModel (go test
// -run TestSeedCorpus -update rewrites them).
func TestSeedCorpus(t *testing.T) {
	for name, src := range seeds(t) {
		p, err := prog.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		data, err := prog.Encode(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := map[string]string{
			filepath.Join("testdata/fuzz/FuzzParse", name):     corpusFile("string", src),
			filepath.Join("testdata/fuzz/FuzzVMvsModel", name): corpusFile("[]byte", string(data)),
		}
		for file, content := range want {
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(file)
			if err != nil || string(got) != content {
				t.Errorf("%s is missing or stale: go test ./fuzz -run TestSeedCorpus -update", file)
			}
		}
	}
}

// TestExamplesPrintTheSpecOutput runs each example on the VM and on the
// model: both print what the specification shows, and their traces agree.
func TestExamplesPrintTheSpecOutput(t *testing.T) {
	for _, e := range Examples() {
		t.Run(e.Name, func(t *testing.T) {
			p := e.Program()
			vt, err := Run(p, prog.DefaultLimits, Options{GC: true})
			if err != nil {
				t.Fatal(err)
			}
			mt, err := model.Run(p, prog.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got := Printed(vt); got != e.Output {
				t.Errorf("the VM printed\n%s\nthe spec shows\n%s", got, e.Output)
			}
			if got := Printed(mt); got != e.Output {
				t.Errorf("the model printed\n%s\nthe spec shows\n%s", got, e.Output)
			}
			if d := Divergence(vt, mt); d != "" {
				t.Error(d)
			}
		})
	}
}
