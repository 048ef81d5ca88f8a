package vm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// The misuse matrix: misuse calls through a valid handle of a target flow,
// from every place a call can come from. vm/doc.go's rules say where each
// one is reported:
//
//   - from a step's function or error handler (of any flow), the calling
//     flow fails with InternalError, raised at the call; the target is not
//     touched;
//   - from outside the loop's calls (the driving goroutine, an Immediate or
//     Post callback), the target fails: a root being set up fails its next
//     run before any of its steps; a running flow fails in the thread of
//     the step whose handle was used (a root's handle, or a parallel
//     accessor's not started yet: in its main thread), so that step's own
//     error handlers see it;
//   - from a cancel handler or a Stack destroy callback, the call is only
//     recorded as the target's LastException: the calling flow ends as it
//     would have, and the target goes on.
//
// Whatever the cell, every flow completes once and the loop ends clean.

// misTarget is the flow a misuse call names. build returns its root, the
// handle to call through, and the Resumer that completes its waiting step
// (invalid for a root that does not run). The target's steps log
// "target ran" when they run, and their error handlers "<name> handler
// <code>" without settling the error.
type misTarget struct {
	name    string
	idle    bool   // the target does not run: its next run is what fails
	handler string // the first error handler an error raised from outside reaches
	build   func(l *vm.Loop, log *semLog) (root vm.AsyncSteps, h *vm.AsyncSteps, res *vm.Resumer)
}

// misOp is one misuse call through h, on every target but those not names
// (where the call is allowed).
type misOp struct {
	name string
	word string // in the ErrorInfo
	not  []string
	call func(h vm.AsyncSteps)
}

func (op misOp) applies(target string) bool {
	for _, t := range op.not {
		if t == target {
			return false
		}
	}
	return true
}

var misFive = []vm.Value{vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4), vm.Int(5)}

// misWaiting adds to as a step that waits for its Resumer, whose handler
// logs name.
func misWaiting(as vm.AsyncSteps, log *semLog, name string, h *vm.AsyncSteps, res *vm.Resumer) {
	as.Add(func(as vm.AsyncSteps, _ vm.Args) {
		log.add("target ran")
		*h, *res = as, as.Resumer()
		as.WaitExternal()
	}, func(as vm.AsyncSteps, code string) { log.add("%s handler %s", name, code) })
}

var misTargets = []misTarget{
	{"idle root", true, "", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r := l.NewSteps()
		r.Add(log.step("target ran"))
		return r, &r, new(vm.Resumer)
	}},
	{"idle accessor", true, "", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r := l.NewSteps()
		p := r.Parallel()
		p.Add(log.step("target ran"))
		return r, &p, new(vm.Resumer)
	}},
	{"running root", false, "step", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r, res, h := l.NewSteps(), new(vm.Resumer), new(vm.AsyncSteps)
		misWaiting(r, log, "step", h, res)
		return r, &r, res
	}},
	{"waiting step", false, "step", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r, res, h := l.NewSteps(), new(vm.Resumer), new(vm.AsyncSteps)
		misWaiting(r, log, "step", h, res)
		return r, h, res
	}},
	{"waiting branch step", false, "branch", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r, res, h := l.NewSteps(), new(vm.Resumer), new(vm.AsyncSteps)
		r.Add(func(as vm.AsyncSteps, _ vm.Args) {
			p := as.Parallel(func(as vm.AsyncSteps, code string) { log.add("parallel handler %s", code) })
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { misWaiting(as, log, "branch", h, res) })
			p.Add(func(vm.AsyncSteps, vm.Args) {})
		})
		return r, h, res
	}},
	{"step with sub-steps", false, "sub-step", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r, res, h, sub := l.NewSteps(), new(vm.Resumer), new(vm.AsyncSteps), new(vm.AsyncSteps)
		r.Add(func(as vm.AsyncSteps, _ vm.Args) {
			*h = as
			misWaiting(as, log, "sub-step", sub, res)
		}, func(as vm.AsyncSteps, code string) { log.add("step handler %s", code) })
		return r, h, res
	}},
	{"running accessor", false, "step", func(l *vm.Loop, log *semLog) (vm.AsyncSteps, *vm.AsyncSteps, *vm.Resumer) {
		r, res, h, w := l.NewSteps(), new(vm.Resumer), new(vm.AsyncSteps), new(vm.AsyncSteps)
		r.Add(func(as vm.AsyncSteps, _ vm.Args) {
			misWaiting(as, log, "step", w, res)
			*h = as.Parallel() // starts once the waiting step is done
			h.Add(func(vm.AsyncSteps, vm.Args) {})
		})
		return r, h, res
	}},
}

