package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stepvm/stepvm/fuzz"
)

// stepvm runs the command with args and returns its exit status and
// outputs.
func stepvm(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemoPrintsTheSpecOutput(t *testing.T) {
	code, out, errOut := stepvm(t, "", "demo")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, e := range fuzz.Examples() {
		want := "== " + e.Title + "\n"
		for _, l := range strings.SplitAfter(strings.TrimSuffix(e.Output, "\n"), "\n") {
			want += "   " + l
		}
		if !strings.Contains(out, want+"\n") {
			t.Errorf("demo output lacks %s as the spec shows it:\n%s\n--- output:\n%s", e.Name, want, out)
		}
	}
}

func TestDemoVerbose(t *testing.T) {
	code, out, _ := stepvm(t, "", "demo", "-v")
	if code != exitOK || !strings.Contains(out, "   main: catch s2 myerror\n") {
		t.Fatalf("exit %d; output lacks the trace of FTN12 1.2:\n%s", code, out)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoSteps = `root main {
  step {
    success 1 "a"
  }
  step {
    print "{arg1}{arg0}"
  }
}
`

const twoStepsTrace = `main: enter s1
main: enter s2 1 "a"
main: print a1
main: done ok
`

func TestRun(t *testing.T) {
	file := writeFile(t, "p.step", twoSteps)
	for _, args := range [][]string{{"run", file}, {"run", "--model", file}, {"run", file, "--model"}} {
		code, out, errOut := stepvm(t, "", args...)
		if code != exitOK || out != twoStepsTrace || errOut != "" {
			t.Errorf("%v: exit %d, stdout\n%s\nstderr %q", args, code, out, errOut)
		}
	}
	code, out, _ := stepvm(t, twoSteps, "run", "--program", "-")
	if code != exitOK || out != twoSteps+"\n"+twoStepsTrace {
		t.Errorf("run --program -: exit %d\n%s", code, out)
	}
}

func TestRunDiff(t *testing.T) {
	file := writeFile(t, "p.step", twoSteps)
	code, out, _ := stepvm(t, "", "run", "--diff", file)
	if code != exitOK || out != "the VM and the model agree on 4 trace lines\n" {
		t.Errorf("exit %d, output %q", code, out)
	}
}

func TestRunTruncated(t *testing.T) {
	file := writeFile(t, "p.step", "root r {\n  loop {\n  }\n}\n")
	code, out, errOut := stepvm(t, "", "run", "--max-trace", "3", file)
	if code != exitOK || out != "r: iter s1\nr: iter s1\nr: iter s1\n" || errOut != "stepvm: trace truncated at 3 lines\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRunCorpusFile runs the corpus files of both fuzz targets: the tool
// reproduces a fuzzer's finding from the file go test -fuzz wrote.
func TestRunCorpusFile(t *testing.T) {
	for _, target := range []string{"FuzzParse", "FuzzVMvsModel"} {
		file := filepath.Join("..", "..", "fuzz", "testdata", "fuzz", target, "ftn12-1.2-error-handling")
		code, out, errOut := stepvm(t, "", "run", file)
		if code != exitOK || !strings.Contains(out, "main: print Level 0 func2: Prm\n") {
			t.Errorf("%s: exit %d, stderr %q, stdout\n%s", target, code, errOut, out)
		}
	}
}

func TestErrors(t *testing.T) {
	bad := writeFile(t, "bad.step", "root r {\n  step {\n    print 1\n  }\n}\n")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"frobnicate"}, exitUsage, `stepvm: unknown command "frobnicate" (want run, demo, bench or help)`},
		{[]string{"run"}, exitUsage, "stepvm: run wants one file, got 0"},
		{[]string{"run", "a", "b"}, exitUsage, "stepvm: run wants one file, got 2"},
		{[]string{"run", "--nope", "a"}, exitUsage, "stepvm: flag provided but not defined: -nope"},
		{[]string{"run", "--model", "--diff", bad}, exitUsage, "stepvm: --model and --diff exclude each other"},
		{[]string{"run", "--max-trace", "0", bad}, exitUsage, "stepvm: --max-trace must be at least 1"},
		{[]string{"run", filepath.Join(t.TempDir(), "none.step")}, exitUsage, "no such file or directory"},
		{[]string{"run", bad}, exitUsage, "bad.step:3:11: expected string, found \"1\""},
		{[]string{"demo", "x"}, exitUsage, `stepvm: demo takes no arguments, got "x"`},
		{[]string{"bench", "--run", "("}, exitUsage, "stepvm: --run: error parsing regexp"},
		{[]string{"bench", "--run", "^NoSuchWorkload$"}, exitUsage, `stepvm: --run "^NoSuchWorkload$" matches no workload`},
		{[]string{"bench", "--benchtime", "0s"}, exitUsage, "stepvm: --benchtime must be positive"},
	} {
		code, out, errOut := stepvm(t, "", c.args...)
		if code != c.code || out != "" || !strings.Contains(errOut, c.msg) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", c.args, code, out, errOut, c.code, c.msg)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	code, out, errOut := stepvm(t, "", "bench", "--json", "--run", "^Simple$", "--benchtime", "10ms")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rows []row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].Workload != "Simple" || rows[0].Stepvm.NsPerUnit <= 0 ||
		rows[0].Goroutines.NsPerUnit <= 0 || rows[0].Ratio <= 0 {
		t.Errorf("rows = %+v", rows)
	}
	if !strings.Contains(errOut, "bench 2/2: Simple on goroutines...") {
		t.Errorf("no progress line on stderr: %q", errOut)
	}
}

func TestBenchTable(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	mem := filepath.Join(t.TempDir(), "mem.prof")
	code, out, errOut := stepvm(t, "", "bench", "--run", "^Simple$", "--benchtime", "10ms", "--cpuprofile", prof, "--memprofile", mem)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "stepvm ns/op") || !strings.Contains(lines[2], "Simple") {
		t.Errorf("table:\n%s", out)
	}
	for _, f := range []string{prof, mem} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("profile %s not written: %v", f, err)
		}
	}
}

