package vm_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// spawnBaseline fails t unless l is clean and holds no live root.
func spawnBaseline(t *testing.T, l *vm.Loop) {
	t.Helper()
	semClean(t, l)
	if s := l.Stats(); s.LiveRoots != 0 {
		t.Fatalf("live roots left: %+v", s)
	}
}

// Spawn from every kind of callback: the spawned flow runs, and every
// root goes back.
func TestSpawnFromCallbacks(t *testing.T) {
	for _, where := range []string{"step", "error handler", "cancel handler", "destroy callback", "Immediate", "Post", "Deferred", "timeout handler", "end hook", "release hook"} {
		t.Run(where, func(t *testing.T) {
			l, clk := semLoop()
			var log semLog
			spawned := func() {
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("spawned ran")
					as.Add(log.step("spawned sub"))
				})
			}
			switch where {
			case "step":
				l.Spawn(func(vm.AsyncSteps, vm.Args) { spawned() })
			case "error handler":
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(vm.AsyncSteps, string) { spawned() })
			case "cancel handler":
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { spawned() })
					as.SetTimeout(time.Millisecond)
				})
			case "destroy callback":
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.StackRaw(8, func(unsafe.Pointer) { spawned() }) })
			case "Immediate":
				l.Immediate(spawned)
			case "Post":
				l.Post(spawned)
			case "Deferred":
				l.Deferred(time.Millisecond, spawned)
			case "timeout handler":
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) }, func(vm.AsyncSteps, string) { spawned() })
			case "end hook":
				vm.SetNativeRootHooks(nil, func(vm.AsyncSteps, string) { spawned() })
				defer vm.SetNativeRootHooks(nil, nil)
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) { vm.SetNativeRootValue(vm.RootOf(as), 1) })
			case "release hook":
				once := false
				vm.SetNativeRootHooks(func(vm.AsyncSteps) {
					if !once {
						once = true
						spawned()
					}
				}, nil)
				defer vm.SetNativeRootHooks(nil, nil)
				l.Spawn(func(vm.AsyncSteps, vm.Args) {})
			}
			l.RunUntilIdle()
			clk.Advance(time.Millisecond)
			l.RunUntilIdle()
			semExpect(t, &log, "spawned ran", "spawned sub")
			spawnBaseline(t, l)
			if s := l.Stats(); s.PooledRoots < 1 {
				t.Fatalf("no root pooled: %+v", s)
			}
			semNextRootWorks(t, l)
		})
	}
}

// A spawned flow releases or cancels its root from each place its code
// runs, then spawns a flow that takes that root from the pool at once,
// and goes on through its stale handle: the new flow is not touched.
func TestSpawnReuseFromEachPlace(t *testing.T) {
	for _, from := range []string{"step", "error handler", "cancel handler", "timeout handler", "loop body", "branch", "sub-step"} {
		for _, how := range []string{"Cancel", "Release"} {
			t.Run(from+"/"+how, func(t *testing.T) {
				l, clk := semLoop()
				var log semLog
				var res vm.Resumer
				var kept vm.AsyncSteps
				act := func(as vm.AsyncSteps) {
					root := vm.RootOf(as)
					if !root.Valid() {
						root = kept
					}
					if how == "Cancel" {
						root.Cancel()
					} else {
						root.Release()
					}
					l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
						res = as.Resumer()
						as.SetTimeout(time.Second)
						as.SetCancel(func(vm.AsyncSteps) { log.add("second canceled") })
					}, func(as vm.AsyncSteps, code string) { log.add("second handler %s", code) })
					for _, op := range []func(){
						func() { as.Success(vm.Int(1)) },
						func() { as.Error("Stale") },
						func() { as.Add(func(vm.AsyncSteps, vm.Args) {}) },
						func() { as.SetTimeout(time.Millisecond) },
						func() { as.SetCancel(func(vm.AsyncSteps) {}) },
						func() { as.Resumer().Success() },
						func() { as.Parallel().Add(func(vm.AsyncSteps, vm.Args) {}) },
						func() { as.StackRaw(8, func(unsafe.Pointer) {}) },
						func() { as.State().Set("k", 1) },
						func() { vm.RootOf(as).Release() },
						func() { kept.Release() },
						func() { kept.Cancel() },
						func() { kept.Execute() },
					} {
						func() {
							defer func() { recover() }()
							op()
						}()
					}
					log.add("first goes on")
				}
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
					kept = vm.RootOf(as)
					switch from {
					case "step":
						act(as)
					case "error handler":
						as.Error("E")
					case "cancel handler":
						as.SetCancel(act)
					case "timeout handler":
						as.SetTimeout(time.Millisecond)
					case "loop body":
						as.Loop(func(as vm.AsyncSteps) { act(as) })
					case "branch":
						p := as.Parallel()
						p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetCancel(func(vm.AsyncSteps) {}) })
						p.Add(func(as vm.AsyncSteps, _ vm.Args) { act(as) })
					case "sub-step":
						as.SetCancel(func(vm.AsyncSteps) { log.add("outer canceled") })
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { act(as) })
					}
				}, func(as vm.AsyncSteps, code string) {
					if from == "error handler" || from == "timeout handler" {
						act(as)
					}
				})
				l.RunUntilIdle()
				if from == "cancel handler" {
					kept.Cancel()
				}
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
				if s := l.Stats(); s.RunningRoots != 1 || s.LiveRoots != 1 || s.Timers != 1 {
					t.Fatalf("second flow waiting: %+v %q", s, log.lines)
				}
				if !res.Success(vm.Int(5)) {
					t.Fatal("the second flow's Resumer was refused")
				}
				l.RunUntilIdle()
				clk.Advance(time.Hour)
				l.RunUntilIdle()
				goes := 0
				for _, line := range log.lines {
					if line == "first goes on" {
						goes++
					} else if line != "outer canceled" {
						t.Fatalf("trace %q", log.lines)
					}
				}
				if goes != 1 {
					t.Fatalf("trace %q", log.lines)
				}
				spawnBaseline(t, l)
				semNextRootWorks(t, l)
			})
		}
	}
}