var misOps = []misOp{
	{"Add nil", "nil", nil, func(h vm.AsyncSteps) { h.Add(nil) }},
	{"Loop nil", "nil", nil, func(h vm.AsyncSteps) { h.Loop(nil) }},
	{"Repeat nil", "nil", nil, func(h vm.AsyncSteps) { h.Repeat(2, nil) }},
	{"ForEach nil", "nil", nil, func(h vm.AsyncSteps) { vm.ForEach[int](h, []int{1}, nil) }},
	{"SuccessStep 5", "4 values", nil, func(h vm.AsyncSteps) { h.SuccessStep(misFive...) }},
	{"Sync nil", "nil", nil, func(h vm.AsyncSteps) { h.Sync(nil, func(vm.AsyncSteps, vm.Args) {}) }},
	{"Success 5", "Success", nil, func(h vm.AsyncSteps) { h.Success(misFive...) }},
	{"Break", "Break", nil, func(h vm.AsyncSteps) { h.Break() }},
	{"Continue", "Continue", nil, func(h vm.AsyncSteps) { h.Continue() }},
	{"StackRaw -1", "StackRaw", nil, func(h vm.AsyncSteps) { h.StackRaw(-1, nil) }},
	{"SetTimeout", "SetTimeout", []string{"waiting step", "waiting branch step"}, func(h vm.AsyncSteps) { h.SetTimeout(time.Millisecond) }},
	{"SetCancel", "SetCancel", []string{"waiting step", "waiting branch step"}, func(h vm.AsyncSteps) { h.SetCancel(func(vm.AsyncSteps) {}) }},
	{"WaitExternal", "WaitExternal", []string{"waiting step", "waiting branch step"}, func(h vm.AsyncSteps) { h.WaitExternal() }},
	{"Execute", "Execute", []string{"idle root"}, func(h vm.AsyncSteps) { h.Execute() }},
	{"Add", "Add", []string{"idle root", "idle accessor", "running accessor"}, func(h vm.AsyncSteps) { h.Add(func(vm.AsyncSteps, vm.Args) {}) }},
}

var misCallers = []string{"outside", "Immediate", "Post", "another flow's step", "another flow's error handler",
	"another flow's cancel handler", "another flow's destroy callback"}

func TestSemMisuseMatrix(t *testing.T) {
	for _, tg := range misTargets {
		for _, c := range misCallers {
			for _, op := range misOps {
				if op.applies(tg.name) {
					t.Run(tg.name+"/"+c+"/"+op.name, func(t *testing.T) { misCell(t, tg, c, op) })
				}
			}
		}
	}
}

