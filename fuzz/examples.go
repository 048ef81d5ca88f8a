package fuzz

import (
	"embed"
	"io/fs"
	"path"
	"strings"

	"github.com/stepvm/stepvm/fuzz/prog"
)

//go:embed examples/*.step examples/*.out
var examplesFS embed.FS

// Example is one of the specification's examples written as a step
// program.
type Example struct {
	Name   string // file name without extension, e.g. ftn12-1.2-error-handling
	Title  string // the first comment line of the source
	Source string
	// Output is what the specification says the example prints: the
	// text of its print events, one per line.
	Output string
}

// Examples returns the specification's examples (FTN12 1.1, 1.2, 1.2.1
// and the examples of the JS reference's README), in file name order.
func Examples() []Example {
	files, err := fs.Glob(examplesFS, "examples/*.step")
	if err != nil {
		panic(err)
	}
	var out []Example
	for _, f := range files {
		src, err := examplesFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		res, err := examplesFS.ReadFile(strings.TrimSuffix(f, ".step") + ".out")
		if err != nil {
			panic(err)
		}
		title, _, _ := strings.Cut(string(src), "\n")
		out = append(out, Example{
			Name:   strings.TrimSuffix(path.Base(f), ".step"),
			Title:  strings.TrimPrefix(title, "# "),
			Source: string(src),
			Output: string(res),
		})
	}
	return out
}

// Program parses the example.
func (e Example) Program() *prog.Program {
	p, err := prog.Parse(e.Source)
	if err != nil {
		panic("fuzz: example " + e.Name + ": " + err.Error())
	}
	return p
}

// Printed returns the text of the print events of a trace, one per line:
// what the program printed.
func Printed(t prog.Trace) string {
	var b strings.Builder
	for _, l := range t.Lines {
		if _, text, ok := strings.Cut(l, ": print "); ok {
			b.WriteString(text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
