package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stepvm/stepvm/benchmarks"
)

// side is the measurement of one side of a workload.
type side struct {
	NsPerUnit     float64 `json:"ns_per_unit"`
	AllocsPerUnit int64   `json:"allocs_per_unit"`
	BytesPerUnit  int64   `json:"bytes_per_unit"`
	// BytesPerWaitingFlow is the memory one waiting flow holds, for the
	// workloads that measure it; 0 otherwise.
	BytesPerWaitingFlow float64 `json:"bytes_per_waiting_flow,omitempty"`
	N                   int     `json:"n"`
}

type row struct {
	Workload   string `json:"workload"`
	Unit       string `json:"unit"`
	Stepvm     side   `json:"stepvm"`
	Goroutines side   `json:"goroutines"`
	// Ratio is goroutines' time over stepvm's: above 1, stepvm is faster.
	Ratio float64 `json:"ratio"`
}

// bench runs the workloads of package benchmarks with testing.Benchmark
// and prints a table, or JSON.
func bench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	benchtime := fs.Duration("benchtime", time.Second, "time per side and workload")
	filter := fs.String("run", "", "only the workloads whose name matches this regexp")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile to this file")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("bench takes no arguments, got %q", pos[0])
	}
	if *benchtime <= 0 {
		return usagef("--benchtime must be positive")
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return usagef("--run: %v", err)
	}
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		return err
	}
	var workloads []benchmarks.Workload
	for _, w := range benchmarks.Workloads {
		if re.MatchString(w.Name) {
			workloads = append(workloads, w)
		}
	}
	if len(workloads) == 0 {
		return usagef("--run %q matches no workload", *filter)
	}
	// The memory profile is written after the run, but its file is
	// opened first: a bad path is a bad command line, reported before
	// the benchmarks take their seconds each, not after all of them. The
	// files are emptied only once the command line is known good, so
	// that a refused one leaves what they held.
	var memf, cpuf *os.File
	if *memprofile != "" {
		if memf, err = openProfile(*memprofile); err != nil {
			return usageError{err}
		}
		defer memf.Close()
	}
	if *cpuprofile != "" {
		if cpuf, err = openProfile(*cpuprofile); err != nil {
			return usageError{err}
		}
		defer cpuf.Close()
		// Into one file, the CPU profile, written last, would replace
		// the memory profile, and the run would end as if both were there.
		if memf != nil && sameFile(cpuf, memf) {
			return usagef("--cpuprofile and --memprofile name the same file")
		}
	}
	for _, f := range []*os.File{memf, cpuf} {
		if f != nil {
			if err := f.Truncate(0); err != nil {
				return err
			}
		}
	}
	if cpuf != nil {
		if err := pprof.StartCPUProfile(cpuf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var rows []row
	total := 2 * len(workloads)
	progress := 0 // length of the progress line on stderr
	clearProgress := func() { fmt.Fprintf(stderr, "\r%*s\r", progress, "") }
	for i, w := range workloads {
		r := row{Workload: w.Name, Unit: w.Unit}
		for j, s := range []struct {
			name string
			fn   func(*testing.B)
			out  *side
		}{{"stepvm", w.Stepvm, &r.Stepvm}, {"goroutines", w.Goroutines, &r.Goroutines}} {
			clearProgress()
			line := fmt.Sprintf("bench %d/%d: %s on %s...", 2*i+j+1, total, w.Name, s.name)
			progress = len(line)
			fmt.Fprint(stderr, line)
			res := testing.Benchmark(s.fn)
			if res.N == 0 {
				clearProgress()
				return fmt.Errorf("benchmark %s on %s failed", w.Name, s.name)
			}
			*s.out = side{
				NsPerUnit:           float64(res.T.Nanoseconds()) / float64(res.N),
				AllocsPerUnit:       res.AllocsPerOp(),
				BytesPerUnit:        res.AllocedBytesPerOp(),
				BytesPerWaitingFlow: res.Extra["B/waitflow"],
				N:                   res.N,
			}
		}
		if r.Stepvm.NsPerUnit > 0 {
			r.Ratio = r.Goroutines.NsPerUnit / r.Stepvm.NsPerUnit
		}
		rows = append(rows, r)
	}
	clearProgress()
	if memf != nil {
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(memf, 0); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	printTable(stdout, rows, *benchtime)
	return nil
}

// openProfile opens the file of a profile for writing, creating it if need
// be, without emptying it yet.
func openProfile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o666)
}

func sameFile(a, b *os.File) bool {
	sa, err := a.Stat()
	if err != nil {
		return false
	}
	sb, err := b.Stat()
	return err == nil && os.SameFile(sa, sb)
}

func printTable(w io.Writer, rows []row, benchtime time.Duration) {
	fmt.Fprintf(w, "stepvm vs goroutines (%s per side, GOMAXPROCS=%d)\n", benchtime, runtime.GOMAXPROCS(0))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\top\tstepvm ns/op\tgoroutines ns/op\tratio\tstepvm allocs/op\tgoroutines allocs/op\tstepvm B/waitflow\tgoroutines B/waitflow\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2fx\t%d\t%d\t%s\t%s\t\n",
			r.Workload, r.Unit, r.Stepvm.NsPerUnit, r.Goroutines.NsPerUnit, r.Ratio,
			r.Stepvm.AllocsPerUnit, r.Goroutines.AllocsPerUnit,
			perFlow(r.Stepvm.BytesPerWaitingFlow), perFlow(r.Goroutines.BytesPerWaitingFlow))
	}
	tw.Flush()
	fmt.Fprintln(w, "op: one flow or one loop iteration; ratio: goroutines ns/op over stepvm ns/op (above 1, stepvm is faster);")
	fmt.Fprintln(w, "B/waitflow: memory held per waiting flow (ParallelWaitLoop only).")
}

func perFlow(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", b)
}
