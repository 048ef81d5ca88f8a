package vm_test

import (
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Break and Continue in orderings the other loop tests do not cover.

// semLoopCtl calls Break if ctl says so, else Continue.
func semLoopCtl(as vm.AsyncSteps, ctl string) {
	if ctl == "Break" {
		as.Break()
	}
	as.Continue()
}

// Break or Continue from a cancel handler inside a loop is only recorded:
// a Cancel stays a cancel, an error stays that error.
func TestSemLoopCtlFromCancelHandler(t *testing.T) {
	for _, end := range []string{"Cancel", "Error", "Timeout"} {
		t.Run(end, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Loop(func(as vm.AsyncSteps) {
					log.add("iter")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(as vm.AsyncSteps) {
							log.add("cancel")
							as.Break()
							log.add("break returned")
							as.Continue()
							log.add("continue returned")
						})
						switch end {
						case "Error":
							as.Tool().Deferred(time.Millisecond, func() { as.Error("E") })
						case "Timeout":
							as.SetTimeout(time.Millisecond)
						}
					})
				})
				root.Add(log.step("after never"))
			})
			if end == "Cancel" {
				r.root.Cancel()
			}
			r.advance(time.Millisecond)
			_, err := semResult(t, r.f)
			switch end {
			case "Cancel":
				if !errors.Is(err, vm.ErrCanceled) {
					t.Fatalf("got %v", err)
				}
			case "Error":
				semFail(t, r.f, "E")
			case "Timeout":
				semFail(t, r.f, vm.Timeout)
			}
			semExpect(t, r.log, "iter", "cancel", "break returned", "continue returned")
			r.root.Release()
			semClean(t, r.l)
		})
	}
}

// Break and Continue from an error handler that a timeout or a Resumer's
// Error runs outside the thread's turn.
func TestSemLoopCtlFromHandlerOutsideTurn(t *testing.T) {
	for _, by := range []string{"timeout", "resumer"} {
		for _, ctl := range []string{"Break", "Continue"} {
			t.Run(by+"/"+ctl, func(t *testing.T) {
				r := semStart(func(root vm.AsyncSteps, log *semLog) {
					root.Repeat(3, func(as vm.AsyncSteps, i int) {
						log.add("iter %d", i)
						as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy %d", i) })
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.SetCancel(func(vm.AsyncSteps) { log.add("cancel %d", i) })
							if by == "timeout" {
								as.SetTimeout(time.Millisecond)
							} else {
								res := as.Resumer()
								as.Tool().Deferred(time.Millisecond, func() { res.Error("E", "") })
							}
						}, func(as vm.AsyncSteps, code string) {
							log.add("handler %d %s", i, code)
							semLoopCtl(as, ctl)
						})
						as.Add(log.step("rest never"))
					})
					root.Add(log.step("after"))
				})
				for range 5 {
					r.advance(time.Millisecond)
				}
				semOK(t, r.f)
				code := vm.Timeout
				if by == "resumer" {
					code = "E"
				}
				want := []string{"iter 0", "cancel 0", "handler 0 " + code, "destroy 0"}
				if ctl == "Continue" {
					want = append(want, "iter 1", "cancel 1", "handler 1 "+code, "destroy 1",
						"iter 2", "cancel 2", "handler 2 "+code, "destroy 2")
				}
				semExpect(t, r.log, append(want, "after")...)
				r.root.Release()
				semClean(t, r.l)
			})
		}
	}
}

// Break and Continue out of a Sync section, from the section, its
// sub-step and its error handler, give the place back: a flow queued on
// the primitive enters.
func TestSemLoopCtlOutOfSync(t *testing.T) {
	for _, from := range []string{"section", "sub-step", "handler"} {
		for _, ctl := range []string{"Break", "Continue"} {
			t.Run(from+"/"+ctl, func(t *testing.T) {
				l, clk := semLoop()
				m := vm.NewMutex(1, vm.Unbounded)
				th := vm.NewThrottle(l, 1, time.Millisecond, vm.Unbounded)
				lm := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: vm.Unbounded, Rate: 1, Period: time.Millisecond, Burst: vm.Unbounded})
				var log semLog
				root := l.NewSteps()
				ctlf := func(as vm.AsyncSteps) {
					semLoopCtl(as, ctl)
				}
				root.Repeat(2, func(as vm.AsyncSteps, i int) {
					for k, s := range []vm.ISync{m, th, lm} {
						as.Sync(s, func(as vm.AsyncSteps, _ vm.Args) {
							log.add("in %d.%d", i, k)
							switch from {
							case "section":
								if k == 2 {
									ctlf(as)
								}
							case "sub-step":
								as.Add(func(as vm.AsyncSteps, _ vm.Args) {
									if k == 2 {
										ctlf(as)
									}
								})
							case "handler":
								if k == 2 {
									as.Error("E")
								}
							}
						}, func(as vm.AsyncSteps, code string) { ctlf(as) })
					}
				})
				root.Add(log.step("after"))
				other := l.NewSteps()
				other.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
					as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { log.add("other in") })
				})
				f, fo := root.Promise(), other.Promise()
				for range 20 {
					l.RunUntilIdle()
					clk.Advance(time.Millisecond)
				}
				l.RunUntilIdle()
				semOK(t, f)
				semOK(t, fo)
				if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
					t.Fatalf("mutex %+v", s)
				}
				if c, tt := lm.Stats(); c.Inside != 0 || c.Queued != 0 || tt.Queued != 0 {
					t.Fatalf("limiter %+v %+v", c, tt)
				}
				if s := th.Stats(); s.Queued != 0 {
					t.Fatalf("throttle %+v", s)
				}
				root.Release()
				other.Release()
				semClean(t, l)
			})
		}
	}
}