// A destroy callback of a spawned flow's last step releases (or cancels)
// its root, which must wait for a later turn; the flow's end releases the
// root first, and a Spawn queued before that later turn takes it from the
// pool: the put-off release leaves the new flow alone.
func TestSpawnDestroyCallbackReleaseThenReuse(t *testing.T) {
	for _, how := range []string{"Cancel", "Release"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			var res vm.Resumer
			second := func() {
				l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("second runs")
					res = as.Resumer()
					as.WaitExternal()
					as.SetCancel(func(vm.AsyncSteps) { log.add("second canceled") })
				})
			}
			l.Immediate(func() { l.Immediate(second) })
			l.Spawn(func(as vm.AsyncSteps, _ vm.Args) {
				root := vm.RootOf(as)
				as.StackRaw(8, func(unsafe.Pointer) {
					if how == "Cancel" {
						root.Cancel()
					} else {
						root.Release()
					}
				})
			})
			l.RunUntilIdle()
			semExpect(t, &log, "second runs")
			if s := l.Stats(); s.RunningRoots != 1 || s.LiveRoots != 1 || s.PooledRoots != 0 {
				t.Fatalf("second flow waiting: %+v", s)
			}
			res.Success()
			l.RunUntilIdle()
			semExpect(t, &log, "second runs")
			spawnBaseline(t, l)
		})
	}
}

