package fuzz

import (
	"fmt"
	"strings"

	"github.com/stepvm/stepvm/fuzz/prog"
)

// FirstDiff returns the index of the first line at which traces a and b
// differ, or -1 if they agree. A truncated trace agrees with any trace
// that has its lines as a prefix and is at least as long.
func FirstDiff(a, b prog.Trace) int {
	n := min(len(a.Lines), len(b.Lines))
	for i := range n {
		if a.Lines[i] != b.Lines[i] {
			return i
		}
	}
	switch {
	case len(a.Lines) == len(b.Lines):
		return -1
	case len(a.Lines) < len(b.Lines) && a.Truncated, len(b.Lines) < len(a.Lines) && b.Truncated:
		return -1
	}
	return n
}

// Divergence describes where the trace of the VM departs from the
// model's, with a few lines of common context; "" if they agree.
func Divergence(vmTrace, modelTrace prog.Trace) string {
	i := FirstDiff(vmTrace, modelTrace)
	if i < 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "traces diverge at line %d\n", i+1)
	for j := max(0, i-5); j < i; j++ {
		fmt.Fprintf(&b, "         %s\n", vmTrace.Lines[j])
	}
	fmt.Fprintf(&b, "  vm:    %s\n", lineAt(vmTrace, i))
	fmt.Fprintf(&b, "  model: %s\n", lineAt(modelTrace, i))
	return b.String()
}

func lineAt(t prog.Trace, i int) string {
	if i < len(t.Lines) {
		return t.Lines[i]
	}
	if t.Truncated {
		return "(trace truncated)"
	}
	return "(end of trace)"
}
