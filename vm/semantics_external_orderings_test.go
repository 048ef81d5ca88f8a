package vm_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// extFlow is a flow whose one waiting step (wait says how it waits, encl
// where it sits) is reached by external events: its Resumer, its handle,
// its timeout, and its root's Cancel, Release and Execute.
type extFlow struct {
	l    *vm.Loop
	clk  *vm.ManualClock
	root vm.AsyncSteps
	f    *vm.Future
	res  vm.Resumer
	h    vm.AsyncSteps
	log  *semLog
}

// extStart builds the flow, starts it and runs the loop until it waits.
// The waits: "wait" (WaitExternal), "timeout" (5 ms), "cancel" (a cancel
// handler that tries to configure its step again: misuse during teardown,
// which must do nothing) and "twice" (a timeout and a cancel handler each
// set twice: the second replaces the first). The enclosures: a plain step
// with an error handler, a parallel branch, a Repeat iteration, a step
// whose handler recovers with Success, one whose handler adds a step that
// waits with a timeout of its own, and a sub-step of a step with a timeout.
func extStart(wait, encl string) *extFlow {
	l, clk := semLoop()
	ef := &extFlow{l: l, clk: clk, root: l.NewSteps(), log: new(semLog)}
	log := ef.log
	step := func(as vm.AsyncSteps) {
		ef.h = as
		ef.res = as.Resumer()
		switch wait {
		case "wait":
			as.WaitExternal()
		case "timeout":
			as.SetTimeout(5 * time.Millisecond)
		case "cancel":
			as.SetCancel(func(c vm.AsyncSteps) {
				log.add("cancel")
				c.SetTimeout(time.Millisecond)
				c.WaitExternal()
				c.Add(log.step("added in cancel"))
				_ = c.Resumer()
			})
		case "twice":
			as.SetTimeout(50 * time.Millisecond)
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel1") })
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel2") })
			as.SetTimeout(5 * time.Millisecond)
		}
	}
	handler := func(as vm.AsyncSteps, code string) { log.add("handler %s", code) }
	root := ef.root
	switch encl {
	case "plain":
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { step(as) }, handler)
	case "branch":
		p := root.Parallel(handler)
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { step(as) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("sibling cancel") })
		})
	case "iteration":
		root.Repeat(2, func(as vm.AsyncSteps, i int) {
			if i == 0 {
				step(as)
			}
		})
	case "recover":
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { step(as) }, func(as vm.AsyncSteps, code string) {
			log.add("handler %s", code)
			as.Success(vm.Int(9))
		})
	case "handler adds":
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { step(as) }, func(as vm.AsyncSteps, code string) {
			log.add("handler %s", code)
			as.SetTimeout(3 * time.Millisecond)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("recovery")
				as.WaitExternal()
				as.Tool().Deferred(time.Millisecond, func() { as.Success(vm.Int(8)) })
			})
		})
	case "sub-step":
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(5 * time.Millisecond)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { step(as) })
		}, handler)
	}
	root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next %d", a.Len()) })
	ef.f = root.Promise()
	l.RunUntilIdle()
	return ef
}

// event delivers one external event to the flow.
func (ef *extFlow) event(e string) {
	switch e {
	case "Resumer.Success":
		ef.res.Success(vm.Int(1))
	case "Resumer.Error":
		ef.res.Error("Ext", "ext")
	case "Success":
		ef.h.Success(vm.Int(2))
	case "Error":
		ef.h.Error("HErr", "herr")
	case "timeout":
		ef.clk.Advance(5 * time.Millisecond)
	case "Cancel":
		ef.root.Cancel()
	case "Release":
		ef.root.Release()
	case "Execute":
		ef.root.Execute()
	case "SetTimeout(0)":
		ef.h.SetTimeout(0)
	case "Resumer":
		ef.res = ef.h.Resumer()
	}
}

// Two external events reach a waiting step, in every order, from outside
// the loop, in separate passes, from one Immediate, from two Posts and
// from two Deferreds due together: whatever wins, the flow ends once, no
// cancel handler or error handler runs twice in a run, a replaced cancel
// handler and steps added from a cancel handler never run, and once the
// root is released the loop holds nothing: no arena bytes, timers,
// callback records or Resumer slots (a slot left in use would keep its
// root reachable for good), and the pool hands out a clean root.
func TestSemExternalEventOrderings(t *testing.T) {
	waits := []string{"wait", "timeout", "cancel", "twice"}
	encls := []string{"plain", "branch", "iteration", "recover", "handler adds", "sub-step"}
	events := []string{"Resumer.Success", "Resumer.Error", "Success", "Error", "timeout",
		"Cancel", "Release", "Execute", "SetTimeout(0)", "Resumer"}
	modes := []string{"outside", "passes", "immediate", "posts", "deferreds"}
	for _, wait := range waits {
		for _, encl := range encls {
			for _, e1 := range events {
				for _, e2 := range events {
					for _, mode := range modes {
						name := wait + "/" + encl + "/" + e1 + "/" + e2 + "/" + mode
						extOrdering(t, name, wait, encl, e1, e2, mode)
					}
				}
			}
		}
	}
}

