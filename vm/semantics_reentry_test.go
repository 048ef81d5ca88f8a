package vm_test

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Re-entrant lifecycle calls from user callbacks that run while the VM
// tears frames down.

// A Stack destroy callback that cancels or releases its own root, while
// its step ends by success, error, timeout or a cancel of the root, ends
// the flow once, canceled or as the error would have, without touching
// memory the cancel freed: the stats return to zero and the pool hands out
// a clean root.
func TestSemDestroyCallbackEndsOwnRoot(t *testing.T) {
	for _, call := range []string{"Cancel", "Release"} {
		for _, how := range []string{"success", "sub-steps", "error", "timeout", "cancel", "loop"} {
			t.Run(call+"/"+how, func(t *testing.T) {
				l, clk := semLoop()
				root := l.NewSteps()
				var log semLog
				destroy := func(unsafe.Pointer) {
					log.add("destroy")
					if call == "Cancel" {
						root.Cancel()
					} else {
						root.Release()
					}
				}
				body := func(as vm.AsyncSteps) {
					as.StackRaw(8, destroy)
					as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy 2") })
					switch how {
					case "sub-steps":
						as.Add(log.step("sub"))
					case "error":
						as.Error("E")
					case "timeout":
						as.SetTimeout(time.Millisecond)
					case "cancel":
						as.WaitExternal()
					}
				}
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer") })
					if how == "loop" {
						as.Repeat(3, func(as vm.AsyncSteps, i int) { body(as) })
						return
					}
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { body(as) },
						func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				})
				root.Add(log.step("next never"))
				f := root.Promise()
				l.RunUntilIdle()
				switch how {
				case "timeout":
					clk.Advance(time.Millisecond)
				case "cancel":
					root.Cancel()
				}
				l.RunUntilIdle()
				clk.Advance(time.Hour)
				l.RunUntilIdle()
				// An error unwinding through the step ends the flow in the
				// same call, before the Cancel or Release can take effect.
				_, err := semResult(t, f)
				if !errors.Is(err, vm.ErrCanceled) &&
					!(how == "error" && errors.Is(err, &vm.Error{Code: "E"})) &&
					!(how == "timeout" && errors.Is(err, vm.ErrTimeout)) {
					t.Errorf("Future error %v, log %q", err, log.lines)
				}
				counts := map[string]int{}
				for _, line := range log.lines {
					counts[line]++
				}
				if counts["destroy"] != 1 || counts["destroy 2"] != 1 || counts["next never"] != 0 || counts["cancel outer"] > 1 {
					t.Errorf("log %q", log.lines)
				}
				if call == "Cancel" {
					root.Release()
				}
				if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 || st.LiveRoots != 0 {
					t.Fatalf("after the flow: %+v", st)
				}
				semNextRootWorks(t, l)
				if st := l.Stats(); st.ArenaInUse != 0 || st.LiveRoots != 0 {
					t.Fatalf("after the next root: %+v", st)
				}
			})
		}
	}
}

// semCounts counts the lines of a log.
func semCounts(log *semLog) map[string]int {
	counts := map[string]int{}
	for _, line := range log.lines {
		counts[line]++
	}
	return counts
}

// semSettled fails t unless nothing of the loop's flows is left.
func semSettled(t *testing.T, l *vm.Loop) {
	t.Helper()
	if st := l.Stats(); st.RunningRoots != 0 || st.ArenaInUse != 0 || st.Timers != 0 || st.Queued != 0 {
		t.Fatalf("after the flows: %+v", st)
	}
}

// Calls through a step's own handle, or its parent's, from a destroy
// callback of the step's Stack memory: the step is ending, so none of them
// completes, fails or configures it again.
func TestSemDestroyCallbackUsesHandles(t *testing.T) {
	ops := []semOp{
		{"Success", func(h vm.AsyncSteps) { h.Success(vm.Int(1)) }},
		{"Error", func(h vm.AsyncSteps) { h.Error("FromDestroy") }},
		{"SetTimeout", func(h vm.AsyncSteps) { h.SetTimeout(time.Millisecond) }},
		{"SetCancel", func(h vm.AsyncSteps) { h.SetCancel(func(vm.AsyncSteps) {}) }},
		{"Resumer", func(h vm.AsyncSteps) { h.Resumer().Success() }},
		{"StackRaw", func(h vm.AsyncSteps) { h.StackRaw(8, nil) }},
		{"Add", func(h vm.AsyncSteps) { h.Add(func(vm.AsyncSteps, vm.Args) {}) }},
	}
	for _, whose := range []string{"own", "parent"} {
		for _, op := range ops {
			for _, how := range []string{"success", "error", "cancel"} {
				t.Run(whose+"/"+op.name+"/"+how, func(t *testing.T) {
					l, clk := semLoop()
					root := l.NewSteps()
					var log semLog
					root.Add(func(outer vm.AsyncSteps, _ vm.Args) {
						outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
							h := as
							if whose == "parent" {
								h = outer
							}
							as.StackRaw(8, func(unsafe.Pointer) {
								log.add("destroy")
								op.call(h)
							})
							switch how {
							case "error":
								as.Error("E")
							case "cancel":
								as.WaitExternal()
							}
						}, func(as vm.AsyncSteps, code string) { log.add("inner handler %s", code) })
					}, func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) })
					root.Add(func(as vm.AsyncSteps, a vm.Args) {
						log.add("next %d", a.Len())
						// Nodes a double free left twice on a free list
						// would be handed out twice here.
						for _, name := range []string{"x", "y", "z"} {
							as.Add(log.step(name))
						}
					})
					f := root.Promise()
					l.RunUntilIdle()
					if how == "cancel" {
						root.Cancel()
					}
					l.RunUntilIdle()
					clk.Advance(time.Hour)
					l.RunUntilIdle()
					semResult(t, f)
					c := semCounts(&log)
					next := c["next 0"] + c["next 1"]
					if c["destroy"] != 1 || next > 1 || c["x"] != next || c["y"] != next || c["z"] != next {
						t.Fatalf("log %q", log.lines)
					}
					if how == "error" && c["outer handler E"] != 1 {
						t.Fatalf("the error skipped the outer handler: %q", log.lines)
					}
					for line, n := range c {
						if n > 1 {
							t.Fatalf("%q ran %d times: %q", line, n, log.lines)
						}
					}
					var pe *vm.PanicError
					if errors.As(root.State().LastException(), &pe) {
						t.Fatalf("LastException %v: nothing panicked", pe)
					}
					root.Release()
					semSettled(t, l)
					if st := l.Stats(); st.LiveRoots != 0 {
						t.Fatalf("%+v", st)
					}
				})
			}
		}
	}
}

