package fuzz

import (
	"reflect"
	"testing"

	"github.com/stepvm/stepvm/fuzz/model"
	"github.com/stepvm/stepvm/fuzz/prog"
)

// fuzzLimits keep each execution of the fuzzer short.
var fuzzLimits = prog.Limits{MaxTrace: 600, MaxPasses: 60_000}

// check runs p on the VM and on the model and fails t if they disagree or
// the VM breaks an invariant.
func check(t *testing.T, p *prog.Program, opt Options) {
	t.Helper()
	vt, verr := Run(p, fuzzLimits, opt)
	mt, merr := model.Run(p, fuzzLimits)
	if merr != nil {
		t.Fatalf("model: %v\nprogram:\n%s", merr, p)
	}
	if d := Divergence(vt, mt); d != "" {
		t.Fatalf("%sprogram:\n%s", d, p)
	}
	if verr != nil {
		t.Fatalf("vm: %v\nprogram:\n%s", verr, p)
	}
}

// FuzzVMvsModel maps its input to a program (prog.Generate), runs it on
// the VM and on the reference model, and requires identical traces, every
// root completed exactly once, no arena memory left in use, and no panic
// escaping the VM.
func FuzzVMvsModel(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, prog.Generate(data), Options{})
	})
}

// FuzzParse requires that no text panics the parser and that a program
// that parses prints to text that parses back to the same program.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, src string) {
		p, err := prog.Parse(src)
		if err != nil {
			if _, ok := err.(*prog.SyntaxError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		text := p.String()
		q, err := prog.Parse(text)
		if err != nil {
			t.Fatalf("printed program does not parse: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("program changed through its text:\n%s", text)
		}
	})
}
