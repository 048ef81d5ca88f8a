package vm_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Loops combined with parallel steps, timeouts, cancel handlers and Stack
// memory.

// An iteration that adds a sub-step and then unwinds (Break, Continue, a
// panic, Error) is carried out as the unwinding says, also when an earlier
// iteration of the same turn ended by implicit success: the sub-step never
// runs.
func TestSemLoopUnwindAfterAddFollowingQuickIteration(t *testing.T) {
	cases := []struct {
		how  string
		code string // "" for success
		want []string
	}{
		{"break", "", []string{"iter 0", "iter 1", "next"}},
		{"continue", "", []string{"iter 0", "iter 1", "iter 2", "next"}},
		{"panic", vm.InternalError, []string{"iter 0", "iter 1", "handler InternalError"}},
		{"error", vm.InternalError, []string{"iter 0", "iter 1", "handler InternalError"}},
	}
	for _, c := range cases {
		t.Run(c.how, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Repeat(3, func(as vm.AsyncSteps, i int) {
						log.add("iter %d", i)
						if i != 1 {
							return // ends at once: the next iteration runs in the same turn
						}
						as.Add(log.step("sub never"))
						switch c.how {
						case "break":
							as.Break()
						case "continue":
							as.Continue()
						case "panic":
							panic("boom")
						case "error":
							as.Error("E") // after Add: InternalError
						}
					})
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				root.Add(log.step("next"))
			})
			if c.code == "" {
				semOK(t, r.f)
			} else {
				semFail(t, r.f, c.code)
			}
			semExpect(t, r.log, c.want...)
			semClean(t, r.l)
		})
	}
}

// Break or Continue with the label of a loop outside a parallel step, from
// a sub-step two levels below an inner loop that is itself a branch: the
// frames left run their cancel handlers and destroy their Stack memory
// innermost first, the sibling branch (Stack, timeout, cancel handler) is
// canceled, no error handler runs, and nothing is left behind.
func TestSemLoopLabelOutOfBranchLoop(t *testing.T) {
	for _, ctl := range []string{"break", "continue"} {
		t.Run(ctl, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Repeat(2, func(as vm.AsyncSteps, i int) {
					as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy outer %d", i) })
					p := as.Parallel(func(as vm.AsyncSteps, code string) { log.add("par handler never %s", code) })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy sib %d", i) })
						as.SetTimeout(time.Second)
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel sib %d", i) })
					})
					p.Repeat(3, func(as vm.AsyncSteps, j int) {
						as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy it %d.%d", i, j) })
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.SetTimeout(time.Second)
							as.Add(func(as vm.AsyncSteps, _ vm.Args) {
								log.add("deep %d.%d", i, j)
								if j == 1 {
									if ctl == "break" {
										as.Break("O")
									}
									as.Continue("O")
								}
							})
						}, func(as vm.AsyncSteps, code string) { log.add("handler never %s", code) })
					}, "I")
					as.Add(log.step("after par never"))
				}, "O")
				root.Add(log.step("after"))
			})
			semOK(t, r.f)
			want := []string{
				"deep 0.0", "destroy it 0.0", "deep 0.1",
				"destroy it 0.1", "cancel sib 0", "destroy sib 0", "destroy outer 0",
			}
			if ctl == "continue" {
				want = append(want, "deep 1.0", "destroy it 1.0", "deep 1.1",
					"destroy it 1.1", "cancel sib 1", "destroy sib 1", "destroy outer 1")
			}
			want = append(want, "after")
			semExpect(t, r.log, want...)
			r.advance(time.Hour)
			semClean(t, r.l)
		})
	}
}

// Cancel, Release, or Cancel and a new Execute, of a root whose loop is
// between iterations (its thread queued, the iteration frame parked for
// reuse): the flow ends once, canceled, the frames' cancel handler and
// Stack destroy callbacks run once, and nothing is left behind.
func TestSemLoopEndWhileIterationParked(t *testing.T) {
	for _, how := range []string{"Cancel", "Release", "Cancel+Execute"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			a := l.NewSteps()
			a.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
				as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy outer") })
				as.Loop(func(as vm.AsyncSteps) {
					log.add("iter")
					as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy iter") })
					as.Add(log.step("sub"))
				})
			})
			fa := a.Promise()
			b := l.NewSteps() // takes turns with a
			b.Add(log.step("b0"))
			b.Add(log.step("b1"))
			b.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("b2 %s", how)
				switch how {
				case "Cancel":
					a.Cancel()
				case "Release":
					a.Release()
				case "Cancel+Execute":
					a.Cancel()
					a.Add(log.step("rerun"))
					a.Execute()
				}
			})
			fb := b.Promise()
			l.RunUntilIdle()
			semOK(t, fb)
			if _, err := semResult(t, fa); !errors.Is(err, vm.ErrCanceled) {
				t.Fatalf("a: %v, want canceled", err)
			}
			want := []string{"b0", "iter", "b1", "sub", "destroy iter", "b2 " + how,
				"cancel outer", "destroy outer"}
			if how == "Cancel+Execute" {
				want = append(want, "rerun")
			}
			semExpect(t, &log, want...)
			if how != "Release" {
				a.Release()
			}
			semClean(t, l)
		})
	}
}

