package vm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Errors unwind to the nearest error handler, which may recover with
// Success; the values reach the next step.
func Example() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("NotFound", "no such user")
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println("recovering from", code+":", as.State().ErrorInfo())
			as.Success(vm.Str("guest")) // continue with a default
		})
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		as.Repeat(3, func(as vm.AsyncSteps, i int) {
			fmt.Println("hello", args.String(0), i)
		})
	})
	f := root.Promise() // Execute, with a Future
	l.RunUntilIdle()
	<-f.Done()
	root.Release()
	// Output:
	// recovering from NotFound: no such user
	// hello guest 0
	// hello guest 1
	// hello guest 2
}

// An error handler may Error again (the code changes), Success (the flow
// continues after the failed step) or return (unwinding goes on).
func ExampleAsyncSteps_Error() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("myerror")
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println("inner handler:", code)
			as.Error("newerror")
		})
	}, func(as vm.AsyncSteps, code string) {
		fmt.Println("outer handler:", code)
		as.Success(vm.Int(42))
	})
	root.Add(func(as vm.AsyncSteps, args vm.Args) {
		fmt.Println("next step got", args.Int(0))
	})
	root.Execute()
	l.RunUntilIdle()
	// Output:
	// inner handler: myerror
	// outer handler: newerror
	// next step got 42
}

// Branches of a parallel step interleave turn by turn; the step completes
// when all have.
func ExampleAsyncSteps_Parallel() {
	l := vm.NewLoop()
	root := l.NewSteps()
	p := root.Parallel()
	for _, name := range []string{"A", "B"} {
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			fmt.Println(name, "step 1")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { fmt.Println(name, "step 2") })
		})
	}
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { fmt.Println("all branches done") })
	root.Execute()
	l.RunUntilIdle()
	// Output:
	// A step 1
	// B step 1
	// A step 2
	// B step 2
	// all branches done
}

// Break and Continue take an optional label to leave or restart an outer
// loop from any depth.
func ExampleAsyncSteps_Loop() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		outer := 0
		as.Loop(func(as vm.AsyncSteps) {
			outer++
			as.Repeat(10, func(as vm.AsyncSteps, i int) {
				if i == 2 {
					as.Continue("OUTER")
				}
				if outer == 3 {
					as.Break("OUTER")
				}
				fmt.Println("outer", outer, "inner", i)
			})
		}, "OUTER")
	})
	root.Execute()
	l.RunUntilIdle()
	// Output:
	// outer 1 inner 0
	// outer 1 inner 1
	// outer 2 inner 0
	// outer 2 inner 1
}

// A step waits for an external event; a Resumer completes it from any
// goroutine.
func ExampleAsyncSteps_Resumer() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		res := as.Resumer()
		go func() { res.Success(vm.Str("from another goroutine")) }()
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		fmt.Println(args.String(0))
	})
	f := root.Promise()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-f.Done(); cancel() }()
	l.Run(ctx) // sleeps until the Resumer's completion wakes it
	// Output:
	// from another goroutine
}

// A step that does not complete in time fails with Timeout; its cancel
// handler runs first.
func ExampleAsyncSteps_SetTimeout() {
	clock := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clock))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { fmt.Println("cancel the request") })
		as.SetTimeout(30 * time.Second)
	}, func(as vm.AsyncSteps, code string) {
		fmt.Println("handler:", code)
	})
	root.Execute()
	l.RunUntilIdle()
	clock.Advance(30 * time.Second)
	l.RunUntilIdle()
	// Output:
	// cancel the request
	// handler: Timeout
}

// Stack memory lives as long as its step: it comes from the root's arena
// and is freed, innermost first, when the step ends.
func ExampleStack() {
	type point struct{ X, Y float64 }
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		p := vm.Stack[point](as)
		p.X, p.Y = 3, 4
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			fmt.Println("sub-step sees", p.X, p.Y) // the parent step is still alive
		})
	})
	root.Execute()
	l.RunUntilIdle()
	fmt.Println("arena bytes in use after the flow:", l.Stats().ArenaInUse)
	// Output:
	// sub-step sees 3 4
	// arena bytes in use after the flow: 0
}

