package vm_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Resource bounds at scale: flows nested far deeper, spread far wider and
// running far longer than the other tests make them. Nothing the VM does
// may recurse on the Go stack per level, go quadratic, or keep a table,
// a counter or heap memory that grows with the iterations of a flow.

// semNest returns a step that adds itself as its sub-step until depth
// levels run, calling each(as, level) at every level and leaf(as) at the
// innermost instead of adding.
func semNest(depth int, each func(as vm.AsyncSteps, level int), leaf func(as vm.AsyncSteps)) vm.ExecFunc {
	var nest func(level int) vm.ExecFunc
	nest = func(level int) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) {
			each(as, level)
			if level == depth {
				leaf(as)
				return
			}
			as.Add(nest(level + 1))
		}
	}
	return nest(1)
}

// A flow 100,000 steps deep, each with a cancel handler and Stack memory
// with a destroy callback, ends by success, by an error the outermost
// handler catches, by Cancel, by a timeout of the outermost step and by
// Release: every cancel handler and destroy callback runs once, and the
// loop is left clean.
func TestSemScaleDeepEnds(t *testing.T) {
	depth := 100_000
	if raceEnabled || testing.Short() {
		depth = 10_000
	}
	for _, how := range []string{"success", "error", "cancel", "timeout", "release"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			cancels, destroys, handled := 0, 0, 0
			each := func(as vm.AsyncSteps, level int) {
				as.SetCancel(func(vm.AsyncSteps) { cancels++ })
				as.StackRaw(8, func(unsafe.Pointer) { destroys++ })
				_ = vm.Stack[[2]int64](as)
				if level == 1 && how == "timeout" {
					as.SetTimeout(time.Millisecond)
				}
			}
			leaf := func(as vm.AsyncSteps) {
				switch how {
				case "success":
					as.Success(vm.Int(1))
				case "error":
					as.Error("Bottom")
				default:
					as.WaitExternal()
				}
			}
			root.Add(semNest(depth, each, leaf), func(as vm.AsyncSteps, code string) {
				handled++
				if code == "Bottom" {
					as.Success(vm.Int(2))
				}
			})
			f := semUnwind(l, clk, root, how)
			if how == "release" {
				root.Release()
				l.RunUntilIdle()
			}
			args, err := semResult(t, f)
			wantCancels, wantHandled := depth, 0
			switch how {
			case "success":
				if err != nil || args.Int(0) != 1 {
					t.Fatalf("flow ended with %v, %v", args.Values(), err)
				}
				wantCancels = 0
			case "error":
				if err != nil || args.Int(0) != 2 {
					t.Fatalf("flow ended with %v, %v", args.Values(), err)
				}
				wantHandled = 1
			case "timeout":
				if !errors.Is(err, vm.ErrTimeout) {
					t.Fatalf("flow ended with %v", err)
				}
				wantHandled = 1
			default:
				if !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("flow ended with %v", err)
				}
			}
			if cancels != wantCancels || destroys != depth || handled != wantHandled {
				t.Fatalf("cancel handlers %d (want %d), destroy callbacks %d (want %d), error handler %d (want %d)",
					cancels, wantCancels, destroys, depth, handled, wantHandled)
			}
			if how != "release" {
				root.Release()
			}
			semClean(t, l)
		})
	}
}