// Break from a branch while a sibling branch waits in a Mutex's queue, and
// while another holds it: both give their place back.
func TestSemLoopBreakFromBranchWithSiblingInSync(t *testing.T) {
	l, _ := semLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log semLog
	root := l.NewSteps()
	root.Repeat(3, func(as vm.AsyncSteps, i int) {
		p := as.Parallel()
		p.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
			log.add("holder %d", i)
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel holder %d", i) })
		})
		p.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { log.add("queued %d never", i) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("queued %d, inside %d", m.Stats().Queued, m.Stats().Inside)
				if i == 2 {
					as.Break()
				}
				as.Continue()
			})
		})
	})
	root.Add(log.step("after"))
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "holder 0", "queued 1, inside 1", "cancel holder 0",
		"holder 1", "queued 1, inside 1", "cancel holder 1",
		"holder 2", "queued 1, inside 1", "cancel holder 2", "after")
	if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
		t.Fatalf("mutex %+v", s)
	}
	root.Release()
	semClean(t, l)
}

// A labelled loop copied by Clone and CopyFrom keeps its label.
func TestSemLoopLabelCopied(t *testing.T) {
	for _, how := range []string{"Clone", "CopyFrom", "CopyFrom in a step"} {
		t.Run(how, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			model := l.NewSteps()
			model.Repeat(3, func(as vm.AsyncSteps, i int) {
				as.Loop(func(as vm.AsyncSteps) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						log.add("%d", i)
						if i == 1 {
							as.Break("OUT")
						}
						as.Continue("OUT")
					})
				}, "IN")
			}, "OUT")
			model.Add(log.step("after"))
			var run vm.AsyncSteps
			switch how {
			case "Clone":
				run = model.Clone()
			case "CopyFrom":
				run = l.NewSteps().CopyFrom(model)
			default:
				run = l.NewSteps()
				run.Add(func(as vm.AsyncSteps, _ vm.Args) { as.CopyFrom(model) })
			}
			f := run.Promise()
			l.RunUntilIdle()
			semOK(t, f)
			semExpect(t, &log, "0", "1", "after")
			run.Release()
			model.Release()
			semClean(t, l)
		})
	}
}

// Many iterations left by each kind of exit keep the arena's use flat and
// leave no timer behind.
func TestSemLoopManyExitsFlat(t *testing.T) {
	kinds := []string{"continue sub", "continue handler", "continue branch", "break inner", "error inner",
		"success", "timeout continue", "break labelled from branch", "continue from sync"}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			l, clk := semLoop()
			root := l.NewSteps()
			const n = 20000
			var mid, end int64
			var midSlots, endSlots int
			m := vm.NewMutex(1, vm.Unbounded)
			root.Repeat(n, func(as vm.AsyncSteps, i int) {
				if i == n/4 {
					mid, midSlots = l.Stats().ArenaInUse, vm.SlotsInUse(root)
				}
				if i == n-1 {
					end, endSlots = l.Stats().ArenaInUse, vm.SlotsInUse(root)
				}
				as.StackRaw(24, func(unsafe.Pointer) {})
				as.SetTimeout(time.Hour)
				switch kind {
				case "continue sub":
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(time.Hour)
						as.Continue()
					})
				case "continue handler":
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") },
						func(as vm.AsyncSteps, code string) { as.Continue() })
				case "continue branch":
					p := as.Parallel()
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Hour) })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Continue() })
				case "break inner":
					as.Loop(func(as vm.AsyncSteps) {
						as.StackRaw(8, nil)
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Break() })
					}, "X")
				case "error inner":
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Repeat(2, func(as vm.AsyncSteps, j int) { as.Error("E") })
					}, func(as vm.AsyncSteps, code string) { as.Success() })
				case "success":
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1)) })
				case "break labelled from branch":
					as.Loop(func(as vm.AsyncSteps) {
						p := as.Parallel()
						p.Loop(func(as vm.AsyncSteps) {
							as.StackRaw(8, func(unsafe.Pointer) {})
							as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Break("B") })
						}, "IN")
						p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Hour) })
					}, "B")
				case "continue from sync":
					as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Continue() })
					})
				case "timeout continue":
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(0)
					}, func(as vm.AsyncSteps, code string) { as.Continue() })
				}
			})
			f := root.Promise()
			for i := 0; i < n+10 && l.Stats().RunningRoots > 0; i++ {
				l.RunUntilIdle()
				clk.Advance(time.Millisecond)
			}
			semOK(t, f)
			if end > mid || endSlots > midSlots {
				t.Fatalf("arena in use grew from %d to %d, slots from %d to %d", mid, end, midSlots, endSlots)
			}
			if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
				t.Fatalf("mutex %+v", s)
			}
			root.Release()
			semClean(t, l)
		})
	}
}