// TestRunHugeMaxTrace: the pass limit derived from --max-trace must not
// overflow into a negative one, which stopped every run at once.
func TestRunHugeMaxTrace(t *testing.T) {
	file := writeFile(t, "p.step", twoSteps)
	for _, n := range []string{"92233720368547758", "9223372036854775807"} {
		for _, args := range [][]string{{"run", "--max-trace", n, file}, {"run", "--model", "--max-trace", n, file}} {
			code, out, errOut := stepvm(t, "", args...)
			if code != exitOK || out != twoStepsTrace || errOut != "" {
				t.Errorf("%v: exit %d, stdout\n%s\nstderr %q", args, code, out, errOut)
			}
		}
	}
}

// TestBenchBadProfilePathFailsFirst: a profile that cannot be written is a
// bad command line, reported before any benchmark runs (they take seconds
// each), not after all of them.
func TestBenchBadProfilePathFailsFirst(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "x.prof")
	for _, flag := range []string{"--cpuprofile", "--memprofile"} {
		code, out, errOut := stepvm(t, "", "bench", "--run", "^Simple$", "--benchtime", "10ms", flag, bad)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "no such file or directory") || strings.Contains(errOut, "bench 1/2") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d before any benchmark", flag, code, out, errOut, exitUsage)
		}
	}
}

// nestedLoops is a root whose body nests n-1 loops, the innermost of which
// breaks out of the outermost.
func nestedLoops(n int) string {
	return "root r {\nloop out {\n" + strings.Repeat("loop {\n", n-2) + "break out\n" + strings.Repeat("}\n", n)
}

