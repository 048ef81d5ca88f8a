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

// A waiting step completes through its own handle from a later Immediate,
// with success or with an error.
func TestSemWaitExternalThroughHandle(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				as.Tool().Immediate(func() {
					log.add("immediate")
					as.Success(vm.Int(5), vm.Str("five"))
					log.add("Success returned")
				})
			})
			root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %d %s", a.Int(0), a.String(1)) })
		}, "immediate", "Success returned", "next got 5 five")
	})
	t.Run("error", func(t *testing.T) {
		semRunFail(t, "Ext", func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				as.Tool().Immediate(func() {
					as.Error("Ext", "external failure")
					log.add("Error returned")
				})
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s %s", code, as.State().ErrorInfo())
			})
			root.Add(log.step("next never"))
		}, "handler Ext external failure", "Error returned")
	})
}

// A Resumer completes a step from another goroutine while Run drives the
// loop on its own goroutine.
func TestSemResumerFromGoroutines(t *testing.T) {
	l, _ := semLoop()
	const flows = 64
	futures := make([]*vm.Future, flows)
	results := make([]int64, flows)
	for i := range flows {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			res := as.Resumer()
			as.WaitExternal()
			go func() {
				if !res.Success(vm.Int(int64(i * 10))) {
					panic("Resumer.Success of a waiting step returned false")
				}
			}()
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) {
			results[i] = a.Int(0)
			as.Success(vm.Int(a.Int(0) + 1))
		})
		futures[i] = root.Promise()
	}
	stop := semRunAsync(t, l)
	for i, f := range futures {
		args, err := f.Wait(context.Background())
		if err != nil || args.Int(0) != int64(i*10+1) {
			t.Errorf("flow %d: %v %v, want %d", i, args.Values(), err, i*10+1)
		}
	}
	stop()
	for i, v := range results {
		if v != int64(i*10) {
			t.Fatalf("flow %d step 2 got %d", i, v)
		}
	}
}

// The test goroutine may drive the loop itself with RunUntilIdle while a
// Resumer completes from elsewhere; Resumer.Error delivers code and info.
func TestSemResumerErrorDrivenByRunUntilIdle(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res := as.Resumer()
		as.SetTimeout(time.Hour) // waits as well; the clock never moves
		go res.Error("Remote", "remote info")
	}, func(as vm.AsyncSteps, code string) {
		log.add("handler %s %s", code, as.State().ErrorInfo())
	})
	f := root.Promise()
	semDrive(l, f)
	e := semFail(t, f, "Remote")
	if e.Info != "remote info" {
		t.Fatalf("Future info = %q", e.Info)
	}
	semExpect(t, &log, "handler Remote remote info")
}

// Resumer.Success with more than four values fails the step with
// InternalError (and returns false) rather than leaving it waiting.
func TestSemResumerTooManyValues(t *testing.T) {
	l, _, f, res := semResumerWait()
	if res.Success(vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4), vm.Int(5)) {
		t.Fatal("Success with five values returned true")
	}
	if res.Success(vm.Int(1)) {
		t.Fatal("a completion after the refused one returned true")
	}
	l.RunUntilIdle()
	e := semFail(t, f, vm.InternalError)
	semInfoMentions(t, e.Info, "more than 4 values")
}

// A completion that comes after the step timed out returns false and does
// not touch the step that now runs.
func TestSemResumerLate(t *testing.T) {
	l, clk := semLoop()
	root := l.NewSteps()
	var log semLog
	var r1, r2 vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		r1 = as.Resumer()
		as.SetTimeout(10 * time.Millisecond)
	}, func(as vm.AsyncSteps, code string) {
		log.add("handler %s", code)
		as.Success()
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) {
		log.add("second got %d", a.Len())
		r2 = as.Resumer()
		as.WaitExternal()
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("third got %d", a.Int(0)) })
	f := root.Promise()
	l.RunUntilIdle()
	clk.Advance(10 * time.Millisecond)
	l.RunUntilIdle()
	semExpect(t, &log, "handler Timeout", "second got 0")
	if r1.Success(vm.Int(1)) {
		t.Error("late Resumer.Success returned true")
	}
	if r1.Error("Late", "") {
		t.Error("late Resumer.Error returned true")
	}
	l.RunUntilIdle()
	semExpect(t, &log, "handler Timeout", "second got 0")
	semPending(t, f)
	if !r2.Success(vm.Int(2)) {
		t.Fatal("Resumer.Success of the waiting step returned false")
	}
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "handler Timeout", "second got 0", "third got 2")
}

