package vm_test

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Random flows through Mutex, Throttle and Limiter sections, nested and in
// parallel branches, that end every way a step can (success, error, panic,
// Break, timeout, Resumer, late calls through stale handles, spawned
// roots) while cancel handlers and Stack destroy callbacks cancel and
// release other roots, cycles included, and the test cancels and releases
// roots between passes. Every flow completes, no section ever holds more
// than its limit, and the primitives and the loop end empty.
func TestSyncRandomTeardown(t *testing.T) { sySeeds(t, 5000, syncChaos) }

func syncChaos(t *testing.T, seed uint64) {
	l, clk := syLoop()
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	const mmax = 2
	m := vm.NewMutex(mmax, 3)
	th := vm.NewThrottle(l, 2, 10*time.Millisecond, 3)
	lm := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 2, MaxQueue: 2, Rate: 3, Period: 10 * time.Millisecond, Burst: 2})
	prims := []vm.ISync{m, th, lm}
	insideM, insideL := 0, 0
	const n = 12
	roots := make([]vm.AsyncSteps, n)
	released := make([]bool, n)
	futs := make([]*vm.Future, n)
	var section func(depth int, prim int) vm.ExecFunc
	section = func(depth int, prim int) vm.ExecFunc {
		kind := rng.IntN(14)
		other := rng.IntN(n)
		return func(as vm.AsyncSteps, _ vm.Args) {
			if prim == 0 && depth == 0 {
				insideM++
				if insideM > mmax {
					t.Errorf("%d flows inside the mutex", insideM)
				}
				as.StackRaw(8, func(unsafe.Pointer) { insideM-- })
			}
			if prim == 2 && depth == 0 {
				insideL++
				if insideL > 2 {
					t.Errorf("%d flows inside the limiter", insideL)
				}
				as.StackRaw(8, func(unsafe.Pointer) { insideL-- })
			}
			switch kind {
			case 0:
			case 1:
				lp := as.Tool()
				h := lp.Deferred(time.Duration(rng.IntN(15))*time.Millisecond, func() { as.Success() })
				as.SetCancel(func(vm.AsyncSteps) { lp.Cancel(h) })
			case 2:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") })
			case 3:
				as.Add(func(vm.AsyncSteps, vm.Args) { panic("p") })
			case 4:
				if depth < 2 {
					as.Sync(prims[prim], section(depth+1, prim))
				}
			case 5:
				if depth < 2 {
					p := as.Parallel(func(as vm.AsyncSteps, code string) {})
					for b := 0; b < 1+rng.IntN(3); b++ {
						q := rng.IntN(3)
						p.Sync(prims[q], section(depth+1, q))
					}
				}
			case 6:
				as.Repeat(3, func(as vm.AsyncSteps, i int) {
					if i == 1 {
						as.Break()
					}
				})
			case 7:
				as.SetTimeout(time.Duration(rng.IntN(10)) * time.Millisecond)
			case 8:
				as.SetCancel(func(vm.AsyncSteps) {
					if !released[other] && roots[other].Valid() {
						if rng.IntN(2) == 0 {
							roots[other].Cancel()
						} else {
							roots[other].Release()
							released[other] = true
						}
					}
				})
				as.WaitExternal()
			case 9:
				res := as.Resumer()
				as.Tool().Deferred(time.Duration(rng.IntN(8))*time.Millisecond, func() { res.Success(vm.Int(1)) })
			case 10:
				stale := as
				as.Tool().Deferred(time.Duration(rng.IntN(8))*time.Millisecond, func() {
					stale.Success()
					stale.Error("Late")
				})
			case 11:
				as.StackRaw(8, func(unsafe.Pointer) {
					if !released[other] && roots[other].Valid() {
						roots[other].Cancel()
					}
				})
			case 12:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
					if depth < 2 {
						as.Sync(prims[prim], section(depth+1, prim))
					}
				})
			case 13:
				as.Tool().Spawn(func(as vm.AsyncSteps, _ vm.Args) {
					q := rng.IntN(3)
					as.Sync(prims[q], func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							if rng.IntN(2) == 0 {
								as.Error("S")
							}
						})
					})
				})
			}
		}
	}
	for i := range roots {
		r := l.NewSteps()
		roots[i] = r
		steps := 1 + rng.IntN(3)
		for range steps {
			prim := rng.IntN(3)
			if rng.IntN(5) == 0 {
				r.Add(func(as vm.AsyncSteps, _ vm.Args) {
					var outer vm.AsyncSteps = as
					as.Sync(prims[prim], section(0, prim))
					as.Tool().Deferred(time.Duration(rng.IntN(8))*time.Millisecond, func() {
						outer.Error("Outer")
					})
				}, func(as vm.AsyncSteps, code string) {})
			} else if rng.IntN(3) == 0 {
				p := r.Parallel(func(as vm.AsyncSteps, code string) {})
				for b := 0; b < 2; b++ {
					q := rng.IntN(3)
					p.Sync(prims[q], section(0, q))
				}
			} else {
				r.Sync(prims[prim], section(0, prim), func(as vm.AsyncSteps, code string) {})
			}
		}
		futs[i] = r.Promise()
	}
	for step := 0; step < 40; step++ {
		l.RunUntilIdle()
		switch k := rng.IntN(6); k {
		case 0:
			i := rng.IntN(n)
			if !released[i] {
				roots[i].Cancel()
			}
		case 1:
			i := rng.IntN(n)
			if !released[i] {
				roots[i].Release()
				released[i] = true
			}
		}
		clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
	for i := range roots {
		if !released[i] {
			roots[i].Release()
			released[i] = true
		}
	}
	for range 10 {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	for i, f := range futs {
		select {
		case <-f.Done():
		default:
			t.Errorf("flow %d never completed", i)
		}
	}
	if insideM != 0 || insideL != 0 {
		t.Errorf("%d flows left inside the mutex, %d inside the limiter", insideM, insideL)
	}
	syStats(t, "mutex", m.Stats(), 0, 0)
	syStats(t, "throttle", th.Stats(), 0, 0)
	c, rt := lm.Stats()
	syStats(t, "lim c", c, 0, 0)
	syStats(t, "lim r", rt, 0, 0)
	if s := l.Stats(); s.RunningRoots != 0 || s.ArenaInUse != 0 || s.Timers != 0 || s.Queued != 0 || s.LiveRoots != 0 {
		t.Errorf("loop not idle: %+v", s)
	}
	if k := vm.CallbacksInUse(l); k != 0 {
		t.Errorf("%d callbacks in use", k)
	}
}