// Promise returns a Future another goroutine can wait on.
func ExampleAsyncSteps_Promise() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.Success(vm.Int(6), vm.Int(7))
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		as.Success(vm.Int(args.Int(0) * args.Int(1)))
	})
	f := root.Promise()
	go l.RunUntilIdle()
	args, err := f.Wait(context.Background())
	fmt.Println(args.Int(0), err)
	// Output:
	// 42 <nil>
}

// Iterate runs one pass of the loop for a foreign event loop and says when
// to call it next: at once while immediate work remains (delay 0), after
// delay when only timers remain, and not until new work arrives when
// haveWork is false.
func ExampleLoop_Iterate() {
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	l.Deferred(20*time.Millisecond, func() { fmt.Println("timer") })
	l.Immediate(func() {
		fmt.Println("immediate")
		l.Immediate(func() { fmt.Println("queued by immediate: next pass") })
	})
	for {
		haveWork, delay := l.Iterate()
		fmt.Println("haveWork", haveWork, "delay", delay)
		if !haveWork {
			break
		}
		clk.Advance(delay) // a foreign loop would sleep this long
	}
	// Output:
	// immediate
	// haveWork true delay 0s
	// queued by immediate: next pass
	// haveWork true delay 20ms
	// timer
	// haveWork false delay 0s
}

// A foreign event loop that drives the loop with Iterate sleeps on its own
// channel when the loop has nothing to do; WithWakeup signals it when work
// comes from another goroutine, here a worker's completion of a waiting
// step.
func ExampleWithWakeup() {
	wake := make(chan struct{}, 1)
	l := vm.NewLoop(vm.WithWakeup(func() {
		select {
		case wake <- struct{}{}:
		default: // a wakeup is pending already
		}
	}))
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		go func(r vm.Resumer) { r.Success(vm.Str("from a worker")) }(as.Resumer())
	})
	root.Add(func(as vm.AsyncSteps, args vm.Args) { fmt.Println("got", args.String(0)) })
	f := root.Promise()
	for {
		haveWork, delay := l.Iterate()
		select {
		case <-f.Done(): // the foreign loop would go on with its own work
			return
		default:
		}
		switch {
		case haveWork && delay == 0:
		case haveWork: // only timers: sleep until the first, or a wakeup
			select {
			case <-wake:
			case <-time.After(delay):
			}
		default:
			<-wake
		}
	}
	// Output:
	// got from a worker
}

// Spawn runs a one-step flow on a pooled root and releases the root when
// the flow completes: the flow-per-request pattern, with nothing to clean
// up afterwards.
func ExampleLoop_Spawn() {
	l := vm.NewLoop()
	for i := range 3 {
		l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("NotFound", fmt.Sprint("request ", i))
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println(code+":", as.State().ErrorInfo())
			as.Success()
		})
	}
	l.RunUntilIdle()
	st := l.Stats()
	fmt.Println("live roots:", st.LiveRoots, "pooled:", st.PooledRoots, "arena bytes in use:", st.ArenaInUse)
	// Output:
	// NotFound: request 0
	// NotFound: request 1
	// NotFound: request 2
	// live roots: 0 pooled: 3 arena bytes in use: 0
}

// A step function that recovers panics of its own lets the VM's unwinding
// pass: Error, Break and Continue unwind with a panic that IsUnwinding
// reports, and so does the VM's report of a misuse.
func ExampleIsUnwinding() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		defer func() {
			if p := recover(); p != nil {
				if vm.IsUnwinding(p) {
					panic(p) // Error's: the VM's to handle
				}
				fmt.Println("recovered", p)
			}
		}()
		as.Error("Denied", "not allowed")
	}, func(as vm.AsyncSteps, code string) {
		fmt.Println("handler:", code, as.State().ErrorInfo())
	})
	f := root.Promise()
	l.RunUntilIdle()
	_, err := f.Wait(context.Background())
	fmt.Println("flow:", err)
	root.Release()
	// Output:
	// handler: Denied not allowed
	// flow: Denied: not allowed
}