// A completion that comes after the step timed out, or is on its way when
// it does, changes nothing when the error handler recovered by adding
// steps: the step lives on, but its wait is over. (Its Resumer stayed
// live: the completion failed the recovered flow with InternalError.)
func TestSemResumerLateAfterHandlerAddsSteps(t *testing.T) {
	for _, race := range []bool{false, true} {
		l, clk := semLoop()
		root := l.NewSteps()
		var log semLog
		var res vm.Resumer
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			res = as.Resumer()
			as.SetTimeout(10 * time.Millisecond)
		}, func(as vm.AsyncSteps, code string) {
			log.add("handler %s", code)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("recovery")
				as.SetTimeout(5 * time.Millisecond)
			}, func(as vm.AsyncSteps, code string) {
				log.add("recovery handler %s", code)
				as.Success(vm.Int(7))
			})
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next %d", a.Int(0)) })
		f := root.Promise()
		l.RunUntilIdle()
		clk.Advance(10 * time.Millisecond)
		if race { // posted in the pass whose timers time the step out
			l.Immediate(func() { res.Success(vm.Int(1)) })
			l.Iterate()
		} else {
			l.Iterate()
			if res.Success(vm.Int(1)) || res.Error("Late", "") {
				t.Error("a Resumer completion after the timeout returned true")
			}
		}
		l.RunUntilIdle()
		clk.Advance(5 * time.Millisecond)
		l.RunUntilIdle()
		semOK(t, f)
		semExpect(t, &log, "handler Timeout", "recovery", "recovery handler Timeout", "next 7")
	}
}

// Only the first completion through a Resumer counts.
func TestSemResumerDuplicate(t *testing.T) {
	cases := []struct {
		name   string
		second func(r vm.Resumer) bool
	}{
		{"success twice", func(r vm.Resumer) bool { return r.Success(vm.Int(2)) }},
		{"error after success", func(r vm.Resumer) bool { return r.Error("Dup", "") }},
	}
	for _, c := range cases {
		for _, drained := range []bool{false, true} {
			name := c.name
			if drained {
				name += " after delivery"
			}
			t.Run(name, func(t *testing.T) {
				l, _ := semLoop()
				root := l.NewSteps()
				var log semLog
				var res vm.Resumer
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					res = as.Resumer()
					as.WaitExternal()
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				root.Add(func(as vm.AsyncSteps, a vm.Args) {
					log.add("next got %d", a.Int(0))
					as.WaitExternal()
				})
				f := root.Promise()
				l.RunUntilIdle()
				if !res.Success(vm.Int(1)) {
					t.Fatal("first Resumer.Success returned false")
				}
				if drained {
					l.RunUntilIdle()
				}
				if c.second(res) {
					t.Fatal("second completion returned true")
				}
				l.RunUntilIdle()
				semExpect(t, &log, "next got 1")
				semPending(t, f)
				root.Cancel()
			})
		}
	}
}