// Parallel steps nested 1,000 deep (each with a waiting sibling that has a
// cancel handler) end by success, by an error at the innermost level, by
// Cancel, Release, a timeout of the outermost step and an unlabelled Break
// out to a loop around them all; loops nested 1,000 deep end by a Break
// and a Continue labelled with the outermost one.
func TestSemScaleNestedParallelsAndLoops(t *testing.T) {
	const depth = 1000
	for _, how := range []string{"success", "error", "cancel", "release", "timeout", "break"} {
		t.Run("parallel "+how, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			cancels := 0
			var nest func(level int) vm.ExecFunc
			nest = func(level int) vm.ExecFunc {
				return func(as vm.AsyncSteps, _ vm.Args) {
					if level == 1 && how == "timeout" {
						as.SetTimeout(time.Millisecond)
					}
					if level == depth {
						switch how {
						case "success":
						case "error":
							as.Error("Bottom")
						case "break":
							as.Break()
						default:
							as.SetCancel(func(vm.AsyncSteps) { cancels++ })
						}
						return
					}
					p := as.Parallel()
					p.Add(nest(level + 1))
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						if how != "success" {
							as.SetCancel(func(vm.AsyncSteps) { cancels++ })
						}
					})
				}
			}
			if how == "break" {
				root.Loop(func(as vm.AsyncSteps) { as.Add(nest(1)) })
			} else {
				root.Add(nest(1))
			}
			f := root.Promise()
			l.RunUntilIdle()
			switch how {
			case "cancel":
				root.Cancel()
			case "release":
				root.Release()
			case "timeout":
				clk.Advance(time.Millisecond)
			}
			l.RunUntilIdle()
			_, err := semResult(t, f)
			// The sibling of the innermost parallel has not run when
			// its other branch errs or breaks: it had no cancel handler.
			want := map[string]int{"success": 0, "error": depth - 2, "break": depth - 2}
			w, ok := want[how]
			if !ok {
				w = depth
			}
			if (how == "success" || how == "break") != (err == nil) || cancels != w {
				t.Fatalf("flow ended with %v after %d cancel handlers, want %d", err, cancels, w)
			}
			if how != "release" {
				root.Release()
			}
			semClean(t, l)
		})
	}
	for _, how := range []string{"Break", "Continue"} {
		t.Run("loops "+how, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			cancels, iters := 0, 0
			var nest func(level int) func(vm.AsyncSteps)
			nest = func(level int) func(vm.AsyncSteps) {
				return func(as vm.AsyncSteps) {
					if level == 1 {
						if iters++; iters == 3 {
							as.Break()
						}
					}
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { cancels++ })
						switch {
						case level < depth:
							as.Loop(nest(level + 1))
						case how == "Break":
							as.Break("outer")
						default:
							as.Continue("outer")
						}
					})
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Never") })
				}
			}
			root.Loop(nest(1), "outer")
			f := root.Promise()
			l.RunUntilIdle()
			semOK(t, f)
			wantIters, wantCancels := 1, depth
			if how == "Continue" {
				wantIters, wantCancels = 3, 2*depth
			}
			if iters != wantIters || cancels != wantCancels {
				t.Fatalf("%d outer iterations, %d cancel handlers; want %d, %d", iters, cancels, wantIters, wantCancels)
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// A model whose level 0 holds parallel steps nested 100,000 deep, none
// started, is cloned, and both roots are released: the queues are copied
// and freed however deep they nest.
func TestSemScaleQueuedNestedParallels(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	p := root.Parallel()
	for range 100_000 {
		p = p.Parallel()
	}
	ran := false
	p.Add(func(vm.AsyncSteps, vm.Args) { ran = true })
	c := root.Clone()
	root.Release()
	f := c.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if !ran {
		t.Fatal("the innermost branch of the clone did not run")
	}
	c.Release()
	semClean(t, l)
}

// 100,000 roots wait at once, each in a step with a cancel handler and
// Stack memory, and are then completed, canceled, timed out or released:
// every Future settles and the loop is left clean.
func TestSemScaleManyWaitingRoots(t *testing.T) {
	flows := 100_000
	if raceEnabled || testing.Short() {
		flows = 10_000
	}
	for _, how := range []string{"success", "cancel", "timeout", "release"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			roots := make([]vm.AsyncSteps, flows)
			fs := make([]*vm.Future, flows)
			res := make([]vm.Resumer, flows)
			for i := range roots {
				roots[i] = l.NewSteps()
				roots[i].Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) {})
					_ = vm.Stack[int64](as)
					res[i] = as.Resumer()
					if how == "timeout" {
						as.SetTimeout(time.Duration(1+i%5) * time.Millisecond)
					}
				})
				fs[i] = roots[i].Promise()
			}
			l.RunUntilIdle()
			if s := l.Stats(); s.RunningRoots != int64(flows) {
				t.Fatalf("%d roots run, want %d", s.RunningRoots, flows)
			}
			for i, r := range roots {
				switch how {
				case "success":
					res[i].Success(vm.Int(int64(i)))
				case "cancel":
					r.Cancel()
				case "release":
					r.Release()
				}
			}
			clk.Advance(5 * time.Millisecond)
			l.RunUntilIdle()
			for i, f := range fs {
				args, err := semResult(t, f)
				if (how == "success") != (err == nil) || how == "success" && args.Int(0) != int64(i) {
					t.Fatalf("flow %d ended with %v, %v", i, args.Values(), err)
				}
			}
			if how != "release" {
				for _, r := range roots {
					r.Release()
				}
			}
			semClean(t, l)
			if n := vm.ResumersInUse(l); n != 0 {
				t.Fatalf("%d Resumer slots in use", n)
			}
		})
	}
}

