package vm_test

import (
	"fmt"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// Two flows share a Mutex: the second waits until the first leaves. The
// section receives the values of the step before it and passes its own on.
func ExampleMutex() {
	l := vm.NewLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	for _, name := range []string{"A", "B"} {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str(name)) })
		root.Sync(m, func(as vm.AsyncSteps, args vm.Args) {
			who := args.String(0)
			fmt.Println(who, "enters")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				fmt.Println(who, "leaves")
				as.Success(vm.Str(who + " is done"))
			})
		})
		root.Add(func(as vm.AsyncSteps, args vm.Args) { fmt.Println(args.String(0)) })
		root.Execute()
	}
	l.RunUntilIdle()
	// Output:
	// A enters
	// A leaves
	// B enters
	// A is done
	// B leaves
	// B is done
}

// A Throttle of two entries per second admits the flows that wait as
// seconds pass.
func ExampleThrottle() {
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	th := vm.NewThrottle(l, 2, time.Second, vm.Unbounded)
	for i := range 5 {
		root := l.NewSteps()
		root.Sync(th, func(vm.AsyncSteps, vm.Args) {
			fmt.Printf("flow %d enters at %ds\n", i, clk.Now().Unix())
		})
		root.Execute()
	}
	for range 3 {
		l.RunUntilIdle()
		clk.Advance(time.Second)
	}
	// Output:
	// flow 0 enters at 0s
	// flow 1 enters at 0s
	// flow 2 enters at 1s
	// flow 3 enters at 1s
	// flow 4 enters at 2s
}

// A Limiter with one flow inside and one waiting turns a third flow away.
func ExampleLimiter() {
	clk := vm.NewManualClock(time.Unix(0, 0))
	l := vm.NewLoop(vm.WithClock(clk))
	lim := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: 1, Rate: 10})
	for _, name := range []string{"A", "B", "C"} {
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Sync(lim, func(as vm.AsyncSteps, _ vm.Args) {
				fmt.Println(name, "enters")
				as.Add(func(vm.AsyncSteps, vm.Args) { fmt.Println(name, "leaves") })
			})
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println(name, "fails:", code, as.State().ErrorInfo())
		})
		root.Execute()
	}
	l.RunUntilIdle()
	// Output:
	// A enters
	// C fails: DefenseRejected Mutex queue limit
	// A leaves
	// B enters
	// B leaves
}
