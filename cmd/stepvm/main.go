// Command stepvm runs step programs, the specification's examples and the
// benchmarks of stepvm.
//
// Usage:
//
//	stepvm                 the examples, then a short benchmark
//	stepvm run [flags] FILE
//	                       run a step program (package fuzz/prog) on the VM
//	                       and print its trace; FILE may also be a corpus
//	                       file of go test -fuzz (testdata/fuzz/...), or -
//	                       for standard input
//	  --model              run it on the reference model instead
//	  --diff               run it on both and show where the traces diverge
//	  --program            print the program before its trace
//	  --max-trace N        stop after N trace lines (default 2000)
//	stepvm demo [-v]       run the examples of FTN12 and of the JS
//	                       reference's README and print what they print
//	                       (-v: their whole traces)
//	stepvm bench [flags]   run the workloads of package benchmarks on stepvm
//	                       and on goroutines and print a table
//	  --json               print JSON instead
//	  --benchtime D        time per side and workload (default 1s)
//	  --run REGEXP         only the workloads whose name matches
//	  --cpuprofile FILE    write a CPU profile
//	  --memprofile FILE    write an allocation profile (not the CPU
//	                       profile's file)
//	stepvm help            print the usage
//
// Flags take one dash or two and may follow FILE. A file must be a step
// program with a root, of at most 16 MiB (package fuzz/prog bounds its
// nesting and what its copies expand to). A bad command line or a bad file
// gives a one-line error and exit status 2; a run whose traces diverge,
// whose VM breaks an invariant, or a benchmark that fails exits with
// status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
)

func main() {
	testing.Init() // testing.Benchmark reads the test flags
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exit statuses
const (
	exitOK      = 0
	exitFailed  = 1 // divergence, broken invariant, failed benchmark
	exitUsage   = 2 // bad command line or bad file
	shortBench  = "100ms"
	defaultMaxT = 2000
)

// usageError is a bad command line or input file.
type usageError struct{ error }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run is the command: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) == 0:
		if err = demo(nil, stdout); err == nil {
			fmt.Fprintln(stdout)
			err = bench([]string{"--benchtime", shortBench}, stdout, stderr)
		}
	case args[0] == "run":
		err = runFile(args[1:], stdin, stdout, stderr)
	case args[0] == "demo":
		err = demo(args[1:], stdout)
	case args[0] == "bench":
		err = bench(args[1:], stdout, stderr)
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q (want run, demo, bench or help)", args[0])
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "stepvm: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailed
}

const usage = `usage:
  stepvm                    run the examples, then a short benchmark
  stepvm run [flags] FILE   run a step program (package fuzz/prog) on the VM and
                            print its trace; FILE may also be a corpus file of
                            go test -fuzz (testdata/fuzz/...), or - for standard
                            input
    --model                 run it on the reference model instead
    --diff                  run it on both and show where the traces diverge
    --program               print the program before its trace
    --max-trace N           stop after N trace lines (default 2000)
  stepvm demo [-v]          run the examples of FTN12 and of the JS reference's
                            README and print what they print (-v: whole traces)
  stepvm bench [flags]      run the workloads of package benchmarks on stepvm
                            and on goroutines and print a table
    --json                  print JSON instead: a list of {workload, unit,
                            ratio, stepvm, goroutines}, each side {ns_per_unit,
                            allocs_per_unit, bytes_per_unit, n} and, where
                            measured, bytes_per_waiting_flow
    --benchtime D           time per side and workload (default 1s)
    --run REGEXP            only the workloads whose name matches
    --cpuprofile FILE       write a CPU profile
    --memprofile FILE       write an allocation profile
  stepvm help               this text

Flags take one dash or two and may follow FILE. Exit status: 0 ok; 1 the
traces diverge, the VM breaks an invariant or a benchmark fails; 2 a bad
command line or file.
`

// parseFlags parses args with fs, allowing flags after the positional
// arguments, which it returns.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
