package vm_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// A Future reports the values of the last step, and they stay valid after
// the flow's memory is reused.
func TestSemFutureValues(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	buf := []byte("bytes")
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Success(vm.Str("s"), vm.Uint(2), vm.Bytes(buf), vm.Any(fmt.Stringer(nil)))
	})
	f := root.Promise()
	l.RunUntilIdle()
	root.Release()
	// Another flow reuses the memory.
	other := l.NewSteps()
	other.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str("other"), vm.Int(9), vm.Int(9), vm.Int(9)) })
	of := other.Promise()
	l.RunUntilIdle()
	semOK(t, of)
	a := semOK(t, f)
	if a.Len() != 4 || a.String(0) != "s" || a.Uint(1) != 2 || string(a.BytesAt(2)) != "bytes" || a.Get(3).Kind() != vm.KindAny {
		t.Fatalf("Future values = %v", a.Values())
	}
}

// An unhandled error reaches the Future as *vm.Error with the code and the
// ErrorInfo; errors.Is matches the sentinels by code.
func TestSemFutureErrors(t *testing.T) {
	cases := []struct {
		name     string
		body     vm.ExecFunc
		timeout  bool
		sentinel error
		code     string
		info     string
	}{
		{"timeout", func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Second) }, true, vm.ErrTimeout, vm.Timeout, ""},
		{"internal", func(as vm.AsyncSteps, _ vm.Args) { as.Error(vm.InternalError, "bad") }, false, vm.ErrInternal, vm.InternalError, "bad"},
		{"defense", func(as vm.AsyncSteps, _ vm.Args) { as.Error(vm.DefenseRejected, "no") }, false, vm.ErrDefenseRejected, vm.DefenseRejected, "no"},
		{"not implemented", func(as vm.AsyncSteps, _ vm.Args) { as.Error(vm.NotImplemented) }, false, vm.ErrNotImplemented, vm.NotImplemented, ""},
		{"custom", func(as vm.AsyncSteps, _ vm.Args) { as.Error("MyCode", "mine") }, false, &vm.Error{Code: "MyCode"}, "MyCode", "mine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			root.Add(c.body)
			f := root.Promise()
			l.RunUntilIdle()
			if c.timeout {
				clk.Advance(time.Second)
				l.RunUntilIdle()
			}
			_, err := semResult(t, f)
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("errors.Is(%v, %v) = false", err, c.sentinel)
			}
			if errors.Is(err, vm.ErrCanceled) || (c.sentinel != vm.ErrComm && errors.Is(err, vm.ErrComm)) {
				t.Fatalf("%v matches an unrelated sentinel", err)
			}
			var e *vm.Error
			if !errors.As(err, &e) || e.Code != c.code || e.Info != c.info {
				t.Fatalf("Future error = %#v, want code %q info %q", err, c.code, c.info)
			}
		})
	}
}

// Done is closed only when the flow completes; Wait honours its context
// while the flow runs.
func TestSemFutureDoneAndWait(t *testing.T) {
	l, _, f, res := semResumerWait()
	semPending(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a canceled context = %v", err)
	}
	res.Success(vm.Int(3))
	l.RunUntilIdle()
	if a := semOK(t, f); a.Int(0) != 3 {
		t.Fatalf("result %v", a.Values())
	}
}

// A settled Future reports its result to every Wait, even one whose
// context is done: a canceled context or one past its deadline.
func TestSemFutureWaitSettledWithDoneContext(t *testing.T) {
	l, _, f, res := semResumerWait()
	res.Success(vm.Int(3))
	l.RunUntilIdle()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for range 100 {
		for _, ctx := range []context.Context{canceled, expired} {
			if a, err := f.Wait(ctx); err != nil || a.Int(0) != 3 {
				t.Fatalf("Wait on a settled Future = %v, %v", a.Values(), err)
			}
		}
	}
}

// Await succeeds with the function's value, run on another goroutine.
func TestSemAwaitSuccess(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Await(func(ctx context.Context) (vm.Value, error) { return vm.Int(42), nil })
		as.Add(func(as vm.AsyncSteps, a vm.Args) {
			log.add("got %d", a.Int(0))
			as.Success(vm.Int(a.Int(0) * 2))
		})
	})
	f := root.Promise()
	semDrive(l, f)
	if a := semOK(t, f); a.Int(0) != 84 {
		t.Fatalf("result %v", a.Values())
	}
	semExpect(t, &log, "got 42")
}

