package vm_test

import (
	"errors"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Stack and StackRaw return zeroed memory, even where an earlier step left
// its memory dirty.
func TestSemStackZeroed(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		type block [32]uint64
		dirty := func(as vm.AsyncSteps, _ vm.Args) {
			p := vm.Stack[block](as)
			for i := range p {
				p[i] = ^uint64(0)
			}
			raw := unsafe.Slice((*byte)(as.StackRaw(200, nil)), 200)
			for i := range raw {
				raw[i] = 0xAA
			}
		}
		check := func(as vm.AsyncSteps, _ vm.Args) {
			p := vm.Stack[block](as)
			for i, v := range p {
				if v != 0 {
					log.add("Stack word %d = %#x", i, v)
					break
				}
			}
			raw := unsafe.Slice((*byte)(as.StackRaw(200, nil)), 200)
			for i, v := range raw {
				if v != 0 {
					log.add("StackRaw byte %d = %#x", i, v)
					break
				}
			}
		}
		for range 5 {
			root.Add(dirty)
			root.Add(check)
		}
	})
}

// Destroy callbacks run when the step ends, newest first, whether it ends by
// success, by error or by cancel, and exactly once.
func TestSemStackDestroy(t *testing.T) {
	cases := []struct {
		name string
		end  func(as vm.AsyncSteps)
		want []string
	}{
		{"implicit success", func(vm.AsyncSteps) {}, []string{"destroy 3", "destroy 2", "destroy 1", "next"}},
		{"success", func(as vm.AsyncSteps) { as.Success() }, []string{"destroy 3", "destroy 2", "destroy 1", "next"}},
		{"error", func(as vm.AsyncSteps) { as.Error("E") }, []string{"handler E", "destroy 3", "destroy 2", "destroy 1", "next"}},
		{"cancel", func(as vm.AsyncSteps) { as.WaitExternal() }, []string{"destroy 3", "destroy 2", "destroy 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := semLoop()
			root := l.NewSteps()
			var log semLog
			destroy := func(name string) func(unsafe.Pointer) {
				return func(p unsafe.Pointer) {
					log.add("destroy %s", name)
					if *(*uint32)(p) != 0xC0FFEE {
						log.add("destroy %s got other memory", name)
					}
				}
			}
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				for i := 1; i <= 3; i++ {
					p := as.StackRaw(8, destroy(strconv.Itoa(i)))
					*(*uint32)(p) = 0xC0FFEE
				}
				as.StackRaw(16, nil) // no callback: freed silently
				c.end(as)
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %s", code)
				as.Success()
			})
			root.Add(log.step("next"))
			root.Execute()
			l.RunUntilIdle()
			if c.name == "cancel" {
				semExpect(t, &log)
				root.Cancel()
				l.RunUntilIdle()
			}
			semExpect(t, &log, c.want...)
			if st := l.Stats(); st.ArenaInUse != 0 {
				t.Fatalf("ArenaInUse = %d after the flow", st.ArenaInUse)
			}
		})
	}
}

// A step's stack memory lives until the step ends, which for a step with
// sub-steps is after they complete: the sub-steps can use it.
func TestSemStackLivesAcrossSubSteps(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		type counters struct{ A, B int64 }
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			c := vm.Stack[counters](as)
			c.A = 40
			as.StackRaw(4, func(unsafe.Pointer) { log.add("outer destroyed, A=%d", c.A) })
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				inner := as.StackRaw(4, func(unsafe.Pointer) { log.add("inner destroyed") })
				_ = inner
				c.A++
			})
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				c.A++
				log.add("sub 2 sees A=%d", c.A)
			})
		})
		root.Add(log.step("next"))
	}, "inner destroyed", "sub 2 sees A=42", "outer destroyed, A=42", "next")
}

// A T holding Go pointers (a string here) works and keeps its value across
// sub-steps and garbage collections: it lives on the GC heap.
func TestSemStackWithPointers(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		type rec struct {
			N    int
			Name string
			Tags []string
		}
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			r := vm.Stack[rec](as)
			if r == nil || r.N != 0 || r.Name != "" || r.Tags != nil {
				log.add("not a zero rec: %+v", r)
				return
			}
			r.N = 7
			r.Name = "name-" + strconv.Itoa(r.N) // heap-allocated string
			r.Tags = append(r.Tags, strconv.Itoa(1000+r.N))
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				runtime.GC()
				runtime.GC()
			})
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				// Allocate garbage that would overwrite freed memory.
				for i := range 1000 {
					_ = strconv.Itoa(i) + "garbage"
				}
				runtime.GC()
				log.add("%d %s %v", r.N, r.Name, r.Tags)
			})
		})
	}, "7 name-7 [1007]")
}

