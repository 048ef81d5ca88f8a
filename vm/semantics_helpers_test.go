package vm_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Helpers of the semantics_*_test.go suite. Their names start with sem so
// that they never collide with the helpers of other test files of the
// package.

// semLoop returns a loop driven by a manual clock.
func semLoop() (*vm.Loop, *vm.ManualClock) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	return vm.NewLoop(vm.WithClock(clk)), clk
}

// semLog records what a flow does, one line per event. It is written on
// the loop goroutine only.
type semLog struct{ lines []string }

func (s *semLog) add(format string, a ...any) { s.lines = append(s.lines, fmt.Sprintf(format, a...)) }

// step returns a step that logs line and succeeds implicitly.
func (s *semLog) step(line string) vm.ExecFunc {
	return func(vm.AsyncSteps, vm.Args) { s.add("%s", line) }
}

// semExpect fails t unless log holds exactly want.
func semExpect(t *testing.T, log *semLog, want ...string) {
	t.Helper()
	if g, w := strings.Join(log.lines, "\n"), strings.Join(want, "\n"); g != w {
		t.Fatalf("trace mismatch\n--- got ---\n%s\n--- want ---\n%s", g, w)
	}
}

// semResult returns the outcome of a flow that must have completed.
func semResult(t *testing.T, f *vm.Future) (vm.Args, error) {
	t.Helper()
	select {
	case <-f.Done():
	default:
		t.Fatal("flow did not complete")
	}
	return f.Wait(context.Background())
}

// semPending fails t if the flow has completed.
func semPending(t *testing.T, f *vm.Future) {
	t.Helper()
	select {
	case <-f.Done():
		args, err := f.Wait(context.Background())
		t.Fatalf("flow completed early: args=%v err=%v", args.Values(), err)
	default:
	}
}

// semOK fails t unless the flow completed with success.
func semOK(t *testing.T, f *vm.Future) vm.Args {
	t.Helper()
	args, err := semResult(t, f)
	if err != nil {
		t.Fatalf("flow failed: %v", err)
	}
	return args
}

// semFail fails t unless the flow completed with an *vm.Error of code,
// and returns that error.
func semFail(t *testing.T, f *vm.Future, code string) *vm.Error {
	t.Helper()
	_, err := semResult(t, f)
	var e *vm.Error
	if !errors.As(err, &e) {
		t.Fatalf("flow error = %v (%T), want *vm.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("flow error code = %q (info %q), want %q", e.Code, e.Info, code)
	}
	return e
}

// semInfoMentions fails t unless info is set and contains every word
// (case-insensitive).
func semInfoMentions(t *testing.T, info string, words ...string) {
	t.Helper()
	if info == "" {
		t.Fatal("ErrorInfo is empty")
	}
	low := strings.ToLower(info)
	for _, w := range words {
		if !strings.Contains(low, strings.ToLower(w)) {
			t.Fatalf("ErrorInfo %q does not mention %q", info, w)
		}
	}
}

// semDrive runs l on the calling goroutine until f completes. Other
// goroutines complete steps meanwhile (Resumer, Await).
func semDrive(l *vm.Loop, f *vm.Future) {
	for {
		l.RunUntilIdle()
		select {
		case <-f.Done():
			return
		default:
			runtime.Gosched()
		}
	}
}

// semDriveUntil runs l on the calling goroutine until ch is closed by
// another goroutine (an Await's function, say, once it runs).
func semDriveUntil(l *vm.Loop, ch <-chan struct{}) {
	for {
		l.RunUntilIdle()
		select {
		case <-ch:
			return
		default:
			runtime.Gosched()
		}
	}
}

// semAwait waits for ch, failing t with a goroutine dump if nothing comes
// within a deadline far beyond any scheduling delay.
func semAwait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	tm := time.NewTimer(30 * time.Second)
	defer tm.Stop()
	select {
	case v := <-ch:
		return v
	case <-tm.C:
		buf := make([]byte, 1<<20)
		t.Fatalf("%s: nothing after 30s (a lost wake?)\n%s", what, buf[:runtime.Stack(buf, true)])
		panic("unreachable")
	}
}

// semRunAsync drives l with Run on a goroutine of its own. stop ends it and
// waits for Run to return, so that what the loop wrote is visible to the
// caller afterwards.
func semRunAsync(t *testing.T, l *vm.Loop) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	}
}