// A step sleeps with Deferred, completing itself when the timer fires;
// its cancel handler stops the timer if the flow ends first. Here the
// sleep is the backoff of a retry loop: the error handler of an attempt
// adds it (the attempt then counts as done), and the step after the
// attempt leaves the loop with Break once one has succeeded.
func ExampleLoop_Deferred() {
	clock := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clock))
	sleep := func(as vm.AsyncSteps, d time.Duration) {
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			h := as.Tool().Deferred(d, func() { as.Success() })
			as.SetCancel(func(as vm.AsyncSteps) { as.Tool().Cancel(h) })
		})
	}
	calls := 0
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		backoff := 100 * time.Millisecond
		as.Loop(func(as vm.AsyncSteps) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if calls++; calls < 3 { // a backend that fails twice
					as.Error(vm.CommError, fmt.Sprint("attempt ", calls))
				}
				as.Success(vm.Str("payload"))
			}, func(as vm.AsyncSteps, code string) {
				fmt.Println(clock.Now().Sub(time.Unix(0, 0)), code, as.State().ErrorInfo())
				sleep(as, backoff)
				backoff *= 2
			})
			as.Add(func(as vm.AsyncSteps, args vm.Args) {
				if args.Len() > 0 { // the attempt succeeded, not its handler
					fmt.Println(clock.Now().Sub(time.Unix(0, 0)), "got", args.String(0))
					as.Break()
				}
			})
		})
	})
	root.Execute()
	for {
		haveWork, delay := l.Iterate()
		if !haveWork {
			break
		}
		clock.Advance(delay)
	}
	root.Release()
	fmt.Println("timers left:", l.Stats().Timers)
	// Output:
	// 0s CommError attempt 1
	// 100ms CommError attempt 2
	// 300ms got payload
	// timers left: 0
}

// A model root is prepared once and never run; each request runs a Clone
// of it, with the request's own state variables next to the model's.
func ExampleAsyncSteps_Clone() {
	l := vm.NewLoop()
	model := l.NewSteps()
	model.State().Set("greeting", "hello")
	model.Add(func(as vm.AsyncSteps, _ vm.Args) {
		g, _ := as.State().Get("greeting")
		u, _ := as.State().Get("user")
		as.Success(vm.Str(fmt.Sprint(g, " ", u)))
	})
	for _, user := range []string{"ann", "bob"} {
		req := model.Clone()
		req.State().Set("user", user)
		f := req.Promise()
		l.RunUntilIdle()
		args, err := f.Wait(context.Background())
		fmt.Println(args.String(0), err)
		req.Release()
	}
	fmt.Println("model has a user:", model.State().Exists("user"))
	model.Release()
	// Output:
	// hello ann <nil>
	// hello bob <nil>
	// model has a user: false
}

// A service runs its loop on a goroutine of its own and starts a flow per
// request from its handlers' goroutines: Post hands the loop the work, and
// the flow hands back its outcome on a channel with room for it, so the
// loop never waits for a handler. Once the requests are answered, Close
// stops Run.
func ExampleLoop_Run() {
	l := vm.NewLoop()
	stopped := make(chan error, 1)
	go func() { stopped <- l.Run(context.Background()) }()

	// lookup is what a request handler calls, on the handler's goroutine.
	lookup := func(id int) string {
		reply := make(chan string, 1)
		ok := l.Post(func() {
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					if id < 0 {
						as.Error("NotFound", fmt.Sprint("no user ", id))
					}
					as.Success(vm.Str(fmt.Sprint("user", id)))
				}).Add(func(as vm.AsyncSteps, args vm.Args) {
					reply <- "found " + args.String(0)
				})
			}, func(as vm.AsyncSteps, code string) {
				reply <- code + ": " + as.State().ErrorInfo()
				as.Success()
			})
		})
		if !ok {
			return "service stopped"
		}
		return <-reply
	}

	answers := make([]string, 3)
	var wg sync.WaitGroup
	for i, id := range []int{1, -2, 3} {
		wg.Go(func() { answers[i] = lookup(id) })
	}
	wg.Wait()
	l.Close()
	fmt.Println(strings.Join(answers, "\n"))
	fmt.Println("Run returned", <-stopped, "with", l.Stats().LiveRoots, "live roots")
	fmt.Println(lookup(4))
	// Output:
	// found user1
	// NotFound: no user -2
	// found user3
	// Run returned <nil> with 0 live roots
	// service stopped
}