// TestRunDeepNesting: nesting is bounded, so that a small file cannot take
// the parser's memory (it keeps each level's loop labels) or stack, and
// the program prints back within the limit.
func TestRunDeepNesting(t *testing.T) {
	file := writeFile(t, "ok.step", nestedLoops(100))
	code, out, errOut := stepvm(t, "", "run", "--program", file)
	if code != exitOK || !strings.HasSuffix(out, "r: iter s99\nr: done ok\n") || errOut != "" {
		t.Errorf("depth 100: exit %d, stderr %q, stdout ends %q", code, errOut, out[max(0, len(out)-200):])
	}
	file = writeFile(t, "deep.step", nestedLoops(20_000))
	code, out, errOut = stepvm(t, "", "run", file)
	if code != exitUsage || out != "" || !strings.HasSuffix(errOut, "deep.step:101:6: blocks nested deeper than 100\n") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("depth 20000: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRunNoRoot: a file that declares no root (an empty file, say) is a
// bad file, not a run that printed nothing and went well.
func TestRunNoRoot(t *testing.T) {
	for _, src := range []string{"", "\n# nothing\n", "mutex m 1 -1\nmodel x {\n  step {\n  }\n}\n", "go test fuzz v1\nstring(\"\")\n"} {
		file := writeFile(t, "p.step", src)
		for _, args := range [][]string{{"run", file}, {"run", "--diff", file}} {
			code, out, errOut := stepvm(t, "", args...)
			if code != exitUsage || out != "" || errOut != "stepvm: "+file+": no root to run\n" {
				t.Errorf("%q %v: exit %d, stdout %q, stderr %q", src, args[:len(args)-1], code, out, errOut)
			}
		}
	}
	code, _, errOut := stepvm(t, "", "run", "-")
	if code != exitUsage || errOut != "stepvm: -: no root to run\n" {
		t.Errorf("empty standard input: exit %d, stderr %q", code, errOut)
	}
}

// endless is an input that never ends, like /dev/zero.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestRunEndlessInput: an input that never ends is read up to a bound and
// reported, not read until memory runs out.
func TestRunEndlessInput(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"run", "-"}, endless{}, &out, &errOut)
	if code != exitUsage || out.Len() != 0 || errOut.String() != "stepvm: -: larger than 16 MiB: not a step program\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestHelp: every way of asking prints the usage on stdout, and it names
// every flag, the exit statuses and the fields of bench --json.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}, {"run", "-h"}, {"demo", "--help"}, {"bench", "-help"}} {
		code, out, errOut := stepvm(t, "", args...)
		if code != exitOK || out != usage || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	js, err := json.Marshal(row{Stepvm: side{BytesPerWaitingFlow: 1}})
	var r map[string]any
	if err == nil {
		err = json.Unmarshal(js, &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for k, v := range r {
		fields = append(fields, k)
		if m, ok := v.(map[string]any); ok {
			fields = slices.AppendSeq(fields, maps.Keys(m))
		}
	}
	for _, want := range append(fields, "--model", "--diff", "--program", "--max-trace", "-v", "--json",
		"--benchtime", "--run", "--cpuprofile", "--memprofile", "Exit status: 0 ok; 1 the\ntraces diverge", "2 a bad\ncommand line") {
		if !strings.Contains(usage, want) {
			t.Errorf("usage does not name %q", want)
		}
	}
}

// TestRunCorpusFileForms: a corpus file is read as go test reads it, CRLF
// line ends and blank lines included; one of several values, from a fuzz
// target of more arguments, is named as such.
func TestRunCorpusFileForms(t *testing.T) {
	want := "r: enter s1\nr: print hi\nr: done ok\n"
	for _, src := range []string{
		"go test fuzz v1\r\nstring(\"root r { step { print \\\"hi\\\" } }\")\r\n",
		"go test fuzz v1\n\n  string(`root r { step { print \"hi\" } }`)\n\n",
	} {
		code, out, errOut := stepvm(t, src, "run", "-")
		if code != exitOK || out != want || errOut != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", src, code, out, errOut)
		}
	}
	code, out, errOut := stepvm(t, "go test fuzz v1\n[]byte(\"a\")\nint(1)\n", "run", "-")
	if code != exitUsage || out != "" || errOut != "stepvm: -: a corpus entry of 2 values, not of one []byte or string\n" {
		t.Errorf("two values: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestBenchProfilesInOneFile: the two profiles cannot share a file (the
// CPU profile replaced the memory profile there, exit status 0), however
// the two paths spell it.
func TestBenchProfilesInOneFile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.prof")
	if err := os.WriteFile(prof, []byte("kept"), 0o666); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := stepvm(t, "", "bench", "--run", "^Simple$", "--benchtime", "10ms",
		"--memprofile", prof, "--cpuprofile", dir+"/./p.prof")
	if code != exitUsage || out != "" || errOut != "stepvm: --cpuprofile and --memprofile name the same file\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Refused, the command leaves the file as it was (it used to empty it).
	if b, err := os.ReadFile(prof); err != nil || string(b) != "kept" {
		t.Errorf("the file holds %q (%v), want what it held", b, err)
	}
}