// semScaleSnap is what a long-running flow must keep flat.
type semScaleSnap struct {
	stats  vm.LoopStats
	tables [6]int
	slots  int
	cbs    int
	stack  int
	heap   uint64
}

func semScaleTake(l *vm.Loop, root vm.AsyncSteps) semScaleSnap {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return semScaleSnap{l.Stats(), vm.TableSizes(l), vm.SlotsInUse(root), vm.CallbacksInUse(l),
		len(root.State().AsyncStack()), ms.HeapAlloc}
}

// One flow loops 1,000,000 times, each iteration using one feature: what
// it holds after the first 1,000 iterations it holds after the last (arena
// bytes, Stats, the loop's tables, the root's slots, AsyncStack), and the
// Go heap has not grown by more than a small constant.
func TestSemScaleLongFlowStaysFlat(t *testing.T) {
	iters := 1_000_000
	if raceEnabled || testing.Short() {
		iters = 100_000
	}
	m := vm.NewMutex(1, vm.Unbounded)
	features := []struct {
		name string
		add  func(as vm.AsyncSteps, i int)
	}{
		{"SetTimeout then Success", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Second); as.Success() })
		}},
		{"WaitExternal and Resumer", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				res := as.Resumer()
				as.WaitExternal()
				res.Success(vm.Int(1), vm.Str("two"))
			})
		}},
		{"Sync on a Mutex", func(as vm.AsyncSteps, i int) {
			as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {})
		}},
		{"Stack and StackRaw", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				_ = vm.Stack[[4]int64](as)
				_ = vm.Stack[string](as)
				as.StackRaw(40, func(unsafe.Pointer) {})
			})
		}},
		{"State of a fresh key", func(as vm.AsyncSteps, i int) {
			k := vm.Int(int64(i)).String()
			as.State().Set(k, i)
			as.State().Unset(k)
		}},
		{"Success with values", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Str("abc"), vm.Bytes([]byte{1, 2, 3}), vm.Any(&i), vm.Int(5))
			})
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Any(make([]byte, 100))) })
		}},
		{"Error caught", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Caught", "info") },
				func(as vm.AsyncSteps, code string) { as.Success() })
		}},
		{"SetCancel", func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetCancel(func(vm.AsyncSteps) {}); as.Success() })
		}},
		{"nested Parallel", func(as vm.AsyncSteps, i int) {
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Int(2)) })
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Parallel().Add(func(vm.AsyncSteps, vm.Args) {}) })
		}},
		{"labelled Loop", func(as vm.AsyncSteps, i int) {
			as.Loop(func(as vm.AsyncSteps) { as.Break("inner") }, "inner")
		}},
	}
	for _, ft := range features {
		t.Run(ft.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var first, last semScaleSnap
			root.Repeat(iters, func(as vm.AsyncSteps, i int) {
				switch i {
				case 1000:
					first = semScaleTake(l, root)
				case iters - 1:
					last = semScaleTake(l, root)
				}
				ft.add(as, i)
			})
			f := root.Promise()
			l.RunUntilIdle()
			semOK(t, f)
			heapFirst, heapLast := first.heap, last.heap
			first.heap, last.heap = 0, 0
			if first != last {
				t.Fatalf("after 1000 iterations: %+v\nafter %d: %+v", first, iters, last)
			}
			if heapLast > heapFirst+1<<20 {
				t.Fatalf("the Go heap grew from %d to %d bytes", heapFirst, heapLast)
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// The branches of a parallel step that each hold Stack memory end in any
// order (a cancel, or completions in the order they started): each end must
// look through its own allocations, not past every other branch's, so each
// branch's frames allocate on a list of their thread's. With one list for
// the run, the k-th branch found k allocations on it, and the ends of
// 10,000 such branches took 50 ms (200 ms for 20,000); see
// BenchmarkStackBranchesEnd.
func TestSemScaleParallelStackEnds(t *testing.T) {
	const width = 1000
	for _, end := range []string{"cancel", "in start order", "newest first"} {
		t.Run(end, func(t *testing.T) {
			l, _ := semLoop()
			var waiting []vm.AsyncSteps
			var destroyed []int
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				p := as.Parallel()
				for i := range width {
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						*vm.Stack[int64](as) = int64(i)
						as.StackRaw(8, func(unsafe.Pointer) { destroyed = append(destroyed, i) })
						if got := vm.StackListLen(as); got != 2 {
							t.Errorf("branch %d: %d allocations on its list, want its own 2", i, got)
						}
						as.WaitExternal()
						waiting = append(waiting, as)
					})
				}
			})
			f := root.Promise()
			l.RunUntilIdle()
			if len(waiting) != width {
				t.Fatalf("%d branches wait, want %d", len(waiting), width)
			}
			switch end {
			case "cancel":
				root.Cancel()
			case "in start order":
				for _, as := range waiting {
					as.Success()
				}
			case "newest first":
				for i := len(waiting) - 1; i >= 0; i-- {
					waiting[i].Success()
				}
			}
			l.RunUntilIdle()
			if len(destroyed) != width {
				t.Fatalf("%d destroy callbacks ran, want %d", len(destroyed), width)
			}
			if end != "cancel" {
				if _, err := f.Wait(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else {
				semResult(t, f)
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// A root released into the pool keeps no table that one large run grew:
// the pool keeps thousands of roots for good. One run here holds 10,000
// steps at once, with as many loop labels, levels of AsyncStack, and
// 100,000 state variables, whose map a clear would keep at its size.
func TestSemScalePooledRootKeepsNoLargeTables(t *testing.T) {
	const width, vars = 10_000, 100_000
	l, _ := semLoop()
	before := semHeap()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		semSetVars(as, vars)
		for i := range width {
			as.Loop(func(as vm.AsyncSteps) { as.Break() }, fmt.Sprint("L", i))
		}
	})
	root.Add(semNest(width, func(vm.AsyncSteps, int) {}, func(as vm.AsyncSteps) { as.Error("Deep") }))
	f := root.Promise()
	l.RunUntilIdle()
	if _, err := f.Wait(t.Context()); err == nil {
		t.Fatal("the flow succeeded, want Deep")
	}
	f = nil
	root.Release()
	if slots, stack := vm.PooledTables(l); slots > 64 || stack > 64 {
		t.Fatalf("a pooled root keeps room for %d slots and %d AsyncStack entries or labels; want at most 64 each", slots, stack)
	}
	semHeapKept(t, before)
	// The pooled root still serves small flows.
	again := l.NewSteps()
	again.Add(func(as vm.AsyncSteps, _ vm.Args) { as.State().Set("k", 1); as.Success(vm.Int(2)) })
	g := again.Promise()
	l.RunUntilIdle()
	if v, err := g.Wait(t.Context()); err != nil || v.Int(0) != 2 {
		t.Fatalf("small flow after the large one: %v, %v", v, err)
	}
	again.Release()
	semClean(t, l)
}

// semHeap returns the bytes the Go heap holds after a collection.
func semHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// semHeapKept fails t if the Go heap holds more than 2 MiB more than
// before, once a root whose state variables took several megabytes has
// gone back to the pool.
func semHeapKept(t *testing.T, before int64) {
	t.Helper()
	if grown := semHeap() - before; grown > 2<<20 {
		t.Fatalf("the heap is %d KiB larger after the root went back to the pool", grown>>10)
	}
}

// semSetVars sets n state variables, k0 on, to their numbers.
func semSetVars(as vm.AsyncSteps, n int) {
	for i := range n {
		as.State().Set(fmt.Sprint("k", i), i)
	}
}

// A flow that set 100,000 state variables and unset them again, all or
// all but 64, leaves the map no larger than its variables to the pool: a
// map keeps its table when its entries are deleted.
func TestSemScalePooledRootKeepsNoUnsetVariables(t *testing.T) {
	const vars = 100_000
	for _, kept := range []int{0, 64} {
		t.Run(fmt.Sprint(kept), func(t *testing.T) {
			l, _ := semLoop()
			before := semHeap()
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				semSetVars(as, vars)
				for i := kept; i < vars; i++ {
					as.State().Unset(fmt.Sprint("k", i))
				}
			})
			f := root.Promise()
			l.RunUntilIdle()
			semOK(t, f)
			root.Release()
			semHeapKept(t, before)
			again := l.NewSteps() // the pooled root
			if keys := again.State().Keys(); len(keys) != 0 {
				t.Fatalf("the pooled root kept variables %q", keys)
			}
			again.Release()
			semClean(t, l)
		})
	}
}
