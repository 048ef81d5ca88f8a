package vm_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Branches start in the order added, then interleave one turn each; within
// a branch, sub-steps run in order and pass values on.
func TestSemParallelInterleaves(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		branch := func(name string) vm.ExecFunc {
			return func(as vm.AsyncSteps, _ vm.Args) {
				log.add("%s", name)
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("%s.1", name)
					as.Success(vm.Str(name + "-v"))
				})
				as.Add(func(as vm.AsyncSteps, a vm.Args) {
					log.add("%s.2 got %s", name, a.String(0))
				})
			}
		}
		root.Add(log.step("before"))
		root.Parallel().Add(branch("a")).Add(branch("b")).Add(branch("c"))
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after got %d", a.Len()) })
	},
		"before",
		"a", "b", "c",
		"a.1", "b.1", "c.1",
		"a.2 got a-v", "b.2 got b-v", "c.2 got c-v",
		"after got 0",
	)
}

// The parallel step completes only when its slowest branch has.
func TestSemParallelWaitsForEveryBranch(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel()
		p.Add(log.step("fast"))
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("slow starts")
			as.WaitExternal()
			as.Tool().Deferred(10*time.Millisecond, func() {
				log.add("slow done")
				as.Success(vm.Int(1))
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(log.step("medium.1"))
			as.Add(log.step("medium.2"))
		})
		root.Add(log.step("after"))
	})
	semExpect(t, r.log, "fast", "slow starts", "medium.1", "medium.2")
	r.advance(9 * time.Millisecond)
	semPending(t, r.f)
	r.advance(time.Millisecond)
	semOK(t, r.f)
	semExpect(t, r.log, "fast", "slow starts", "medium.1", "medium.2", "slow done", "after")
}

// The first error cancels the other branches, innermost cancel handler
// first, and goes to the parallel's error handler; canceled branches run
// no further step.
func TestSemParallelAbort(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			p := as.Parallel(func(as vm.AsyncSteps, code string) {
				log.add("parallel handler %s %s", code, as.State().ErrorInfo())
				as.Success(vm.Str("handled"))
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("a")
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel a") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("a.1")
					as.SetCancel(func(vm.AsyncSteps) { log.add("cancel a.1") })
				}, func(as vm.AsyncSteps, code string) { log.add("a.1 handler must not run") })
			}, func(as vm.AsyncSteps, code string) { log.add("a handler must not run") })
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("b")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("b.1")
					as.Error("Boom", "b failed")
				})
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("c")
				as.Add(log.step("c.1"))
				as.Add(log.step("c.2 never"))
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("d")
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel d") })
			})
		})
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after got %s", a.String(0)) })
	},
		"a", "b", "c", "d",
		"a.1", "b.1",
		"cancel a.1", "cancel a", "cancel d",
		"parallel handler Boom b failed",
		"after got handled",
	)
}

// An error leaving a parallel without a handler goes to the enclosing
// handler; the other branches are canceled.
func TestSemParallelErrorToOuterHandler(t *testing.T) {
	semRunFail(t, "Boom", func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel waiting") })
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") })
			as.Add(log.step("after parallel never"))
		}, func(as vm.AsyncSteps, code string) {
			log.add("outer handler %s", code)
		})
		root.Add(log.step("level0 never"))
	}, "cancel waiting", "outer handler Boom")
}

// A second branch error after the abort does not reach the handler twice.
func TestSemParallelOnlyFirstError(t *testing.T) {
	semRunFail(t, "First", func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First") })
		p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Second") })
	}, "handler First")
}

// An empty parallel step completes at once, at level 0 and as a sub-step.
func TestSemParallelEmpty(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Parallel()
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("after level0 parallel")
			as.Parallel()
			as.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after sub parallel got %d", a.Len()) })
		})
	}, "after level0 parallel", "after sub parallel got 0")
}