// A Resumer of a step whose root was released returns false, also once a
// new flow reuses the pooled root, and does not touch that flow.
func TestSemResumerStaleAfterRelease(t *testing.T) {
	l, _ := semLoop()
	var log semLog
	old := l.NewSteps()
	var stale vm.Resumer
	old.Add(func(as vm.AsyncSteps, _ vm.Args) {
		stale = as.Resumer()
		as.WaitExternal()
	})
	old.Execute()
	l.RunUntilIdle()
	old.Release()
	if stale.Success() {
		t.Fatal("Resumer of a released root returned true")
	}

	root := l.NewSteps()
	var fresh vm.Resumer
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		fresh = as.Resumer()
		as.WaitExternal()
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("next got %s", a.String(0)) })
	f := root.Promise()
	l.RunUntilIdle()
	if stale.Success(vm.Str("stale")) || stale.Error("Stale", "") {
		t.Fatal("stale Resumer returned true")
	}
	l.RunUntilIdle()
	semPending(t, f)
	if !fresh.Success(vm.Str("fresh")) {
		t.Fatal("fresh Resumer returned false")
	}
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "next got fresh")
}

// A Resumer of a canceled step returns false.
func TestSemResumerAfterCancel(t *testing.T) {
	_, root, f, res := semResumerWait()
	root.Cancel()
	if res.Success() {
		t.Fatal("Resumer of a canceled step returned true")
	}
	if _, err := semResult(t, f); err == nil {
		t.Fatal("canceled flow succeeded")
	}
}

// SuccessOrRelease's release runs, on the loop, exactly when a completion
// it accepted is dropped because the step ended before the loop took it;
// not when the step takes the values, nor when the completion is refused.
func TestSemResumerSuccessOrRelease(t *testing.T) {
	for _, tc := range []struct {
		name               string
		endFirst, accepted bool
		released           int
	}{
		{"delivered", false, true, 0},
		{"dropped", true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, root, f, res := semResumerWait()
			released, onLoop := 0, true
			release := func() { released++; onLoop = onLoop && l.IsSameThread() }
			done := make(chan bool)
			go func() { done <- res.SuccessOrRelease(release, vm.Str("resource")) }()
			if <-done != tc.accepted {
				t.Fatalf("accepted: %v, want %v", !tc.accepted, tc.accepted)
			}
			if tc.endFirst {
				root.Cancel() // before the loop takes the completion
			}
			l.RunUntilIdle()
			if released != tc.released || !onLoop {
				t.Fatalf("release ran %d times (on the loop: %v), want %d", released, onLoop, tc.released)
			}
			if tc.endFirst {
				if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error = %v, want ErrCanceled", err)
				}
			} else if got := semOK(t, f); got.String(0) != "resource" {
				t.Fatalf("the flow ended with %v", got.Values())
			}
			if res.SuccessOrRelease(release) {
				t.Fatal("a second completion was accepted")
			}
			l.RunUntilIdle()
			if released != tc.released {
				t.Fatalf("a refused completion's release ran")
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// Only one of many goroutines racing to complete a step wins.
func TestSemResumerRace(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	const racers = 16
	var wg sync.WaitGroup
	won := make(chan int64, racers)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		res := as.Resumer()
		as.WaitExternal()
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if res.Success(vm.Int(int64(i))) {
					won <- int64(i)
				}
			}()
		}
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { as.Success(a.Get(0), vm.Int(int64(a.Len()))) })
	f := root.Promise()
	semDrive(l, f)
	args := semOK(t, f)
	wg.Wait()
	close(won)
	var winners []int64
	for i := range won {
		winners = append(winners, i)
	}
	if len(winners) != 1 || args.Int(1) != 1 || args.Int(0) != winners[0] {
		t.Fatalf("result = %v, winners = %v: want one winner whose value arrived", args.Values(), winners)
	}
}