// Await runs a blocking call on a goroutine of its own while the loop goes
// on with other flows; the step succeeds with the call's value, and a
// *Error it returns raises that error's code. The call runs after its step
// has returned; it may use the step's Args, a copy of the values. Run
// drives the loop until the flow's Future is done.
func ExampleAsyncSteps_Await() {
	l := vm.NewLoop()
	ctx, stop := context.WithCancel(context.Background())
	root := l.NewSteps()
	root.Await(func(context.Context) (vm.Value, error) {
		return vm.Str("ann"), nil // a database read, say
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		user := args.String(0)
		fmt.Println("read", user)
		as.Await(func(context.Context) (vm.Value, error) {
			return vm.Value{}, &vm.Error{Code: "NotFound", Info: "no orders for " + user}
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println(code+":", as.State().ErrorInfo())
			as.Success(vm.Int(0))
		})
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		fmt.Println("orders:", args.Int(0))
	})
	f := root.Promise()
	go func() { <-f.Done(); stop() }()
	l.Run(ctx)
	root.Release()
	// Output:
	// read ann
	// NotFound: no orders for ann
	// orders: 0
}

// ForEach and ForEachMap run a step per element, as a range statement
// would, and take Break and Continue as loops do. ForEachMap visits the
// keys in sorted order.
func ExampleForEach() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		vm.ForEach(as, []string{"a", "b", "stop", "c"}, func(as vm.AsyncSteps, i int, v string) {
			if v == "stop" {
				as.Break()
			}
			fmt.Println(i, v)
		})
		vm.ForEachMap(as, map[string]int{"y": 2, "x": 1, "z": 3}, func(as vm.AsyncSteps, k string, v int) {
			fmt.Println(k, v)
		})
	})
	root.Execute()
	l.RunUntilIdle()
	root.Release()
	// Output:
	// 0 a
	// 1 b
	// x 1
	// y 2
	// z 3
}

// SuccessStep adds a step that only passes values on, which is how a
// branch of steps is given a default outcome.
func ExampleAsyncSteps_SuccessStep() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		cached := false
		if cached {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str("from cache")) })
		} else {
			as.SuccessStep(vm.Str("default"), vm.Int(1))
		}
	}).Add(func(as vm.AsyncSteps, args vm.Args) {
		fmt.Println(args.String(0), args.Int(1))
	})
	root.Execute()
	l.RunUntilIdle()
	root.Release()
	// Output:
	// default 1
}

// Cancel stops a running root from outside its steps: the cancel handlers
// of the steps under way run, innermost first, no further step runs, and
// the flow's Future reports ErrCanceled.
func ExampleAsyncSteps_Cancel() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) { fmt.Println("outer step canceled") })
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { fmt.Println("inner step canceled") })
			fmt.Println("waiting")
		})
	}).Add(func(vm.AsyncSteps, vm.Args) {
		fmt.Println("never runs")
	})
	f := root.Promise()
	l.RunUntilIdle()
	root.Cancel()
	l.RunUntilIdle()
	_, err := f.Wait(context.Background())
	fmt.Println(errors.Is(err, vm.ErrCanceled))
	root.Release()
	// Output:
	// waiting
	// inner step canceled
	// outer step canceled
	// true
}