// A cancel handler or destroy callback in one branch of an aborted or
// canceled parallel step fails or completes a step that waits in another
// branch: the abort goes on over branches that are still there, and the
// flow ends once.
func TestSemTeardownTouchesSiblingBranch(t *testing.T) {
	for _, via := range []string{"cancel handler", "destroy"} {
		for _, op := range []string{"Error", "Success"} {
			for _, how := range []string{"abort", "cancel"} {
				t.Run(via+"/"+op+"/"+how, func(t *testing.T) {
					l, _ := semLoop()
					root := l.NewSteps()
					var log semLog
					var sibling vm.AsyncSteps
					p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						touch := func() {
							log.add("touch")
							if op == "Error" {
								sibling.Error("FromTeardown")
							} else {
								sibling.Success()
							}
						}
						if via == "destroy" {
							as.StackRaw(8, func(unsafe.Pointer) { touch() })
						} else {
							as.SetCancel(func(vm.AsyncSteps) { touch() })
						}
						as.WaitExternal()
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						sibling = as
						as.SetCancel(func(vm.AsyncSteps) { log.add("sibling cancel") })
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { log.add("third cancel") })
						if how == "abort" {
							as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
						}
					})
					root.Add(log.step("next"))
					f := root.Promise()
					l.RunUntilIdle()
					if how == "cancel" {
						root.Cancel()
					}
					l.RunUntilIdle()
					semResult(t, f)
					for line, n := range semCounts(&log) {
						if n > 1 {
							t.Fatalf("%q ran %d times: %q", line, n, log.lines)
						}
					}
					root.Release()
					semSettled(t, l)
				})
			}
		}
	}
}

// A cancel handler of one branch, run by a cancel of the root, a timeout
// or the abort of the parallel step, fails a step that waits in another
// branch. The error would unwind the parallel step again from inside its
// own abort: it is misuse, recorded, and the cancel or the first error
// goes on as if the call had not been made (no error handler runs during
// a cancel; the parallel step's handler sees the error that aborted it).
func TestSemCancelHandlerFailsSiblingBranch(t *testing.T) {
	for _, how := range []string{"cancel", "timeout", "abort"} {
		t.Run(how, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			var log semLog
			var sibling vm.AsyncSteps
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if how == "timeout" {
					as.SetTimeout(time.Millisecond)
				}
				p := as.Parallel(func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					as.Success()
				})
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(vm.AsyncSteps) {
						log.add("touch")
						sibling.Error("FromCancel")
					})
				})
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					sibling = as
					as.SetCancel(func(vm.AsyncSteps) { log.add("sibling cancel") })
				})
				if how == "abort" {
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
					})
				}
			}, func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) })
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("next")
				for _, name := range []string{"x", "y", "z"} {
					as.Add(log.step(name))
				}
			})
			f := semUnwind(l, clk, root, how)
			switch how {
			case "cancel":
				semExpect(t, &log, "touch", "sibling cancel")
				if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("Future error %v", err)
				}
			case "timeout":
				semExpect(t, &log, "touch", "sibling cancel", "handler Timeout", "next", "x", "y", "z")
				semOK(t, f)
			case "abort":
				semExpect(t, &log, "touch", "sibling cancel", "handler Abort", "next", "x", "y", "z")
				semOK(t, f)
			}
			root.Release()
			semSettled(t, l)
		})
	}
}

// Release called again from a cancel handler that Release runs: the root
// is released once. It used to go to the pool twice, counted off the live
// roots twice, and the pool then handed the same root to two flows.
func TestSemReleaseFromCancelHandlerDuringRelease(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		as.SetCancel(func(vm.AsyncSteps) {
			log.add("cancel")
			root.Release()
		})
	})
	f := root.Promise()
	l.RunUntilIdle()
	root.Release()
	semExpect(t, &log, "cancel")
	if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
		t.Fatalf("Future error %v", err)
	}
	if st := l.Stats(); st.LiveRoots != 0 || st.PooledRoots != 1 || st.RunningRoots != 0 {
		t.Fatalf("after Release: %+v, want no live root and one pooled", st)
	}
	a, b := l.NewSteps(), l.NewSteps()
	a.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
	fa := a.Promise()
	b.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(2)) })
	fb := b.Promise()
	l.RunUntilIdle()
	if x, y := semOK(t, fa).Int(0), semOK(t, fb).Int(0); x != 1 || y != 2 {
		t.Fatalf("flows gave %d and %d", x, y)
	}
	a.Release()
	b.Release()
	if st := l.Stats(); st.LiveRoots != 0 || st.ArenaInUse != 0 {
		t.Fatalf("%+v", st)
	}
}