// Await errors: a *vm.Error keeps its code and info; a plain error becomes
// InternalError with its text as ErrorInfo; a panic becomes InternalError.
func TestSemAwaitErrors(t *testing.T) {
	cases := []struct {
		name string
		fn   func(ctx context.Context) (vm.Value, error)
		code string
		info string
	}{
		{"vm error", func(context.Context) (vm.Value, error) {
			return vm.Value{}, &vm.Error{Code: vm.Unauthorized, Info: "who are you"}
		}, vm.Unauthorized, "who are you"},
		{"wrapped vm error", func(context.Context) (vm.Value, error) {
			return vm.Value{}, fmt.Errorf("wrapping: %w", &vm.Error{Code: vm.CommError, Info: "link down"})
		}, vm.CommError, "link down"},
		{"plain error", func(context.Context) (vm.Value, error) {
			return vm.Value{}, errors.New("disk on fire")
		}, vm.InternalError, "disk on fire"},
		{"panic", func(context.Context) (vm.Value, error) { panic("await panic") }, vm.InternalError, ""},
		{"nil vm error", func(context.Context) (vm.Value, error) {
			var e *vm.Error // a non-nil error holding a nil *vm.Error
			return vm.Value{}, e
		}, vm.InternalError, "panic with a nil *Error"},
		{"nil vm error panic", func(context.Context) (vm.Value, error) { panic((*vm.Error)(nil)) }, vm.InternalError, "panic with a nil *Error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			root.Await(c.fn, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
			})
			root.Add(log.step("next never"))
			f := root.Promise()
			semDrive(l, f)
			e := semFail(t, f, c.code)
			if c.info != "" && e.Info != c.info {
				t.Fatalf("info = %q, want %q", e.Info, c.info)
			}
			if c.name == "panic" {
				semInfoMentions(t, e.Info, "await panic")
			}
			semExpect(t, &log, "handler "+c.code)
		})
	}
}

// Await's context is canceled when the step times out and when the root is
// canceled; the function's late result changes nothing.
func TestSemAwaitContextCanceled(t *testing.T) {
	for _, how := range []string{"timeout", "cancel", "sibling error"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			started := make(chan struct{})
			canceled := make(chan error, 1)
			fn := func(ctx context.Context) (vm.Value, error) {
				close(started)
				<-ctx.Done()
				canceled <- ctx.Err()
				return vm.Int(1), nil
			}
			switch how {
			case "timeout", "cancel":
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetTimeout(time.Second)
					as.Await(fn)
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
			case "sibling error":
				p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				p.Await(fn)
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.WaitExternal()
					res := as.Resumer()
					go func() {
						<-started
						res.Error("Sibling", "")
					}()
				})
			}
			root.Add(log.step("next never"))
			f := root.Promise()
			semDriveUntil(l, started) // until fn runs
			switch how {
			case "timeout":
				clk.Advance(time.Second)
			case "cancel":
				root.Cancel()
			}
			semDrive(l, f)
			if err := <-canceled; !errors.Is(err, context.Canceled) {
				t.Fatalf("ctx.Err() = %v", err)
			}
			l.RunUntilIdle() // deliver fn's late result: it must change nothing
			switch how {
			case "timeout":
				semFail(t, f, vm.Timeout)
				semExpect(t, &log, "handler Timeout")
			case "cancel":
				if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error %v", err)
				}
				semExpect(t, &log)
			case "sibling error":
				semFail(t, f, "Sibling")
				semExpect(t, &log, "handler Sibling")
			}
		})
	}
}

// An Await function that ends its goroutine with runtime.Goexit (as
// t.FailNow does) instead of returning fails its step with InternalError,
// as a panic does: the flow does not wait for a value that never comes.
func TestSemAwaitGoexit(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Await(func(context.Context) (vm.Value, error) {
		runtime.Goexit()
		return vm.Int(1), nil
	}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
	root.Add(log.step("next never"))
	f := root.Promise()
	stop := semRunAsync(t, l)
	semAwait(t, f.Done(), "the flow of an Await whose function called Goexit")
	stop()
	semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "Goexit")
	semExpect(t, &log, "handler InternalError")
	semClean(t, l)
}

// Wait called inside a callback of the Run that drives the Future's loop
// could never return: the flow it waits for completes only when the loop
// runs on. It is misuse, reported at once as a nested pass is: the step's
// flow fails with InternalError, an Immediate's panic goes to the panic
// handler. It once blocked the loop until ctx was done, or for good. A
// settled Future still reports its result there.
func TestSemFutureWaitInsideRunIsMisuse(t *testing.T) {
	handled := make(chan any, 1)
	l := vm.NewLoop(vm.WithPanicHandler(func(v any) { handled <- v }))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var log semLog
	other := l.NewSteps()
	other.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(7)) })
	settled := l.NewSteps()
	settled.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(8)) })
	sf := settled.Promise()
	l.RunUntilIdle()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		a, err := sf.Wait(ctx)
		log.add("settled %d %v", a.Int(0), err)
		g := other.Promise()
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		a, err = g.Wait(wctx)
		log.add("Wait returned %v %v", a.Values(), err)
	}, func(as vm.AsyncSteps, code string) {
		log.add("handler %s", code)
		semInfoMentions(t, as.State().ErrorInfo(), "Wait", "inside")
	})
	f := root.Promise()
	l.Immediate(func() {
		g := l.NewSteps()
		g.Add(func(as vm.AsyncSteps, _ vm.Args) {})
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		g.Promise().Wait(wctx)
		log.add("Wait in an Immediate returned")
	})
	go func() {
		<-f.Done()
		l.Close()
	}()
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	semFail(t, f, vm.InternalError)
	semExpect(t, &log, "settled 8 <nil>", "handler InternalError")
	select {
	case v := <-handled:
		if e, ok := v.(*vm.Error); !ok || e.Code != vm.InternalError {
			t.Fatalf("panic handler got %#v, want an InternalError", v)
		}
	default:
		t.Fatal("Wait in an Immediate was not reported")
	}
}