// Spawned flows end every way, from every place, while the handles of
// earlier flows (on roots the pool hands out again) are used at random:
// each spawned root is released exactly once (its release hook counts
// it), and every counter returns to its baseline.
func TestSpawnRandomReleasedOnce(t *testing.T) {
	type tag struct{ id int }
	released := map[int]int{}
	ended := map[int]int{}
	vm.SetNativeRootHooks(func(root vm.AsyncSteps) {
		if v, ok := vm.NativeRootValue(root).(*tag); ok && v.id != 0 {
			released[v.id]++
			v.id = 0
		}
	}, func(root vm.AsyncSteps, code string) {
		if v, ok := vm.NativeRootValue(root).(*tag); ok {
			ended[v.id]++
		}
	})
	defer vm.SetNativeRootHooks(nil, nil)
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	l := vm.NewLoop(vm.WithClock(clk), vm.WithRootPool(4))
	seed := uint64(7)
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int((seed >> 33) % uint64(n))
	}
	var stale []vm.AsyncSteps
	var resumers []vm.Resumer
	poke := func() {
		if len(stale) == 0 {
			return
		}
		as := stale[rnd(len(stale))]
		defer func() {
			if p := recover(); p != nil {
				if _, misuse := p.(*vm.Error); !misuse {
					panic(p) // an unwinding, which the VM must see
				}
			}
		}()
		switch rnd(8) {
		case 0:
			as.Success()
		case 1:
			vm.RootOf(as).Release()
		case 2:
			vm.RootOf(as).Cancel()
		case 3:
			as.Release()
		case 4:
			as.Cancel()
		case 5:
			as.Add(func(vm.AsyncSteps, vm.Args) {})
		case 6:
			as.Execute()
		case 7:
			as.State()
		}
	}
	spawns := 0
	var body func(depth int) vm.ExecFunc
	spawn := func(depth int) {
		spawns++
		id := spawns
		l.Spawn(func(as vm.AsyncSteps, a vm.Args) {
			vm.SetNativeRootValue(vm.RootOf(as), &tag{id})
			stale = append(stale, as, vm.RootOf(as))
			body(depth)(as, a)
		}, func(as vm.AsyncSteps, code string) {
			if rnd(4) == 0 {
				poke()
			}
		})
	}
	act := func(as vm.AsyncSteps, depth int) {
		switch rnd(6) {
		case 0:
			vm.RootOf(as).Release()
		case 1:
			vm.RootOf(as).Cancel()
		case 2:
			poke()
		case 3:
			if depth < 3 {
				spawn(depth + 1)
			}
		}
	}
	body = func(depth int) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) {
			switch rnd(9) {
			case 0:
				act(as, depth)
				as.Error("E")
			case 1:
				as.SetCancel(func(as vm.AsyncSteps) { act(as, depth) })
				as.SetTimeout(time.Duration(rnd(3)) * time.Millisecond)
			case 2:
				as.StackRaw(8, func(unsafe.Pointer) { act(as, depth) })
				act(as, depth)
			case 3:
				as.SetCancel(func(vm.AsyncSteps) {})
				resumers = append(resumers, as.Resumer())
			case 4:
				p := as.Parallel(func(as vm.AsyncSteps, code string) { act(as, depth) })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { act(as, depth); as.Error("B") })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.StackRaw(8, func(unsafe.Pointer) { act(as, depth) })
					as.SetCancel(func(as vm.AsyncSteps) { act(as, depth) })
					as.SetTimeout(time.Hour)
				})
			case 5:
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Inner") }, func(as vm.AsyncSteps, code string) {
					act(as, depth)
				})
			case 6:
				as.Repeat(3, func(as vm.AsyncSteps, i int) { act(as, depth) })
			case 7:
				l.Immediate(func() { act(as, depth); poke() })
				as.SetTimeout(time.Millisecond)
			case 8:
				act(as, depth)
				panic("boom")
			}
		}
	}
	for i := 0; i < 4000; i++ {
		spawn(0)
		if rnd(5) == 0 {
			l.RunUntilIdle()
			poke()
			for _, r := range resumers {
				if rnd(2) == 0 {
					r.Success()
				} else {
					r.Error("R", "")
				}
			}
			resumers = resumers[:0]
			clk.Advance(time.Millisecond)
			l.RunUntilIdle()
		}
		if len(stale) > 200 {
			stale = stale[100:]
		}
	}
	for i := 0; i < 5; i++ {
		l.RunUntilIdle()
		for _, r := range resumers {
			r.Success()
		}
		resumers = resumers[:0]
		clk.Advance(time.Hour)
		l.RunUntilIdle()
	}
	stale = nil
	for id := 1; id <= spawns; id++ {
		if released[id] != 1 {
			t.Fatalf("spawned flow %d released %d times (of %d)", id, released[id], spawns)
		}
		if ended[id] > 1 {
			t.Fatalf("spawned flow %d ended %d times", id, ended[id])
		}
	}
	s := l.Stats()
	if s.ArenaInUse != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.LiveRoots != 0 || s.Queued != 0 ||
		vm.CallbacksInUse(l) != 0 || vm.ResumersInUse(l) != 0 || s.PooledRoots != 4 {
		t.Fatalf("after %d spawned flows: %+v callbacks %d resumers %d", spawns, s, vm.CallbacksInUse(l), vm.ResumersInUse(l))
	}
}

// Other goroutines post Spawns while Run drives the loop and a spawned
// flow closes it: Run returns, the Posts accepted before the Close still
// run when the loop is iterated by hand, the later ones are refused, and
// every spawned root goes back.
func TestSpawnPostedWhileClosing(t *testing.T) {
	l := vm.NewLoop(vm.WithRootPool(16))
	var ran atomic.Int64
	var accepted atomic.Int64
	flow := func(as vm.AsyncSteps, _ vm.Args) {
		ran.Add(1)
		if ran.Load() == 500 {
			as.Tool().Close()
			as.Tool().Spawn(func(as vm.AsyncSteps, _ vm.Args) { as.Add(func(vm.AsyncSteps, vm.Args) { ran.Add(1) }) })
			accepted.Add(1)
		}
		as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Repeat(2, func(vm.AsyncSteps, int) {}) })
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if l.Post(func() { l.Spawn(flow) }) {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err := semAwait(t, done, "Run after Close"); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	l.RunUntilIdle()
	if ran.Load() != accepted.Load() {
		t.Fatalf("%d spawned flows ran, %d accepted", ran.Load(), accepted.Load())
	}
	spawnBaseline(t, l)
}