func extOrdering(t *testing.T, name, wait, encl, e1, e2, mode string) {
	t.Helper()
	ef := extStart(wait, encl)
	l := ef.l
	switch mode {
	case "outside":
		ef.event(e1)
		ef.event(e2)
		l.RunUntilIdle()
	case "passes":
		ef.event(e1)
		l.RunUntilIdle()
		ef.event(e2)
		l.RunUntilIdle()
	case "immediate":
		l.Immediate(func() { ef.event(e1); ef.event(e2) })
		l.RunUntilIdle()
	case "posts":
		l.Post(func() { ef.event(e1) })
		l.Post(func() { ef.event(e2) })
		l.RunUntilIdle()
	case "deferreds":
		l.Deferred(5*time.Millisecond, func() { ef.event(e1) })
		l.Deferred(5*time.Millisecond, func() { ef.event(e2) })
		ef.clk.Advance(5 * time.Millisecond)
		l.RunUntilIdle()
	}
	for range 5 {
		ef.clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	if ef.root.Valid() {
		ef.root.Release()
	}
	l.RunUntilIdle()
	select {
	case <-ef.f.Done():
	default:
		t.Fatalf("%s: the flow never ended; log %q", name, ef.log.lines)
	}
	runs := 1
	if e1 == "Execute" || e2 == "Execute" {
		runs = 2
	}
	for line, k := range semCounts(ef.log) {
		if line == "cancel1" || line == "added in cancel" || k > runs {
			t.Fatalf("%s: %q logged %d times: %q", name, line, k, ef.log.lines)
		}
	}
	if s := l.Stats(); s.ArenaInUse != 0 || s.RunningRoots != 0 || s.LiveRoots != 0 || s.Timers != 0 || s.Queued != 0 ||
		vm.CallbacksInUse(l) != 0 || vm.ResumersInUse(l) != 0 {
		t.Fatalf("%s: not clean: %+v callbacks=%d resumers=%d; log %q", name, s, vm.CallbacksInUse(l), vm.ResumersInUse(l), ef.log.lines)
	}
	semNextRootWorks(t, l)
}

// Await's function runs on until its step ends, however the step ends:
// its context is canceled when the step times out, its root is canceled
// or released (and the root reused at once by a flow its late value must
// not reach), a parallel sibling times out, a Break leaves the loop it is
// in, or its handler recovers from the timeout; its late value or panic
// changes nothing. Its goroutine ends, and the loop holds nothing.
func TestSemAwaitEndsWithItsStep(t *testing.T) {
	hows := []string{"value", "error", "panic", "timeout", "cancel", "release", "reuse", "sibling", "break", "recover"}
	for _, how := range hows {
		t.Run(how, func(t *testing.T) {
			before := runtime.NumGoroutine()
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			gate := make(chan struct{})
			ctxErr := make(chan error, 1)
			started := make(chan struct{})
			fn := func(ctx context.Context) (vm.Value, error) {
				close(started)
				select {
				case <-ctx.Done():
				case <-gate:
				}
				ctxErr <- ctx.Err()
				switch how {
				case "error":
					return vm.Value{}, errors.New("boom")
				case "panic":
					panic("late panic")
				}
				return vm.Int(5), nil
			}
			handler := func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				if how == "recover" {
					as.Success(vm.Int(3))
				}
			}
			switch how {
			case "sibling":
				p := root.Parallel(handler)
				p.Await(fn)
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Second) })
			case "break":
				root.Loop(func(as vm.AsyncSteps) {
					p := as.Parallel()
					p.Await(fn)
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(time.Second)
					}, func(as vm.AsyncSteps, code string) { as.Break() })
				})
			default:
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetTimeout(time.Second)
					as.Await(fn)
				}, handler)
			}
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next %d", a.Int(0)) })
			f := root.Promise()
			semDriveUntil(l, started) // until fn runs
			switch how {
			case "value", "error", "panic":
				close(gate)
			case "timeout", "recover", "sibling", "break":
				clk.Advance(time.Second)
			case "cancel":
				root.Cancel()
			case "release", "reuse":
				root.Release()
			}
			l.RunUntilIdle()
			var reused *vm.Future
			if how == "reuse" {
				root = l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Await(func(context.Context) (vm.Value, error) { return vm.Int(7), nil })
				})
				root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("reused got %d", a.Int(0)) })
				reused = root.Promise()
			}
			err := <-ctxErr // fn has returned what it returns
			if canceled := how != "value" && how != "error" && how != "panic"; canceled != (err != nil) {
				t.Fatalf("ctx.Err() = %v", err)
			}
			semDrive(l, f)
			if reused != nil {
				semDrive(l, reused)
			}
			for range 3 { // the late completion, if any, arrives and is dropped
				l.RunUntilIdle()
				time.Sleep(time.Millisecond)
			}
			want := map[string][]string{
				"value":   {"next 5"},
				"error":   {"handler InternalError"},
				"panic":   {"handler InternalError"},
				"timeout": {"handler Timeout"},
				"sibling": {"handler Timeout"},
				"break":   {"next 0"},
				"recover": {"handler Timeout", "next 3"},
				"reuse":   {"reused got 7"},
			}[how]
			semExpect(t, &log, want...)
			switch _, err := f.Wait(context.Background()); how {
			case "cancel", "release", "reuse":
				if !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error %v", err)
				}
			}
			if root.Valid() {
				root.Release()
			}
			semClean(t, l)
			if n := vm.ResumersInUse(l); n != 0 {
				t.Fatalf("%d Resumer slots in use", n)
			}
			for i := 0; runtime.NumGoroutine() > before && i < 1000; i++ {
				time.Sleep(time.Millisecond)
			}
			if g := runtime.NumGoroutine(); g > before {
				t.Fatalf("%d goroutines, %d before", g, before)
			}
		})
	}
}