// semFuncName names the function at pc, without its package path.
func semFuncName(pc uintptr) string {
	f := runtime.FuncForPC(pc)
	if f == nil {
		return "?"
	}
	name := f.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// semRun is a flow under test: a root on a loop of its own, driven by a
// manual clock, and the log its steps write.
type semRun struct {
	l    *vm.Loop
	clk  *vm.ManualClock
	root vm.AsyncSteps
	f    *vm.Future
	log  *semLog
}

// semStart builds a flow with build on a fresh semLoop, starts it and runs
// the loop until idle.
func semStart(build func(root vm.AsyncSteps, log *semLog)) *semRun {
	l, clk := semLoop()
	root := l.NewSteps()
	r := &semRun{l: l, clk: clk, root: root, log: new(semLog)}
	build(root, r.log)
	r.f = root.Promise()
	l.RunUntilIdle()
	return r
}

// advance moves the clock on by d and runs the loop until idle.
func (r *semRun) advance(d time.Duration) {
	r.clk.Advance(d)
	r.l.RunUntilIdle()
}

// semRunOK runs the flow build makes until the loop is idle and fails t
// unless it succeeded having logged exactly want.
func semRunOK(t *testing.T, build func(root vm.AsyncSteps, log *semLog), want ...string) vm.Args {
	t.Helper()
	r := semStart(build)
	args := semOK(t, r.f)
	semExpect(t, r.log, want...)
	return args
}

// semRunFail runs the flow build makes until the loop is idle and fails t
// unless it failed with code having logged exactly want.
func semRunFail(t *testing.T, code string, build func(root vm.AsyncSteps, log *semLog), want ...string) *vm.Error {
	t.Helper()
	r := semStart(build)
	e := semFail(t, r.f, code)
	semExpect(t, r.log, want...)
	return e
}

// semTimeoutStopped runs a flow whose first step sets a timeout of 10ms and
// calls complete, which must make the step succeed with one int after
// completeIn; the next step logs that value and waits. It moves the clock
// on by completeIn and then by an hour, and fails t unless the flow still
// waits (the timeout never fired) having logged exactly want.
func semTimeoutStopped(t *testing.T, completeIn time.Duration, complete func(as vm.AsyncSteps), want string) {
	t.Helper()
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(10 * time.Millisecond)
			complete(as)
		}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
		root.Add(func(as vm.AsyncSteps, a vm.Args) {
			log.add("next got %d", a.Int(0))
			as.WaitExternal()
		})
	})
	r.advance(completeIn)
	r.advance(time.Hour)
	semExpect(t, r.log, want)
	semPending(t, r.f)
	r.root.Cancel()
}

// addUnwound adds to root a step that runs nested, whose frames are then
// unwound as how says: "timeout" (the step times out after a millisecond),
// "parallel abort" (nested runs as a branch whose sibling fails), or by
// nested itself ("error", "cancel"). The step's error handler logs "outer
// handler <code>", and a next step logs "next never".
func addUnwound(root vm.AsyncSteps, how string, nested vm.ExecFunc, log *semLog) {
	outer := func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) }
	switch how {
	case "parallel abort":
		p := root.Parallel(outer)
		p.Add(nested)
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
		})
	case "timeout":
		root.Add(func(as vm.AsyncSteps, a vm.Args) {
			as.SetTimeout(time.Millisecond)
			nested(as, a)
		}, outer)
	default:
		root.Add(nested, outer)
	}
	root.Add(log.step("next never"))
}

// semUnwind executes root, runs l until it waits, then unwinds it as how
// says: Cancel for "cancel", a millisecond for "timeout" (a step's), and
// nothing for any other how (an abort the flow raised itself). It returns
// the flow's Future once l is idle again.
func semUnwind(l *vm.Loop, clk *vm.ManualClock, root vm.AsyncSteps, how string) *vm.Future {
	f := root.Promise()
	l.RunUntilIdle()
	switch how {
	case "cancel":
		root.Cancel()
	case "timeout":
		clk.Advance(time.Millisecond)
	}
	l.RunUntilIdle()
	return f
}

// semResumerWait starts a root whose one step waits for its Resumer, and
// runs the loop until it waits.
func semResumerWait() (*vm.Loop, vm.AsyncSteps, *vm.Future, vm.Resumer) {
	l, _ := semLoop()
	root := l.NewSteps()
	var res vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res = as.Resumer()
		as.WaitExternal()
	})
	f := root.Promise()
	l.RunUntilIdle()
	return l, root, f, res
}