// An error handler of one flow that another flow's step runs (by failing
// its waiting step through a kept handle) breaks or continues its own
// loop; the calling step goes on undisturbed.
func TestSemLoopCtlFromHandlerRunByOtherFlow(t *testing.T) {
	for _, ctl := range []string{"Break", "Continue"} {
		t.Run(ctl, func(t *testing.T) {
			l, _ := semLoop()
			var log semLog
			var waiting vm.AsyncSteps
			a := l.NewSteps()
			a.Repeat(2, func(as vm.AsyncSteps, i int) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					waiting = as
					as.StackRaw(8, func(unsafe.Pointer) { log.add("a destroy %d", i) })
					as.SetCancel(func(vm.AsyncSteps) { log.add("a cancel %d", i) })
				}, func(as vm.AsyncSteps, code string) {
					log.add("a handler %d %s", i, code)
					semLoopCtl(as, ctl)
				})
			})
			a.Add(log.step("a after"))
			b := l.NewSteps()
			b.Repeat(2, func(as vm.AsyncSteps, i int) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					if waiting.Valid() {
						waiting.Error("E")
					}
					log.add("b went on %d", i)
					as.Add(log.step("b sub"))
				})
			})
			fa, fb := a.Promise(), b.Promise()
			l.RunUntilIdle()
			semOK(t, fa)
			semOK(t, fb)
			want := []string{"a cancel 0", "a handler 0 E", "a destroy 0", "b went on 0"}
			if ctl == "Continue" {
				want = append(want, "b sub", "a cancel 1", "a handler 1 E", "a destroy 1", "b went on 1", "b sub", "a after")
			} else {
				want = append(want, "a after", "b sub", "b went on 1", "b sub")
			}
			semExpect(t, &log, want...)
			a.Release()
			b.Release()
			semClean(t, l)
		})
	}
}

// Break or Continue from a branch while a sibling's cancel handler, or a
// destroy callback of a frame left, cancels or releases the root: the flow
// ends once, canceled, and nothing is left.
func TestSemLoopCtlFromBranchEndsRootMeanwhile(t *testing.T) {
	for _, in := range []string{"cancel", "destroy"} {
		for _, how := range []string{"Cancel", "Release", "Cancel+Execute"} {
			for _, ctl := range []string{"Break", "Continue"} {
				t.Run(in+"/"+how+"/"+ctl, func(t *testing.T) {
					l, _ := semLoop()
					var log semLog
					root := l.NewSteps()
					var fut *vm.Future
					end := func() {
						log.add("%s from %s", how, in)
						switch how {
						case "Cancel":
							root.Cancel()
						case "Release":
							root.Release()
						case "Cancel+Execute":
							root.Cancel()
							root.Add(log.step("rerun"))
							root.Execute()
						}
					}
					root.Loop(func(as vm.AsyncSteps) {
						as.StackRaw(8, func(unsafe.Pointer) { log.add("destroy iter") })
						p := as.Parallel()
						p.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.StackRaw(8, func(unsafe.Pointer) {
								log.add("destroy sib")
								if in == "destroy" {
									end()
								}
							})
							as.SetCancel(func(vm.AsyncSteps) {
								log.add("cancel sib")
								if in == "cancel" {
									end()
								}
							})
						})
						p.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.SetCancel(func(vm.AsyncSteps) { log.add("cancel sib2") })
							as.Tool().Immediate(func() {})
						})
						p.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.Add(func(as vm.AsyncSteps, _ vm.Args) {
								semLoopCtl(as, ctl)
							})
						})
					})
					root.Add(log.step("after"))
					fut = root.Promise()
					l.RunUntilIdle()
					l.RunUntilIdle()
					_, err := semResult(t, fut)
					if !errors.Is(err, vm.ErrCanceled) {
						t.Fatalf("got %v; log %q", err, log.lines)
					}
					if how != "Release" {
						root.Release()
					}
					semClean(t, l)
				})
			}
		}
	}
}