// Three branches run 1,500 iterations each, every iteration with a timeout
// of its own and one on a sub-step, completing in turns, by Immediate or
// by a timer of their own: the timeouts are stopped as the iterations end,
// and none is left.
func TestSemLoopTimeoutsUnderParallel(t *testing.T) {
	for _, how := range []string{"sub-step", "immediate", "deferred"} {
		t.Run(how, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				for range 3 {
					p.Repeat(1500, func(as vm.AsyncSteps, i int) {
						as.SetTimeout(time.Second)
						as.StackRaw(16, nil)
						switch how {
						case "sub-step":
							as.Add(func(as vm.AsyncSteps, _ vm.Args) {
								as.SetTimeout(5 * time.Millisecond)
								as.Success()
							})
						case "immediate":
							as.Tool().Immediate(func() { as.Success() })
						case "deferred":
							as.Tool().Deferred(time.Millisecond, func() { as.Success() })
						}
					})
				}
				root.Add(log.step("after"))
			})
			for i := 0; i < 2000 && r.l.Stats().RunningRoots > 0; i++ {
				if k := r.l.Stats().Timers; k > 6 {
					t.Fatalf("%d timers pending at once", k)
				}
				r.advance(time.Millisecond)
			}
			semOK(t, r.f)
			semExpect(t, r.log, "after")
			semClean(t, r.l)
		})
	}
}

// An error handler that a timeout runs (outside of its thread's turn) and
// that panics after its Success: the Success ends the branch in its next
// turn, as it would from a step, so the panic fails the flow through the
// branch, which is still there. A handler that ends its branch at once, by
// failing a sibling branch of the parallel around it through a kept handle,
// and then panics, does not unwind the branch it left: that memory, freed,
// is given meanwhile to Stack memory (a destroy callback of the iteration
// allocates it) and must not be written to; the flow goes on.
func TestSemHandlerPanicAfterSuccessEndedItsBranch(t *testing.T) {
	for _, how := range []string{"Success", "sibling fails"} {
		t.Run(how, func(t *testing.T) {
			var mem []unsafe.Pointer
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				var waiting, holder vm.AsyncSteps
				p0 := root.Parallel(func(as vm.AsyncSteps, code string) {
					log.add("parallel handler %s", code)
					if how == "sibling fails" {
						as.Success()
					}
				})
				p0.Add(func(as vm.AsyncSteps, _ vm.Args) {
					waiting = as
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel waiting") })
				})
				p0.Repeat(1, func(as vm.AsyncSteps, i int) {
					as.StackRaw(8, func(unsafe.Pointer) {
						log.add("destroy iteration")
						if how == "sibling fails" {
							for range 3 { // the blocks the parallel step and its branch had
								mem = append(mem, holder.StackRaw(32, nil))
							}
						}
					})
					p := as.Parallel()
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(time.Millisecond)
					}, func(as vm.AsyncSteps, code string) {
						log.add("handler %s", code)
						if how == "Success" {
							as.Success()
						} else {
							waiting.Error("Sibling")
						}
						panic("after " + how)
					})
				})
				p0.Add(func(as vm.AsyncSteps, _ vm.Args) { // canceled last
					holder = as
					as.WaitExternal()
				})
				root.Add(log.step("after"))
			})
			r.advance(time.Second)
			if how == "Success" {
				semFail(t, r.f, vm.InternalError)
				semExpect(t, r.log, "handler Timeout", "destroy iteration", "cancel waiting", "parallel handler InternalError")
			} else {
				semOK(t, r.f)
				semExpect(t, r.log, "handler Timeout", "cancel waiting", "destroy iteration", "parallel handler Sibling", "after")
				if len(mem) != 3 {
					t.Fatalf("%d Stack blocks taken, want 3", len(mem))
				}
				for _, p := range mem {
					if b := *(*[32]byte)(p); b != [32]byte{} {
						t.Fatalf("Stack memory written to: %v", b)
					}
				}
			}
			semClean(t, r.l)
		})
	}
}