func misCell(t *testing.T, tg misTarget, caller string, op misOp) {
	l, clk := semLoop()
	defer l.Close()
	var log semLog
	root, h, res := tg.build(l, &log)
	var f *vm.Future
	if !tg.idle {
		f = root.Promise()
		l.RunUntilIdle()
		semExpect(t, &log, "target ran")
		log.lines = nil
	}
	cerr, clog := misFromCaller(t, l, caller, func() { op.call(*h) })
	clk.Advance(time.Hour) // a timeout set through h must not fire before the target is resumed
	inside := strings.HasPrefix(caller, "another flow's step") || strings.HasPrefix(caller, "another flow's error")
	teardown := strings.HasSuffix(caller, "cancel handler") || strings.HasSuffix(caller, "destroy callback")
	outside := !inside && !teardown

	// The caller.
	var ce *vm.Error
	errors.As(cerr, &ce)
	switch caller {
	case "another flow's step":
		if ce == nil || ce.Code != vm.InternalError {
			t.Fatalf("caller ended with %v", cerr)
		}
		semInfoMentions(t, ce.Info, op.word)
		semExpect(t, clog, "caller handler InternalError")
	case "another flow's error handler":
		if ce == nil || ce.Code != vm.InternalError {
			t.Fatalf("caller ended with %v", cerr)
		}
		semInfoMentions(t, ce.Info, op.word)
		semExpect(t, clog)
	case "another flow's cancel handler":
		if !errors.Is(cerr, vm.ErrCanceled) {
			t.Fatalf("caller ended with %v", cerr)
		}
		semExpect(t, clog, "returned")
	case "another flow's destroy callback":
		if cerr != nil {
			t.Fatalf("caller ended with %v", cerr)
		}
		semExpect(t, clog, "returned")
	default:
		semExpect(t, clog, "returned")
	}
	if teardown {
		var le *vm.Error
		if !errors.As(root.State().LastException(), &le) || le.Code != vm.InternalError {
			t.Fatalf("target's LastException %v, want the misuse recorded", root.State().LastException())
		}
		semInfoMentions(t, le.Info, op.word)
	}

	// The target.
	switch {
	case tg.idle:
		semExpect(t, &log)
		g := root.Promise()
		l.RunUntilIdle()
		if outside {
			e := semFail(t, g, vm.InternalError)
			semInfoMentions(t, e.Info, op.word)
			semExpect(t, &log)
		} else {
			semOK(t, g)
			semExpect(t, &log, "target ran")
		}
	case outside:
		l.RunUntilIdle()
		e := semFail(t, f, vm.InternalError)
		semInfoMentions(t, e.Info, op.word)
		if len(log.lines) == 0 || log.lines[0] != tg.handler+" handler InternalError" {
			t.Fatalf("target trace %q, want %s's handler to see the error first", log.lines, tg.handler)
		}
		if res.Success() {
			t.Fatal("the failed step's Resumer accepted")
		}
	default:
		l.RunUntilIdle()
		semPending(t, f)
		semExpect(t, &log)
		if !res.Success() {
			t.Fatal("the target's Resumer refused")
		}
		l.RunUntilIdle()
		semOK(t, f)
	}
	root.Release()
	l.RunUntilIdle()
	semClean(t, l)
	if st := l.Stats(); st.LiveRoots != 0 || st.Panics != 0 {
		t.Fatalf("after the cell: %+v", st)
	}
}

// misFromCaller calls call from caller and returns how the calling flow
// ended (nil for none) and what it logged: "returned" once the call
// returned, and its step's error handler's code.
func misFromCaller(t *testing.T, l *vm.Loop, caller string, call func()) (error, *semLog) {
	t.Helper()
	clog := new(semLog)
	do := func() { call(); clog.add("returned") }
	err := semCallFrom(t, l, caller, do, func(_ vm.AsyncSteps, code string) { clog.add("caller handler %s", code) })
	return err, clog
}

// RootID of a parallel accessor whose step has not started names the main
// thread of its root: the step has no thread of its own yet. Like misuse
// through such an accessor, it once looked for the step's thread through
// parents it does not have yet, and never returned.
func TestSemRootIDOfUnstartedAccessor(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	p := root.Parallel()
	if vm.RootID(p) != vm.RootID(root) {
		t.Fatalf("RootID of the accessor %x, of its root %x", vm.RootID(p), vm.RootID(root))
	}
	root.Release()
	semClean(t, l)
}