// Loop, Repeat, ForEach and ForEachMap on the accessor add one branch each;
// the branches interleave by iteration.
func TestSemParallelLoopBranches(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel()
		n := 0
		p.Loop(func(as vm.AsyncSteps) {
			n++
			if n == 3 {
				log.add("L break")
				as.Break()
			}
			log.add("L%d", n)
		})
		p.Repeat(2, func(as vm.AsyncSteps, i int) { log.add("R%d", i) })
		vm.ForEach(p, []string{"x", "y"}, func(as vm.AsyncSteps, i int, v string) { log.add("F%d=%s", i, v) })
		vm.ForEachMap(p, map[string]int{"k": 1}, func(as vm.AsyncSteps, k string, v int) { log.add("M%s=%d", k, v) })
		p.Add(log.step("plain"))
		root.Add(log.step("after"))
	},
		"L1", "R0", "F0=x", "Mk=1", "plain",
		"L2", "R1", "F1=y",
		"L break",
		"after",
	)
}

// Adding branches once the parallel step has started is InternalError of
// the flow that tries.
func TestSemParallelAddAfterStart(t *testing.T) {
	semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
		var p vm.AsyncSteps
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			p = as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				log.add("branch 1")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					// Branch 2 has started by now.
					p.Add(log.step("late branch never"))
					log.add("Add returned")
				})
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel branch 2") })
			})
		}, func(as vm.AsyncSteps, code string) {
			log.add("handler %s", code)
			semInfoMentions(t, as.State().ErrorInfo(), "parallel")
		})
	}, "branch 1", "cancel branch 2", "handler InternalError")
}

// Branches share the flow's state.
func TestSemParallelSharedState(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel()
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.State().Set("from a", 1)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				v, ok := as.State().Get("from b")
				log.add("a sees b: %v %v", v, ok)
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			v, ok := as.State().Get("from a")
			log.add("b sees a: %v %v", v, ok)
			as.State().Set("from b", 2)
		})
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("after: %v %v", as.State().Exists("from a"), as.State().Exists("from b"))
		})
	}, "b sees a: 1 true", "a sees b: 2 true", "after: true true")
}

// Nested parallels: an error deep in an inner parallel cancels the inner
// siblings, then the outer ones.
func TestSemParallelNestedAbort(t *testing.T) {
	semRunFail(t, "Deep", func(root vm.AsyncSteps, log *semLog) {
		outer := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("outer handler %s", code) })
		outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
			inner := as.Parallel(func(as vm.AsyncSteps, code string) { log.add("inner handler %s", code) })
			inner.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel inner sibling") })
			})
			inner.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Deep") })
			})
		})
		outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer sibling") })
		})
	}, "cancel inner sibling", "inner handler Deep", "cancel outer sibling", "outer handler Deep")
}

// Break or Continue of a loop from a branch of a parallel step that runs in
// a branch of another parallel step, the loop's body: the inner sibling,
// the outer branch's step and the outer sibling are canceled in that order
// (innermost first), once each, no parallel handler runs, and nothing is
// left behind.
func TestSemParallelNestedBreaksOuterLoop(t *testing.T) {
	for _, ctl := range []string{"break", "continue"} {
		t.Run(ctl, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				iter := 0
				root.Loop(func(as vm.AsyncSteps) {
					iter++
					i := iter
					log.add("iter %d", i)
					if i == 3 {
						as.Break()
					}
					handler := func(as vm.AsyncSteps, code string) { log.add("handler never %s", code) }
					outer := as.Parallel(handler)
					outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer branch %d", i) })
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							inner := as.Parallel(handler)
							inner.Add(func(as vm.AsyncSteps, _ vm.Args) {
								as.SetCancel(func(vm.AsyncSteps) { log.add("cancel inner sibling %d", i) })
							})
							inner.Add(func(as vm.AsyncSteps, _ vm.Args) {
								as.Add(func(as vm.AsyncSteps, _ vm.Args) {
									if ctl == "break" {
										as.Break()
									}
									as.Continue()
								})
							})
						})
					})
					outer.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel outer sibling %d", i) })
					})
					as.Add(log.step("after parallel never"))
				})
				root.Add(log.step("after loop"))
			})
			semOK(t, r.f)
			want := []string{"iter 1", "cancel inner sibling 1", "cancel outer branch 1", "cancel outer sibling 1"}
			if ctl == "continue" {
				want = append(want, "iter 2", "cancel inner sibling 2", "cancel outer branch 2", "cancel outer sibling 2", "iter 3")
			}
			semExpect(t, r.log, append(want, "after loop")...)
			semClean(t, r.l)
		})
	}
}

