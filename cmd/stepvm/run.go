package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/stepvm/stepvm/fuzz"
	"github.com/stepvm/stepvm/fuzz/model"
	"github.com/stepvm/stepvm/fuzz/prog"
)

func runFile(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	onModel := fs.Bool("model", false, "run on the reference model")
	diff := fs.Bool("diff", false, "run on the VM and the model and compare")
	showProg := fs.Bool("program", false, "print the program first")
	maxTrace := fs.Int("max-trace", defaultMaxT, "stop after this many trace lines")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("run wants one file, got %d", len(pos))
	case *onModel && *diff:
		return usagef("--model and --diff exclude each other")
	case *maxTrace < 1:
		return usagef("--max-trace must be at least 1")
	}
	p, err := load(pos[0], stdin)
	if err != nil {
		return err
	}
	if *showProg {
		fmt.Fprintln(stdout, p)
	}
	// The pass limit saturates: a huge --max-trace must not wrap it to a
	// negative one, which would stop the run before its first pass.
	lim := prog.Limits{MaxTrace: *maxTrace, MaxPasses: math.MaxInt}
	if *maxTrace < math.MaxInt/100-1000 {
		lim.MaxPasses = 100 * (*maxTrace + 1000)
	}
	if *diff {
		vt, verr := fuzz.Run(p, lim, fuzz.Options{})
		mt, merr := model.Run(p, lim)
		if merr != nil {
			return merr
		}
		if d := fuzz.Divergence(vt, mt); d != "" {
			fmt.Fprint(stdout, d)
			if verr != nil {
				fmt.Fprintf(stdout, "vm: %v\n", verr)
			}
			return errors.New("the VM and the model disagree")
		}
		if verr != nil {
			return fmt.Errorf("vm: %v", verr)
		}
		fmt.Fprintf(stdout, "the VM and the model agree on %d trace lines%s\n", len(vt.Lines), truncNote(vt))
		return nil
	}
	var t prog.Trace
	if *onModel {
		t, err = model.Run(p, lim)
	} else {
		t, err = fuzz.Run(p, lim, fuzz.Options{})
		if err != nil {
			err = fmt.Errorf("vm: %v", err)
		}
	}
	for _, l := range t.Lines {
		fmt.Fprintln(stdout, l)
	}
	if t.Truncated {
		fmt.Fprintf(stderr, "stepvm: trace truncated at %d lines\n", len(t.Lines))
	}
	return err
}

func truncNote(t prog.Trace) string {
	if t.Truncated {
		return " (truncated)"
	}
	return ""
}

// maxSource bounds what load reads. Programs and corpus files are
// kilobytes; without a bound, a device such as /dev/zero was read until
// memory ran out.
const maxSource = 16 << 20

// load reads a step program, or a corpus file of go test -fuzz: a string
// entry (FuzzParse) is program text, a []byte entry (FuzzVMvsModel) is
// generator input.
func load(name string, stdin io.Reader) (*prog.Program, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usageError{err}
		}
		defer f.Close()
		r = f
	}
	src, err := io.ReadAll(io.LimitReader(r, maxSource+1))
	if err != nil {
		return nil, usageError{err}
	}
	if len(src) > maxSource {
		return nil, usagef("%s: larger than %d MiB: not a step program", name, maxSource>>20)
	}
	if head, rest, _ := strings.Cut(string(src), "\n"); strings.TrimSuffix(head, "\r") == "go test fuzz v1" {
		text, isBytes, err := corpusEntry(rest)
		if err != nil {
			return nil, usagef("%s: %v", name, err)
		}
		if isBytes {
			return prog.Generate([]byte(text)), nil
		}
		src = []byte(text)
	}
	p, err := prog.Parse(string(src))
	if err != nil {
		return nil, usagef("%s:%v", name, err)
	}
	// A program without a root runs nothing and prints nothing: an empty
	// file, or the wrong one, would pass for a run that went well.
	if !slices.ContainsFunc(p.Decls, func(d prog.Decl) bool { _, ok := d.(*prog.Root); return ok }) {
		return nil, usagef("%s: no root to run", name)
	}
	return p, nil
}

// corpusEntry decodes the single value of a corpus file: []byte("...")
// or string("..."). Like go test, it takes the lines with their spaces
// and carriage returns trimmed, and skips blank ones.
func corpusEntry(s string) (value string, isBytes bool, err error) {
	var vals []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			vals = append(vals, l)
		}
	}
	if len(vals) > 1 {
		return "", false, fmt.Errorf("a corpus entry of %d values, not of one []byte or string", len(vals))
	}
	s = strings.Join(vals, "")
	for _, typ := range []string{"[]byte", "string"} {
		if lit, ok := strings.CutPrefix(s, typ+"("); ok {
			lit, ok = strings.CutSuffix(lit, ")")
			if !ok {
				break
			}
			v, err := strconv.Unquote(lit)
			if err != nil {
				return "", false, fmt.Errorf("malformed corpus entry: %v", err)
			}
			return v, typ == "[]byte", nil
		}
	}
	return "", false, errors.New("not a corpus entry of one []byte or string")
}