// Resumer completions from many goroutines race with timeouts while Run
// drives the loop and the test moves the clock: every flow ends exactly
// once, a refused completion means the flow timed out, and the loop ends
// with nothing in use.
func TestSemResumerRacesTimeouts(t *testing.T) {
	l, clk := semLoop()
	const flows = 500
	futures := make([]*vm.Future, flows)
	resumers := make(chan struct {
		i int
		r vm.Resumer
	}, flows)
	for i := range flows {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			resumers <- struct {
				i int
				r vm.Resumer
			}{i, as.Resumer()}
			as.SetTimeout(time.Duration(1+i%7) * time.Millisecond)
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { as.Success(vm.Int(a.Int(0) + 1)) })
		futures[i] = root.Promise()
	}
	stop := semRunAsync(t, l)
	accepted := make([]bool, flows)
	var wg sync.WaitGroup
	for range flows {
		rr := <-resumers
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rr.i%2 == 0 {
				accepted[rr.i] = rr.r.Success(vm.Int(int64(rr.i)))
			}
		}()
		if rr.i%50 == 0 {
			clk.Advance(time.Millisecond)
		}
	}
	wg.Wait()
	for i, f := range futures {
		// A timer is armed at the end of its step's pass, which may come
		// after any given Advance: move the clock until the flow ends.
		for done := false; !done; {
			select {
			case <-f.Done():
				done = true
			default:
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		}
		args, err := f.Wait(context.Background())
		switch {
		case err == nil:
			if i%2 != 0 || !accepted[i] || args.Int(0) != int64(i+1) {
				t.Errorf("flow %d succeeded with %v (completed=%v accepted=%v)", i, args.Values(), i%2 == 0, accepted[i])
			}
		case errors.Is(err, vm.ErrTimeout):
			// Either never completed, or the completion lost the race.
		default:
			t.Errorf("flow %d: %v", i, err)
		}
	}
	stop()
	if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 {
		t.Fatalf("after the flows: %+v", st)
	}
}

// Resumer completions race, from many goroutines, with Posts that cancel
// or release the same flows while Run drives the loop, and then with the
// reuse of the released roots by new flows, which the late completions
// must not reach. Every flow ends exactly once, with the completion's
// value only if it won, and the loop ends with nothing in use.
func TestSemResumerRacesCancelAndRelease(t *testing.T) {
	l, _ := semLoop()
	const flows = 300
	type waiting struct {
		i    int
		root vm.AsyncSteps
		res  vm.Resumer
	}
	ready := make(chan waiting, 2*flows)
	futures := make([]*vm.Future, 2*flows)
	start := func(i int) {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) {})
			ready <- waiting{i, root, as.Resumer()}
			as.WaitExternal()
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { as.Success(vm.Int(a.Int(0))) })
		futures[i] = root.Promise()
	}
	for i := range flows {
		start(i)
	}
	stop := semRunAsync(t, l)
	var wg sync.WaitGroup
	stale := make([]vm.Resumer, 0, flows)
	for range flows {
		w := <-ready
		stale = append(stale, w.res)
		wg.Add(2)
		go func() { defer wg.Done(); w.res.Success(vm.Int(int64(w.i))) }()
		go func() {
			defer wg.Done()
			l.Post(func() {
				if w.i%2 == 0 {
					w.root.Cancel()
				} else {
					w.root.Release()
				}
			})
		}()
	}
	wg.Wait()
	for _, f := range futures[:flows] {
		<-f.Done()
	}
	// New flows take the released roots; the stale Resumers fire at them.
	done := make(chan struct{})
	l.Post(func() {
		for i := flows; i < 2*flows; i++ {
			start(i)
		}
		close(done)
	})
	<-done
	for _, res := range stale {
		wg.Add(1)
		go func() { defer wg.Done(); res.Success(vm.Int(-1)) }()
	}
	for range flows {
		w := <-ready
		w.res.Success(vm.Int(int64(w.i)))
	}
	wg.Wait()
	for i, f := range futures {
		<-f.Done()
		args, err := f.Wait(context.Background())
		switch {
		case err == nil:
			if args.Int(0) != int64(i) {
				t.Errorf("flow %d succeeded with %v", i, args.Values())
			}
		case errors.Is(err, vm.ErrCanceled) && i < flows:
		default:
			t.Errorf("flow %d: %v", i, err)
		}
	}
	stop()
	if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 || st.Timers != 0 || vm.CallbacksInUse(l) != 0 {
		t.Fatalf("after the flows: %+v, %d callbacks", st, vm.CallbacksInUse(l))
	}
}