// Stack and StackRaw through a stale handle return nil.
func TestSemStackInvalidHandle(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var stale vm.AsyncSteps
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { stale = as })
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if p := vm.Stack[int64](stale); p != nil {
		t.Fatal("Stack through a stale handle returned memory")
	}
	if p := stale.StackRaw(8, nil); p != nil {
		t.Fatal("StackRaw through a stale handle returned memory")
	}
	// The zero handle names no loop: outside a step the call panics with
	// InternalError, like a method call through a nil pointer.
	func() {
		defer func() {
			var e *vm.Error
			if p, _ := recover().(error); !errors.As(p, &e) || e.Code != vm.InternalError {
				t.Fatalf("Stack through the zero handle outside a step: recovered %v, want an InternalError panic", p)
			}
		}()
		vm.Stack[int64](vm.AsyncSteps{})
	}()
}

// A frame's end finds every allocation it owns, whether it has a few or
// more than its count of them can hold (255), with an inner step's own
// allocations taken and freed in between: destroy callbacks run once each,
// newest first, and the arena is back where it was before the next step.
func TestSemStackManyInOneFrame(t *testing.T) {
	for _, n := range []int{3, 254, 255, 256, 600} {
		l, _ := semLoop()
		root := l.NewSteps()
		var order []int
		var before int64
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			before = l.Stats().ArenaInUse
			for i := range n {
				as.StackRaw(8+i%3*8, func(unsafe.Pointer) { order = append(order, i) })
				if i == n/2 {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.StackRaw(8, func(unsafe.Pointer) { order = append(order, -1) })
					})
				}
			}
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			if got := l.Stats().ArenaInUse; got > before {
				t.Errorf("%d allocations: %d bytes in use after their step, %d before it", n, got, before)
			}
		})
		f := root.Promise()
		l.RunUntilIdle()
		semOK(t, f)
		if len(order) != n+1 || order[0] != -1 {
			t.Fatalf("%d allocations: destroyed %d, first %v", n, len(order), order[:min(len(order), 3)])
		}
		for k, i := range order[1:] {
			if i != n-1-k {
				t.Fatalf("%d allocations: destroy %d ran %dth, want newest first", n, i, k)
			}
		}
		root.Release()
		semClean(t, l)
	}
}

// StackRaw with a negative size is misuse: it fails the step's flow with
// InternalError.
func TestSemStackRawNegativeSize(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.StackRaw(-1, nil) })
	f := root.Promise()
	l.RunUntilIdle()
	semInfoMentions(t, semFail(t, f, vm.InternalError).Info, "StackRaw", "negative")
	root.Release()
	semClean(t, l)
}

// StackRaw of more than the most a Stack allocation may take is misuse, as
// a negative size is: inside a step it fails the flow; through a waiting
// step's handle, from the loop's goroutine between passes, it returns nil
// and fails the flow too, where the arena's refusal (a panic) would have
// come out of the call. So is Stack of a type that large, with Go pointers
// or without, which is refused before one exists: a zero T made to size it
// (or a T with pointers, made on the Go heap) was a fatal out-of-memory
// error, the end of the process.
func TestSemStackRawHugeSize(t *testing.T) {
	type huge [1 << 40]byte
	type hugePtrs struct {
		p *int
		b huge
	}
	type alloc struct {
		what string
		call func(vm.AsyncSteps) bool // whether it returned memory
	}
	var cases []alloc
	for _, size := range []int{1<<30 + 1, 1 << 40, 1 << 62} {
		cases = append(cases, alloc{"StackRaw", func(as vm.AsyncSteps) bool { return as.StackRaw(size, nil) != nil }})
	}
	cases = append(cases,
		alloc{"Stack", func(as vm.AsyncSteps) bool { return vm.Stack[huge](as) != nil }},
		alloc{"Stack", func(as vm.AsyncSteps) bool { return vm.Stack[hugePtrs](as) != nil }})
	for _, c := range cases {
		l, _ := semLoop()
		root := l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { c.call(as) })
		f := root.Promise()
		l.RunUntilIdle()
		semInfoMentions(t, semFail(t, f, vm.InternalError).Info, c.what, "GiB")
		root.Release()

		var waiting vm.AsyncSteps
		root = l.NewSteps()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.WaitExternal()
			waiting = as
		})
		f = root.Promise()
		l.RunUntilIdle()
		if c.call(waiting) {
			t.Fatalf("%s from outside the step returned memory", c.what)
		}
		l.RunUntilIdle()
		semInfoMentions(t, semFail(t, f, vm.InternalError).Info, c.what, "GiB")
		root.Release()
		semClean(t, l)
	}
}

