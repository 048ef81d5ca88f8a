package vm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// The misuse matrix's own callers: calls through the handle of a flow's
// step, and through its root, from that step's function, its error
// handler, its cancel handler (during a Cancel and during a timeout) and a
// Deferred callback while the step waits. vm/doc.go's rules give each
// cell's end: misuse in the step or its handler fails the flow with
// InternalError at the call (an error handler may Error, which changes
// the code, and add steps); from a cancel handler it is recorded as
// LastException only and the flow ends as it was ending; from a Deferred
// callback it fails the flow in the step's thread, and a call through the
// handle of a step that has ended names no flow. Cancel and Release of the
// root cancel it from everywhere. Every flow completes once, its steps and
// handlers run at most once, and the loop ends clean.

type ownOp struct {
	name string
	want map[string]string // caller to the flow's end: a code, "ok" or "canceled"
	call func(h, root vm.AsyncSteps)
}

// ownWant builds an ownOp's want from one end per caller, in ownCallers'
// order.
func ownWant(ends ...string) map[string]string {
	m := map[string]string{}
	for i, c := range ownCallers {
		m[c] = ends[i]
	}
	return m
}

const ownIE = vm.InternalError

var ownOps = []ownOp{
	{"Resumer", ownWant("ok", ownIE, "canceled", "Timeout", "ok"), func(h, _ vm.AsyncSteps) { h.Resumer() }},
	{"Success twice", ownWant(ownIE, ownIE, "canceled", "Timeout", "ok"), func(h, _ vm.AsyncSteps) { h.Success(vm.Int(1)); h.Success(vm.Int(2)) }},
	{"Success after Add", ownWant(ownIE, ownIE, "canceled", "Timeout", ownIE), func(h, _ vm.AsyncSteps) { h.Add(func(vm.AsyncSteps, vm.Args) {}); h.Success() }},
	{"Error after Add", ownWant(ownIE, "Late", "canceled", "Timeout", ownIE), func(h, _ vm.AsyncSteps) { h.Add(func(vm.AsyncSteps, vm.Args) {}); h.Error("Late") }},
	{"Error twice", ownWant(ownIE, ownIE, "canceled", "Timeout", "One"), func(h, _ vm.AsyncSteps) {
		func() {
			defer func() { recover() }()
			h.Error("One")
		}()
		h.Error("Two")
	}},
	{"SuccessStep", ownWant("ok", "ok", "canceled", "Timeout", ownIE), func(h, _ vm.AsyncSteps) { h.SuccessStep(vm.Int(1)) }},
	{"Promise", ownWant(ownIE, ownIE, "canceled", "Timeout", ownIE), func(_, root vm.AsyncSteps) { root.Promise() }},
	{"Cancel", ownWant("canceled", "canceled", "canceled", "canceled", "canceled"), func(_, root vm.AsyncSteps) { root.Cancel() }},
	{"Release", ownWant("canceled", "canceled", "canceled", "canceled", "canceled"), func(_, root vm.AsyncSteps) { root.Release() }},
	{"Execute", ownWant(ownIE, ownIE, "canceled", "Timeout", ownIE), func(_, root vm.AsyncSteps) { root.Execute() }},
}

var ownCallers = []string{"own step", "own error handler", "own cancel handler on Cancel",
	"own cancel handler on timeout", "Deferred"}

func TestSemMisuseOwnCallers(t *testing.T) {
	for _, c := range ownCallers {
		for _, op := range ownOps {
			t.Run(c+"/"+op.name, func(t *testing.T) { ownCell(t, c, op) })
		}
	}
}

func ownCell(t *testing.T, caller string, op ownOp) {
	l, clk := semLoop()
	defer l.Close()
	var log semLog
	root := l.NewSteps()
	var h vm.AsyncSteps
	var res vm.Resumer
	call := func() {
		defer func() {
			if p := recover(); p != nil {
				log.add("call panicked")
				panic(p)
			}
		}()
		op.call(h, root)
		log.add("returned")
	}
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		h = as
		log.add("step ran")
		switch caller {
		case "own step":
			call()
		case "own error handler":
			as.Error("First")
		case "own cancel handler on Cancel", "own cancel handler on timeout":
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel"); call() })
			if strings.HasSuffix(caller, "timeout") {
				as.SetTimeout(time.Millisecond)
			}
			res = as.Resumer()
		case "Deferred":
			res = as.Resumer()
			as.WaitExternal()
		}
	}, func(as vm.AsyncSteps, code string) {
		log.add("handler %s", code)
		if caller == "own error handler" && code == "First" {
			call()
		}
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next ran") })
	f := root.Promise()
	l.RunUntilIdle()
	switch caller {
	case "own cancel handler on Cancel":
		root.Cancel()
	case "own cancel handler on timeout":
		clk.Advance(time.Millisecond)
	case "Deferred":
		l.Deferred(0, call)
	}
	l.RunUntilIdle()
	clk.Advance(time.Hour)
	l.RunUntilIdle()
	res.Success()
	l.RunUntilIdle()
	switch want := op.want[caller]; want {
	case "ok":
		semOK(t, f)
	case "canceled":
		if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
			t.Fatalf("flow ended with %v, want canceled (trace %q)", err, log.lines)
		}
	default:
		semFail(t, f, want)
	}
	if strings.HasPrefix(caller, "own cancel handler") && (op.name == "Promise" || op.name == "Execute") {
		// Misuse through the root from a cancel handler is recorded only;
		// calls through the handle of the step being canceled do nothing.
		var le *vm.Error
		if !errors.As(root.State().LastException(), &le) || le.Code != vm.InternalError {
			t.Fatalf("LastException %v, want the misuse recorded", root.State().LastException())
		}
	}
	counts := map[string]int{}
	for _, line := range log.lines {
		counts[line]++
	}
	for line, n := range counts {
		if n > 1 && line != "returned" {
			t.Errorf("%q %d times: %q", line, n, log.lines)
		}
	}
	root.Release()
	l.RunUntilIdle()
	semClean(t, l)
	if st := l.Stats(); st.LiveRoots != 0 || st.Panics != 0 {
		t.Fatalf("after the cell: %+v", st)
	}
}