// Timeouts of four branches due in the same pass: the first aborts the
// parallel step, whose handler may add a step with a timeout of its own,
// and the others are stopped unfired, their steps canceled once each; or
// each branch's handler recovers its own timeout in turn.
func TestSemParallelTimeoutsInOnePass(t *testing.T) {
	for _, how := range []string{"abort", "handler adds timed step", "each recovers"} {
		t.Run(how, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				p := root.Parallel(func(as vm.AsyncSteps, code string) {
					log.add("parallel handler %s", code)
					if how == "handler adds timed step" {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							log.add("timed")
							as.SetTimeout(time.Millisecond)
						}, func(as vm.AsyncSteps, code string) { log.add("timed handler %s", code) })
					}
				})
				for i := range 4 {
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(time.Millisecond)
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel %d", i) })
					}, func(as vm.AsyncSteps, code string) {
						log.add("handler %d %s", i, code)
						if how == "each recovers" {
							as.Success()
						}
					})
				}
				root.Add(log.step("after"))
			})
			r.advance(time.Millisecond)
			r.advance(time.Millisecond)
			switch how {
			case "abort":
				semFail(t, r.f, vm.Timeout)
				semExpect(t, r.log, "cancel 0", "handler 0 Timeout", "cancel 1", "cancel 2", "cancel 3", "parallel handler Timeout")
			case "handler adds timed step":
				semFail(t, r.f, vm.Timeout)
				semExpect(t, r.log, "cancel 0", "handler 0 Timeout", "cancel 1", "cancel 2", "cancel 3", "parallel handler Timeout",
					"timed", "timed handler Timeout")
			case "each recovers":
				semOK(t, r.f)
				semExpect(t, r.log, "cancel 0", "handler 0 Timeout", "cancel 1", "handler 1 Timeout",
					"cancel 2", "handler 2 Timeout", "cancel 3", "handler 3 Timeout", "after")
			}
			semClean(t, r.l)
		})
	}
}

// Stack memory a parallel step's error handler takes is destroyed once
// when Break or Continue leaves the step from the handler or from a step
// the handler added, or when the root is canceled while that step waits.
func TestSemParallelHandlerStackLeftByLoopOrCancel(t *testing.T) {
	for _, how := range []string{"handler break", "handler continue", "added break", "cancel"} {
		t.Run(how, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Repeat(2, func(as vm.AsyncSteps, i int) {
					p := as.Parallel(func(as vm.AsyncSteps, code string) {
						log.add("handler %d %s", i, code)
						as.StackRaw(16, func(unsafe.Pointer) { log.add("destroy %d", i) })
						switch how {
						case "handler break":
							as.Break()
						case "handler continue":
							as.Continue()
						}
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							log.add("added %d", i)
							if how == "added break" {
								as.Break()
							}
							as.WaitExternal()
						})
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("X") })
					as.Add(log.step("after parallel never"))
				})
				root.Add(log.step("after loop"))
			})
			switch how {
			case "handler break":
				semExpect(t, r.log, "handler 0 X", "destroy 0", "after loop")
			case "handler continue":
				semExpect(t, r.log, "handler 0 X", "destroy 0", "handler 1 X", "destroy 1", "after loop")
			case "added break":
				semExpect(t, r.log, "handler 0 X", "added 0", "destroy 0", "after loop")
			case "cancel":
				semPending(t, r.f)
				r.root.Cancel()
				semExpect(t, r.log, "handler 0 X", "added 0", "destroy 0")
			}
			semResult(t, r.f)
			semClean(t, r.l)
		})
	}
}