// A body that completes its iteration (Success, or a Resumer's Success
// from inside the call, which takes effect in a later turn) and then calls
// Break or Continue through the handle: the first is misuse of a step
// that has ended; the second leaves the loop as asked.
func TestSemLoopCtlAfterBodyCompleted(t *testing.T) {
	for _, how := range []string{"Success", "Resumer"} {
		for _, ctl := range []string{"Break", "Continue"} {
			t.Run(how+"/"+ctl, func(t *testing.T) {
				r := semStart(func(root vm.AsyncSteps, log *semLog) {
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Repeat(3, func(as vm.AsyncSteps, i int) {
							log.add("iter %d", i)
							if how == "Success" {
								as.Success()
							} else {
								as.Resumer().Success()
							}
							semLoopCtl(as, ctl)
						})
					}, func(as vm.AsyncSteps, code string) { log.add("handler %s: %s", code, as.State().ErrorInfo()) })
					root.Add(log.step("after"))
				})
				r.advance(time.Millisecond)
				switch {
				case how == "Success":
					semFail(t, r.f, vm.InternalError)
					if len(r.log.lines) != 2 || r.log.lines[0] != "iter 0" {
						t.Fatalf("log %q", r.log.lines)
					}
				case ctl == "Break":
					semOK(t, r.f)
					semExpect(t, r.log, "iter 0", "after")
				default:
					semOK(t, r.f)
					semExpect(t, r.log, "iter 0", "iter 1", "iter 2", "after")
				}
				r.root.Release()
				semClean(t, r.l)
			})
		}
	}
}

// A loop that an error handler adds runs as the handler's step's
// sub-step: its Break ends it and the flow goes on after that step; a
// Continue with the label of a loop around the failed step reaches it.
func TestSemLoopAddedByErrorHandler(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(2, func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
				as.Repeat(3, func(as vm.AsyncSteps, j int) {
					log.add("%d.%d", i, j)
					if i == 1 {
						as.Continue("OUT")
					}
					if j == 1 {
						as.Break()
					}
				})
			})
			as.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("%d after", i) })
		}, "OUT")
		root.Add(log.step("done"))
	}, "0.0", "0.1", "0 after", "1.0", "done")
}

// Repeat with the largest and smallest counts.
func TestSemRepeatExtremeCounts(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(math.MaxInt, func(as vm.AsyncSteps, i int) {
			log.add("%d", i)
			if i == 2 {
				as.Break()
			}
		})
		root.Repeat(math.MinInt, func(as vm.AsyncSteps, i int) { log.add("never") })
		root.Add(log.step("done"))
	}, "0", "1", "2", "done")
}

// Break and Continue from a branch while a sibling waits in a Throttle's
// or a Limiter's rate queue take the sibling out of the queue: the next
// period admits the entries still wanted, none of the canceled.
func TestSemLoopCtlFromBranchWithSiblingRateQueued(t *testing.T) {
	for _, prim := range []string{"Throttle", "Limiter"} {
		t.Run(prim, func(t *testing.T) {
			l, clk := semLoop()
			var s vm.ISync
			switch prim {
			case "Throttle":
				s = vm.NewThrottle(l, 1, time.Second, vm.Unbounded)
			default:
				s = vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 4, MaxQueue: vm.Unbounded, Rate: 1, Period: time.Second, Burst: vm.Unbounded})
			}
			var log semLog
			root := l.NewSteps()
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				p := as.Parallel()
				for k := range 2 {
					p.Sync(s, func(as vm.AsyncSteps, _ vm.Args) {
						log.add("in %d.%d", i, k)
						as.SetTimeout(time.Hour)
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel %d.%d", i, k) })
					})
				}
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						if i == 2 {
							as.Break()
						}
						as.Continue()
					})
				})
			})
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Sync(s, log.step("after"))
			})
			f := root.Promise()
			for range 6 {
				l.RunUntilIdle()
				clk.Advance(time.Second)
			}
			l.RunUntilIdle()
			semOK(t, f)
			// The period's entry went to 0.0; the others waited until canceled.
			semExpect(t, &log, "in 0.0", "cancel 0.0", "after")
			root.Release()
			semClean(t, l)
		})
	}
}