// Pointer-free stack memory comes from the root's arena.
func TestSemStackUsesArena(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var during, withPtr int64
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		base := l.Stats().ArenaInUse
		_ = vm.Stack[[64]int64](as)
		during = l.Stats().ArenaInUse - base
		base = l.Stats().ArenaInUse
		_ = vm.Stack[[64]*int64](as)
		withPtr = l.Stats().ArenaInUse - base
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if during < 64*8 {
		t.Fatalf("a 512-byte pointer-free Stack grew the arena by %d bytes", during)
	}
	if withPtr >= 64*8 {
		t.Fatalf("a Stack of pointers took %d arena bytes: it must live on the GC heap", withPtr)
	}
	if st := l.Stats(); st.ArenaInUse != 0 {
		t.Fatalf("ArenaInUse = %d after the flow", st.ArenaInUse)
	}
}

// Stack memory of a loop iteration is destroyed when the iteration ends,
// before the next one; that of a canceled branch when it is canceled.
func TestSemStackDestroyInLoopAndBranch(t *testing.T) {
	t.Run("loop", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				log.add("iter %d", i)
				as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy %d", i) })
				if i == 1 {
					as.Add(log.step("sub 1"))
				}
			})
		}, "iter 0", "destroy 0", "iter 1", "sub 1", "destroy 1", "iter 2", "destroy 2")
	})
	t.Run("branch", func(t *testing.T) {
		l, _ := semLoop()
		root := l.NewSteps()
		var log semLog
		p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy outer") })
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy inner") })
				as.WaitExternal()
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
		})
		f := root.Promise()
		l.RunUntilIdle()
		semFail(t, f, "Abort")
		semExpect(t, &log, "destroy inner", "destroy outer", "handler Abort")
		if st := l.Stats(); st.ArenaInUse != 0 {
			t.Fatalf("%+v", st)
		}
	})
}

// Stack memory stays with its frame when the run's stamps wrap: a step
// whose sub-step gets the very stamp the step has (2^32 stamps later, here
// forced) keeps its allocations until it ends itself.
func TestSemStackOwnersSurviveStampWrap(t *testing.T) {
	var log semLog
	l, _ := semLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.StackRaw(8, func(unsafe.Pointer) { log.add("outer destroyed") })
		vm.SetSeq(as, vm.HandleSeq(as)-1) // the next stamp is this step's
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.StackRaw(8, func(unsafe.Pointer) { log.add("inner destroyed") })
		})
		as.Add(log.step("middle"))
	})
	root.Add(log.step("after"))
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "inner destroyed", "middle", "outer destroyed", "after")
}

// A pointer-free Stack[T] is freed when its step ends, as StackRaw memory
// is: a loop whose body takes one each iteration runs in constant arena
// memory.
func TestSemStackFreedWhenStepEnds(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var iter10, iter1000 int64
	root.Repeat(1001, func(as vm.AsyncSteps, i int) {
		vm.Stack[[64]int64](as)[0] = int64(i)
		switch i {
		case 10:
			iter10 = l.Stats().ArenaInUse
		case 1000:
			iter1000 = l.Stats().ArenaInUse
		}
	})
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	if iter1000 != iter10 {
		t.Fatalf("ArenaInUse %d at iteration 10 of a loop taking a Stack[[64]int64] each, %d at iteration 1000", iter10, iter1000)
	}
	root.Release()
	semClean(t, l)
}

// Stack memory never takes a block of a node's size: a node's freed block
// serves the next allocation of its class, and Stack bytes there (the
// list's header, or the user's) would stand where a stale handle of that
// node reads its stamp. StackRaw(0)'s header once matched the stamp of an
// ended sub-step, whose handle was then valid again.
func TestSemStaleHandleOverStackMemory(t *testing.T) {
	for _, wide := range []bool{false, true} {
		for _, size := range []int{0, 8, 16, 20, 32, 48} {
			l, _ := semLoop()
			var stale []vm.AsyncSteps
			keep := func(as vm.AsyncSteps, _ vm.Args) { stale = append(stale, as) }
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				for range 100 {
					if wide {
						as.Parallel().Add(keep) // a parallel step is a wide node
					} else {
						as.Add(keep)
					}
				}
			})
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				for range 300 {
					as.StackRaw(size, func(unsafe.Pointer) {})
				}
				for i, h := range stale {
					if h.Valid() {
						t.Errorf("StackRaw(%d) after %d ended steps (wide %v): the handle of step %d is valid", size, len(stale), wide, i)
					}
				}
			})
			f := root.Promise()
			l.RunUntilIdle()
			if _, err := f.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			root.Release()
			semClean(t, l)
		}
	}
}
