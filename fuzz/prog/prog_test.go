package prog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func examples(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../examples/*.step")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// roundTrip checks that p prints to text that parses back to p.
func roundTrip(t *testing.T, p *Program) {
	t.Helper()
	text := p.String()
	q, err := Parse(text)
	if err != nil {
		t.Fatalf("printed program does not parse: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("program changed through its text:\n%s\n---\n%s", text, q)
	}
	if q.String() != text {
		t.Fatalf("printing is not stable:\n%s\n---\n%s", text, q)
	}
}

func TestExamplesRoundTrip(t *testing.T) {
	for name, src := range examples(t) {
		t.Run(name, func(t *testing.T) {
			p, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, p)
		})
	}
}

func TestExamplesEncode(t *testing.T) {
	for name, src := range examples(t) {
		t.Run(name, func(t *testing.T) {
			p, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			if q := Generate(b); !reflect.DeepEqual(p, q) {
				t.Fatalf("Generate(Encode(p)) != p:\n%s", q)
			}
		})
	}
}

// TestGenerateWellFormed feeds the generator random bytes: every program
// must print, parse back as itself, and encode back to bytes that
// generate it.
func TestGenerateWellFormed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		data := make([]byte, rng.IntN(400))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := Generate(data)
		roundTrip(t, p)
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("input %d: %v\n%s", i, err, p)
		}
		if q := Generate(b); !reflect.DeepEqual(p, q) {
			t.Fatalf("input %d: Generate(Encode(p)) != p", i)
		}
	}
}

func TestGenerateEmpty(t *testing.T) {
	p := Generate(nil)
	if got, want := p.String(), "root r0 {\n}\n"; got != want {
		t.Fatalf("Generate(nil) = %q, want %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, err string }{
		{"root", "1:5: expected root name, found end of file"},
		{"root r {\n  step {\n    print 1\n  }\n}", "3:11: expected string, found \"1\""},
		{"root r { print \"x\" }", "1:10: print is not allowed in a root or model body"},
		{"root r {\n  step { break }\n}", "2:10: break outside of a loop"},
		{"root r {\n  loop a { step { continue b } }\n}", "2:28: continue b: no enclosing loop is labelled b"},
		{"root r { step { step {}; success } }", "1:26: success after sub-steps were added (the step completes when they do; use successStep)"},
		{"root r { step { error E; print \"x\" } }", "1:26: statement after error: it ends the block"},
		{"root r { step { success 1 2 3 4 5 } }", "1:33: more than 4 values"},
		{"root r { copy m }", "1:15: copy of m, which is not a model declared before"},
		{"root r { sync m {} }", "1:15: sync on m, which is not a mutex declared before"},
		{"root r {}\nroot r {}", "2:6: r redeclared (already a root)"},
		{"root r { step { timeout 5 } }", "1:25: expected duration, found \"5\""},
		{"root r { step { print \"x } }", "1:23: string not terminated"},
		{"root r { step { stack 0 } }", "1:23: stack size 0 out of range 1..65536"},
		{"root r { step { stack array 7 } }", "1:29: stack array 7: the size of a typed allocation is one of [1 8 24 64 100 4096]"},
		{"root r { step { stack bytes 8 } }", "1:23: expected a stack size, array or pointers, found \"bytes\""},
		{"root r { step { onCancel { stack 8 } } }", "1:28: stack is not allowed in a cancel handler"},
		{"root r { forEach [\"a\": 1, \"a\": 2] {} }", "1:27: duplicate key \"a\""},
		{"root r { step { wait 2 } }", "1:24: expected success or error, found }"},
		{"root r { step {} catch { timeout 1ms } }", "1:26: timeout is not allowed in an error handler"},
		{"root r { parallel { print \"x\" } }", "1:21: print is not allowed in a parallel step (only adders are branches)"},
		{"root r { step { print \"a\" print \"b\" } }", "1:27: unexpected \"print\" at the end of a statement"},
		{"root r { step { success 1e999 } }", "1:25: float 1e999 out of range"},
		{"root r { step { success 12ab } }", "1:25: malformed number \"12a\""},
		{"root r { step { success \xff } }", "1:25: unexpected byte 0xff"},
		{"root r { step { cancel q } }\nroot q {}", "1:24: cancel of q, which is neither this root nor one declared before"},
		{"model m { step { cancel m } }", "1:18: cancel in a model: a model's steps run in any root"},
		{"root r { step { release q } }", "1:25: release of q, which is neither this root nor one declared before"},
		{"root r { step { onCancel { cancel r; print \"x\" } } }", "1:38: statement after cancel: it ends the block"},
	} {
		_, err := Parse(c.src)
		if err == nil || err.Error() != c.err {
			t.Errorf("Parse(%q) = %v, want %s", c.src, err, c.err)
		}
	}
}

// doublingModels declares n models, each copying the one before twice,
// and a root that copies the last.
func doublingModels(n int) string {
	var b strings.Builder
	b.WriteString("model m0 { step { print \"x\" } }\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "model m%d { copy m%d; copy m%d }\n", i, i-1, i-1)
	}
	fmt.Fprintf(&b, "root r { copy m%d }\n", n-1)
	return b.String()
}

// TestParseCopiesBounded: copies are bounded as they expand, so that a
// small file cannot make the harness build more steps than memory holds
// (forty doubling models, 1.4 KB, took it to "out of memory").
func TestParseCopiesBounded(t *testing.T) {
	if _, err := Parse(doublingModels(17)); err != nil {
		t.Fatalf("17 doubling models: %v", err)
	}
	_, err := Parse(doublingModels(40))
	if err == nil || err.Error() != "19:18: copies expand to more than 1048576 statements" {
		t.Fatalf("40 doubling models: %v", err)
	}
}

// TestGenerateStacks checks that the generator makes each kind of stack
// statement often, and puts some in parallel steps' error handlers.
func TestGenerateStacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var types [3]int
	inParallelCatch := 0
	var walk func(ss []Stmt, parallelCatch bool)
	body := func(ss []Stmt, catch *Block, parallel bool) {
		walk(ss, false)
		if catch != nil {
			walk(catch.Stmts, parallel)
		}
	}
	walk = func(ss []Stmt, parallelCatch bool) {
		for _, s := range ss {
			switch s := s.(type) {
			case *Stack:
				types[s.Type]++
				if parallelCatch {
					inParallelCatch++
				}
			case *Step:
				body(s.Body, s.Catch, false)
			case *Parallel:
				body(s.Branches, s.Catch, true)
			case *Sync:
				body(s.Body, s.Catch, false)
			case *Loop:
				walk(s.Body, false)
			case *Repeat:
				walk(s.Body, false)
			case *ForEach:
				walk(s.Body, false)
			}
		}
	}
	for range 3000 {
		data := make([]byte, rng.IntN(400))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		for _, d := range Generate(data).Decls {
			if r, ok := d.(*Root); ok {
				walk(r.Body, false)
			}
		}
	}
	for typ, n := range types {
		if n < 300 {
			t.Errorf("%d stack %s statements in 3000 programs", n, StackType(typ))
		}
	}
	if inParallelCatch < 30 {
		t.Errorf("%d stack statements in parallel steps' error handlers in 3000 programs", inParallelCatch)
	}
	t.Logf("stack statements: %d raw, %d array, %d pointers; %d in parallel steps' error handlers",
		types[StackRaw], types[StackArray], types[StackPointers], inParallelCatch)
}

func TestExpand(t *testing.T) {
	state := map[string]string{"v": "S"}
	sc := Scope{
		Code: "E", Info: "I", Args: []Value{StrValue("a"), IntValue(2)},
		Loop:  LoopVars{Kind: ForEachLoop, Key: IntValue(1), Val: StrValue("x")},
		State: func(k string) (string, bool) { v, ok := state[k]; return v, ok },
	}
	for tmpl, want := range map[string]string{
		"plain":                     "plain",
		"{code}/{info}":             "E/I",
		"{arg0}{arg1}{arg2}":        "a2",
		"{key}={val} {i}":           "1=x ",
		"{state.v}{state.none}":     "S",
		"{unknown} {code":           "{unknown} {code",
		"{{code}}":                  "{{code}}",
		strings.Repeat("{code}", 3): "EEE",
	} {
		if got := sc.Expand(tmpl); got != want {
			t.Errorf("Expand(%q) = %q, want %q", tmpl, got, want)
		}
	}
}