// semNextRootWorks runs a flow on the next root l hands out (from its pool,
// after whatever the test did to the last one) and fails t unless it
// succeeds with its value.
func semNextRootWorks(t *testing.T, l *vm.Loop) {
	t.Helper()
	next := l.NewSteps()
	next.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(7)) })
	f := next.Promise()
	l.RunUntilIdle()
	if got := semOK(t, f); got.Int(0) != 7 {
		t.Fatalf("the next root gave %v", got.Int(0))
	}
	next.Release()
}

// semSeen is what an error handler saw of the error it handles.
type semSeen struct {
	code, info string
	last       error
}

// semHandled runs a root whose one step is body, with an error handler
// that records what it sees, through a pass, a millisecond (a timeout's)
// and a pass. It returns the loop, the root, what the handler saw and the
// flow's Future.
func semHandled(body func(root, as vm.AsyncSteps)) (*vm.Loop, vm.AsyncSteps, semSeen, *vm.Future) {
	l, clk := semLoop()
	root := l.NewSteps()
	var seen semSeen
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { body(root, as) }, func(as vm.AsyncSteps, code string) {
		seen = semSeen{code, as.State().ErrorInfo(), as.State().LastException()}
	})
	f := root.Promise()
	l.RunUntilIdle()
	clk.Advance(time.Millisecond)
	l.RunUntilIdle()
	return l, root, seen, f
}

// expectRecorded fails t unless the handler saw code and info, the error
// raised, with LastException an InternalError whose info mentions words:
// what was recorded only, during the unwinding.
func (s semSeen) expectRecorded(t *testing.T, code, info string, words ...string) {
	t.Helper()
	var e *vm.Error
	if s.code != code || s.info != info || !errors.As(s.last, &e) || e.Code != vm.InternalError {
		t.Fatalf("handler saw %q, ErrorInfo %q, LastException %v; want %q, %q and an InternalError", s.code, s.info, s.last, code, info)
	}
	semInfoMentions(t, e.Info, words...)
}

// semClean fails t unless l holds nothing for a flow any more: no arena
// bytes, running roots, timers, queued work or callback records.
func semClean(t *testing.T, l *vm.Loop) {
	t.Helper()
	s := l.Stats()
	if s.ArenaInUse != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.Queued != 0 || vm.CallbacksInUse(l) != 0 {
		t.Fatalf("not clean: %+v callbacks=%d", s, vm.CallbacksInUse(l))
	}
}

// semCallFrom makes call from the place caller names: "outside" (the
// driving goroutine, where it must not panic), an "Immediate" or "Post"
// callback, or another flow ("another flow's step", "... error handler",
// "... cancel handler" or "... destroy callback"). It returns how that
// flow ended (nil for no flow); handler is the error handler of its step.
func semCallFrom(t *testing.T, l *vm.Loop, caller string, call func(), handler vm.ErrorFunc) error {
	t.Helper()
	switch caller {
	case "outside":
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic from outside: %v", p)
			}
		}()
		call()
		return nil
	case "Immediate":
		l.Immediate(call)
		l.RunUntilIdle()
		return nil
	case "Post":
		if !l.Post(call) {
			t.Fatal("Post refused")
		}
		l.RunUntilIdle()
		return nil
	}
	c := l.NewSteps()
	defer c.Release()
	switch caller {
	case "another flow's step":
		c.Add(func(vm.AsyncSteps, vm.Args) { call() }, handler)
	case "another flow's error handler":
		c.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First") }, func(vm.AsyncSteps, string) { call() })
	case "another flow's cancel handler":
		c.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetCancel(func(vm.AsyncSteps) { call() }) }, handler)
	case "another flow's destroy callback":
		c.Add(func(as vm.AsyncSteps, _ vm.Args) { as.StackRaw(8, func(unsafe.Pointer) { call() }) }, handler)
	default:
		t.Fatalf("no caller %q", caller)
	}
	cf := c.Promise()
	l.RunUntilIdle()
	if caller == "another flow's cancel handler" {
		c.Cancel()
		l.RunUntilIdle()
	}
	_, err := semResult(t, cf)
	return err
}
