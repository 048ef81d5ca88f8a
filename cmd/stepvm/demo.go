package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stepvm/stepvm/fuzz"
	"github.com/stepvm/stepvm/fuzz/prog"
)

// demo runs the specification's examples on the VM and prints what each
// prints (with -v, its whole trace). It fails if an example does not print
// what the specification shows.
func demo(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "print whole traces")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("demo takes no arguments, got %q", pos[0])
	}
	var wrong []string
	for i, e := range fuzz.Examples() {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "== %s\n", e.Title)
		t, err := fuzz.Run(e.Program(), prog.DefaultLimits, fuzz.Options{})
		if err != nil {
			return fmt.Errorf("%s: vm: %v", e.Name, err)
		}
		out := fuzz.Printed(t)
		text := out
		if *verbose {
			text = strings.Join(t.Lines, "\n") + "\n"
		}
		for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
			fmt.Fprintf(stdout, "   %s", l)
		}
		fmt.Fprintln(stdout)
		if out != e.Output {
			wrong = append(wrong, e.Name)
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("examples that do not print what the specification shows: %s", strings.Join(wrong, ", "))
	}
	return nil
}
