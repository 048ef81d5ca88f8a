package vm_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// semGen builds random flows: nested steps, parallels, loops, waits,
// timeouts, errors, panics, misuse, Break and Continue, cancel handlers and
// stack memory, all decided by one seeded generator. Every decision is
// taken on the loop goroutine in a deterministic order, so a seed replays
// exactly.
type semGen struct {
	rng      *rand.Rand
	l        *vm.Loop
	lateRuns int         // steps that ran after their flow completed
	cancels  map[int]int // cancel handler id -> calls
	nextID   int
	roots    []vm.AsyncSteps // flows a step may cancel
}

func (g *semGen) n(k int) int { return g.rng.IntN(k) }

// fill adds 1..3 steps to as.
func (g *semGen) fill(as vm.AsyncSteps, depth int) {
	for range 1 + g.n(3) {
		g.addOne(as, depth)
	}
}

func (g *semGen) handler() vm.ErrorFunc {
	if g.n(2) == 0 {
		return nil
	}
	return func(as vm.AsyncSteps, code string) {
		switch g.n(6) {
		case 0:
			as.Success(vm.Str(code))
		case 1:
			as.Error("Handler" + code[:min(len(code), 3)])
		case 2:
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {})
		case 3:
			panic("handler panic")
		case 4:
			as.Break()
		case 5:
			if g.n(2) == 0 {
				as.Continue("L")
			}
		default: // return: unwinding goes on
		}
	}
}

func (g *semGen) addOne(as vm.AsyncSteps, depth int) {
	leaf := depth >= 4
	switch k := g.n(10); {
	case k < 6 || leaf:
		as.Add(g.step(depth), g.handler())
	case k < 8:
		p := as.Parallel(g.handler())
		for range g.n(4) {
			p.Add(g.step(depth+1), g.handler())
		}
		if g.n(3) == 0 {
			p.Repeat(g.n(3), func(as vm.AsyncSteps, i int) { g.body(as, depth+1) })
		}
	case k < 9:
		as.Repeat(g.n(4), func(as vm.AsyncSteps, i int) { g.body(as, depth+1) }, "R")
	default:
		iters := 0
		max := 1 + g.n(3)
		as.Loop(func(as vm.AsyncSteps) {
			iters++
			if iters > max {
				as.Break()
			}
			g.body(as, depth+1)
		}, "L")
	}
}

func (g *semGen) step(depth int) vm.ExecFunc {
	return func(as vm.AsyncSteps, _ vm.Args) { g.body(as, depth) }
}

// body is what a step or an iteration does.
func (g *semGen) body(as vm.AsyncSteps, depth int) {
	if v, ok := as.State().Get("future"); ok {
		select {
		case <-v.(*vm.Future).Done():
			g.lateRuns++
		default:
		}
	}
	if g.n(4) == 0 {
		as.StackRaw(16, func(unsafe.Pointer) {})
	}
	if g.n(5) == 0 {
		id := g.nextID
		g.nextID++
		as.SetCancel(func(vm.AsyncSteps) { g.cancels[id]++ })
		// A cancel handler disables implicit success: bound the wait.
		as.SetTimeout(time.Duration(1+g.n(20)) * time.Millisecond)
	}
	switch g.n(17) {
	case 0, 1:
		as.Success(vm.Int(int64(depth)))
	case 2:
		as.Error(fmt.Sprintf("E%d", depth), "random")
	case 3, 4, 5:
		if depth < 4 {
			g.fill(as, depth+1)
		}
	case 6:
		as.SetTimeout(time.Duration(1+g.n(20)) * time.Millisecond)
	case 7:
		as.WaitExternal()
		d := time.Duration(g.n(15)) * time.Millisecond
		as.Tool().Deferred(d, func() { as.Success() })
	case 8:
		as.WaitExternal()
		as.Tool().Immediate(func() { as.Error("Ext") })
	case 9:
		panic("step panic")
	case 10:
		as.Break("L")
	case 11:
		as.Continue()
	case 12:
		as.Success()
		as.Success() // misuse
	case 13:
		if len(g.roots) > 0 {
			g.roots[g.n(len(g.roots))].Cancel() // maybe its own flow
		}
	case 14:
		as.Continue("R")
	case 15:
		if depth < 4 {
			as.Tool().Spawn(g.step(depth+1), g.handler())
		}
	default: // implicit success
	}
}

// Random flows never let a panic out of the loop, never run a step after
// their flow completed, run each cancel handler at most once, and leave
// nothing in use once every flow has ended.
func TestSemRandomFlows(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		l, clk := semLoop()
		g := &semGen{rng: rand.New(rand.NewPCG(uint64(seed), 42)), l: l, cancels: map[int]int{}}
		const flows = 8
		roots := make([]vm.AsyncSteps, flows)
		futures := make([]*vm.Future, flows)
		for i := range flows {
			roots[i] = l.NewSteps()
			g.fill(roots[i], 0)
			futures[i] = roots[i].Promise()
			// Steps find their flow's Future in the state they share.
			roots[i].State().Set("future", futures[i])
		}
		g.roots = roots
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("seed %d: panic escaped the loop: %v", seed, p)
				}
			}()
			l.RunUntilIdle()
			for range 30 {
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
			}
			for i, r := range roots {
				switch i % 3 {
				case 0:
					r.Cancel()
				case 1:
					r.Release()
				}
			}
			// The others end by themselves: waits may chain, each armed
			// when the previous one ends.
			for range 5000 {
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
			}
		}()
		for i, f := range futures {
			select {
			case <-f.Done():
			default:
				t.Fatalf("seed %d: flow %d never completed", seed, i)
			}
		}
		if g.lateRuns != 0 {
			t.Fatalf("seed %d: %d steps ran after their flow completed", seed, g.lateRuns)
		}
		for id, n := range g.cancels {
			if n > 1 {
				t.Fatalf("seed %d: cancel handler %d ran %d times", seed, id, n)
			}
		}
		if st := l.Stats(); st.ArenaInUse != 0 || st.RunningRoots != 0 || st.Timers != 0 || st.Queued != 0 {
			t.Fatalf("seed %d: after every flow ended: %+v", seed, st)
		}
	}
}