// Close while Resumer completions, Cancels, Releases and clock moves come
// from other goroutines, two completions racing for each step: Run
// returns, the completions that were accepted wait in the inbox, and
// driving the closed loop by hand ends every flow once and leaves nothing
// in use.
func TestSemCloseWithResumersPending(t *testing.T) {
	l, clk := semLoop()
	const flows = 200
	type waiting struct {
		i    int
		root vm.AsyncSteps
		res  vm.Resumer
	}
	ready := make(chan waiting, flows)
	futures := make([]*vm.Future, flows)
	var mu sync.Mutex
	ended := make([]int, flows)
	for i := range flows {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			switch i % 4 {
			case 0:
				as.SetTimeout(time.Duration(1+i%3) * time.Millisecond)
			case 1:
				as.SetCancel(func(vm.AsyncSteps) {})
			case 2:
				as.Await(func(ctx context.Context) (vm.Value, error) {
					<-ctx.Done()
					return vm.Int(1), nil
				})
				as.SetTimeout(2 * time.Millisecond)
				return
			}
			ready <- waiting{i, root, as.Resumer()}
			as.WaitExternal()
		}, func(as vm.AsyncSteps, code string) {
			if i%5 == 0 {
				as.Success()
			}
		})
		root.Add(func(vm.AsyncSteps, vm.Args) {})
		futures[i] = root.Promise()
		go func() {
			<-futures[i].Done()
			mu.Lock()
			ended[i]++
			mu.Unlock()
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var wg sync.WaitGroup
	for range flows - flows/4 {
		w := <-ready
		wg.Add(3)
		go func() { defer wg.Done(); w.res.Success(vm.Int(int64(w.i))) }()
		go func() { defer wg.Done(); w.res.Error("E", "") }()
		go func() {
			defer wg.Done()
			switch w.i % 3 {
			case 0:
				l.Post(func() { w.root.Cancel() })
			case 1:
				l.Post(func() { w.root.Release() })
			default:
				clk.Advance(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	l.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run after Close = %v", err)
	}
	for i := 0; i < 1000; i++ {
		clk.Advance(time.Millisecond)
		l.RunUntilIdle()
		if st := l.Stats(); st.RunningRoots == 0 && st.Timers == 0 {
			break
		}
		runtime.Gosched()
	}
	for i, f := range futures {
		select {
		case <-f.Done():
		default:
			t.Fatalf("flow %d never ended", i)
		}
	}
	semClean(t, l)
	if n := vm.ResumersInUse(l); n != 0 {
		t.Fatalf("%d Resumer slots in use", n)
	}
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for i, n := range ended {
		if n != 1 {
			t.Fatalf("flow %d ended %d times", i, n)
		}
	}
}
