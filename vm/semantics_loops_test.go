package vm_test

import (
	"math"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Loop and MakeLoop run the body until Break; the step after the loop
// runs once, with no values.
func TestSemLoopBreak(t *testing.T) {
	adders := map[string]func(as vm.AsyncSteps, fn func(vm.AsyncSteps)){
		"Loop":     func(as vm.AsyncSteps, fn func(vm.AsyncSteps)) { as.Loop(fn) },
		"MakeLoop": func(as vm.AsyncSteps, fn func(vm.AsyncSteps)) { as.MakeLoop(fn) },
	}
	for name, add := range adders {
		t.Run(name, func(t *testing.T) {
			semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					i := 0
					add(as, func(as vm.AsyncSteps) {
						i++
						log.add("iter %d", i)
						if i == 3 {
							as.Break()
						}
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("sub %d", i) })
					})
					as.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after got %d", a.Len()) })
				})
			}, "iter 1", "sub 1", "iter 2", "sub 2", "iter 3", "after got 0")
		})
	}
}

// Break from a sub-step of the body leaves the loop as well.
func TestSemLoopBreakFromSubStep(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		i := 0
		root.Loop(func(as vm.AsyncSteps) {
			i++
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Success(vm.Bool(i < 3))
			})
			as.Add(func(as vm.AsyncSteps, a vm.Args) {
				log.add("result %v", a.Bool(0))
				if !a.Bool(0) {
					as.Break()
				}
			})
		})
		root.Add(log.step("after"))
	}, "result true", "result true", "result false", "after")
}

// Repeat runs count times with i from 0; a count of zero or less runs
// nothing and the flow goes on.
func TestSemRepeat(t *testing.T) {
	for _, count := range []int{-5, -1, 0, 1, 4} {
		var want []string
		for i := range max(count, 0) {
			want = append(want, "i="+vm.Int(int64(i)).String())
		}
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Repeat(count, func(as vm.AsyncSteps, i int) { log.add("i=%d", i) })
			})
			root.Add(log.step("after"))
		}, append(want, "after")...)
	}
}

// ForEach visits every element in order; an empty slice visits nothing.
func TestSemForEach(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		type item struct {
			name string
			n    int
		}
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			vm.ForEach(as, []item{{"a", 1}, {"b", 2}, {"c", 3}}, func(as vm.AsyncSteps, i int, v item) {
				log.add("%d=%s/%d", i, v.name, v.n)
			})
			vm.ForEach(as, []int(nil), func(as vm.AsyncSteps, i int, v int) { log.add("nil slice visited") })
			vm.ForEach(as, []float64{}, func(as vm.AsyncSteps, i int, v float64) { log.add("empty slice visited") })
		})
		root.Add(log.step("after"))
	}, "0=a/1", "1=b/2", "2=c/3", "after")
}

// ForEachMap visits the entries in the order of sorted keys.
func TestSemForEachMap(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			vm.ForEachMap(as, map[string]int{"pear": 3, "apple": 1, "fig": 2, "banana": 9, "cherry": 0},
				func(as vm.AsyncSteps, k string, v int) { log.add("%s=%d", k, v) })
			vm.ForEachMap(as, map[int]string{10: "ten", -1: "minus", 3: "three"},
				func(as vm.AsyncSteps, k int, v string) { log.add("%d=%s", k, v) })
			vm.ForEachMap(as, map[float64]bool{}, func(as vm.AsyncSteps, k float64, v bool) { log.add("empty map visited") })
		})
	},
		"apple=1", "banana=9", "cherry=0", "fig=2", "pear=3",
		"-1=minus", "3=three", "10=ten",
	)
}

// ForEachMap visits a NaN key, which no lookup finds, with its value, as
// a range over the map does; NaNs sort first.
func TestSemForEachMapNaNKey(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		vm.ForEachMap(root, map[float64]string{2: "two", math.NaN(): "nan", 1: "one"},
			func(as vm.AsyncSteps, k float64, v string) { log.add("%v=%s", k, v) })
	}, "NaN=nan", "1=one", "2=two")
}

// A body that changes the map it iterates sees what a range over the map
// would: an entry deleted before its iteration is not visited, a key added
// is not, and a value changed before its iteration is read as changed.
func TestSemForEachMapMutatedByBody(t *testing.T) {
	m := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4}
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		vm.ForEachMap(root, m, func(as vm.AsyncSteps, k string, v int) {
			log.add("%s=%d", k, v)
			if k == "a" {
				delete(m, "b")
				m["c"] = 30
				m["aa"] = 11
			}
		})
	}, "a=1", "c=30", "d=4")
}

// Continue skips the rest of the iteration (its queued sub-steps) and
// starts the next one.
func TestSemLoopContinue(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(4, func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				if i%2 == 1 {
					as.Continue()
				}
				log.add("even %d", i)
			})
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("tail %d", i) })
		})
		root.Add(log.step("after"))
	}, "even 0", "tail 0", "even 2", "tail 2", "after")
}

// Break and Continue with a label reach the labelled loop through nested
// loops and sub-steps several levels deep; the cancel handlers of the steps
// they leave run (innermost first), their error handlers do not.
func TestSemLoopLabelledBreakDeep(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		handler := func(name string) vm.ErrorFunc {
			return func(as vm.AsyncSteps, code string) { log.add("%s handler %s must not run", name, code) }
		}
		outerIter := 0
		root.Loop(func(as vm.AsyncSteps) {
			outerIter++
			log.add("outer %d", outerIter)
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel level1") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Repeat(5, func(as vm.AsyncSteps, j int) {
						log.add("inner %d", j)
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							as.SetCancel(func(vm.AsyncSteps) { log.add("cancel level3") })
							as.Add(func(as vm.AsyncSteps, _ vm.Args) {
								if j == 1 && outerIter == 2 {
									as.Break("OUTER")
								}
								if j == 1 {
									as.Continue("OUTER")
								}
							}, handler("level4"))
						}, handler("level3"))
					}, "INNER")
					as.Add(log.step("after inner never"))
				}, handler("level2"))
			}, handler("level1"))
		}, "OUTER")
		root.Add(log.step("after outer"))
	},
		"outer 1", "inner 0", "inner 1", "cancel level3", "cancel level1",
		"outer 2", "inner 0", "inner 1", "cancel level3", "cancel level1",
		"after outer",
	)
}

// Continue("OUTER") from an inner loop skips the rest of the outer
// iteration.
func TestSemLoopContinueOuter(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(3, func(as vm.AsyncSteps, i int) {
			log.add("outer %d", i)
			as.Loop(func(as vm.AsyncSteps) {
				log.add("inner %d", i)
				as.Continue("OUTER")
			})
			as.Add(log.step("after inner never"))
		}, "OUTER")
		root.Add(log.step("done"))
	}, "outer 0", "inner 0", "outer 1", "inner 1", "outer 2", "inner 2", "done")
}

// Unlabelled Break and Continue act on the innermost loop.
func TestSemLoopUnlabelledInnermost(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(2, func(as vm.AsyncSteps, i int) {
			as.Repeat(3, func(as vm.AsyncSteps, j int) {
				if j == 1 {
					as.Continue()
				}
				if j == 2 {
					as.Break()
				}
				log.add("%d.%d", i, j)
			})
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("%d after inner", i) })
		})
	}, "0.0", "0 after inner", "1.0", "1 after inner")
}

// An error inside a loop leaves it for the outer handler; an error handled
// inside the body lets the loop go on.
func TestSemLoopErrors(t *testing.T) {
	t.Run("unhandled in body", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Repeat(10, func(as vm.AsyncSteps, i int) {
					log.add("iter %d", i)
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						if i == 2 {
							as.Error("LoopErr", "at 2")
						}
					})
				})
				as.Add(log.step("after loop never"))
			}, func(as vm.AsyncSteps, code string) {
				log.add("outer handler %s %s", code, as.State().ErrorInfo())
				as.Success()
			})
			root.Add(log.step("next"))
		}, "iter 0", "iter 1", "iter 2", "outer handler LoopErr at 2", "next")
	})
	t.Run("handled in body", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Repeat(3, func(as vm.AsyncSteps, i int) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Error("E")
				}, func(as vm.AsyncSteps, code string) {
					log.add("handled %d", i)
					as.Success()
				})
			})
			root.Add(log.step("after"))
		}, "handled 0", "handled 1", "handled 2", "after")
	})
	t.Run("break in error handler", func(t *testing.T) {
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Loop(func(as vm.AsyncSteps) {
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					log.add("body")
					as.Error("Stop")
				}, func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					as.Break()
				})
			})
			root.Add(log.step("after"))
		}, "body", "handler Stop", "after")
	})
}

// Break or Continue outside any loop, or with a label no enclosing loop
// has, is InternalError.
func TestSemLoopControlOutsideLoop(t *testing.T) {
	cases := []struct {
		name  string
		setup func(root vm.AsyncSteps, body vm.ExecFunc)
		body  vm.ExecFunc
		words []string
	}{
		{"Break", nil, func(as vm.AsyncSteps, _ vm.Args) { as.Break() }, []string{"Break", "loop"}},
		{"Continue", nil, func(as vm.AsyncSteps, _ vm.Args) { as.Continue() }, []string{"Continue", "loop"}},
		{"unknown label", func(root vm.AsyncSteps, body vm.ExecFunc) {
			root.Loop(func(as vm.AsyncSteps) { as.Add(body) }, "REAL")
		}, func(as vm.AsyncSteps, _ vm.Args) { as.Break("NOPE") }, []string{"NOPE"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := semRunFail(t, vm.InternalError, func(root vm.AsyncSteps, log *semLog) {
				if c.setup != nil {
					c.setup(root, c.body)
				} else {
					root.Add(c.body)
				}
				root.Add(log.step("next never"))
			})
			semInfoMentions(t, e.Info, c.words...)
		})
	}
}

// Break or Continue outside any loop from an error handler leaves the
// handler's step with InternalError, as an error the handler raised: the
// handler is not run a second time, the outer handler gets the error.
func TestSemLoopControlOutsideLoopFromHandler(t *testing.T) {
	for _, what := range []string{"Break", "Continue"} {
		t.Run(what, func(t *testing.T) {
			semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Boom") },
						func(as vm.AsyncSteps, code string) {
							log.add("inner %s", code)
							if what == "Break" {
								as.Break()
							}
							as.Continue()
						})
				}, func(as vm.AsyncSteps, code string) {
					log.add("outer %s: %s", code, as.State().ErrorInfo())
					as.Success()
				})
				root.Add(log.step("after"))
			}, "inner Boom", "outer InternalError: "+what+" outside of a loop", "after")
		})
	}
}

// A loop runs inside a parallel branch, interleaved with its siblings.
func TestSemLoopInBranch(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		p := root.Parallel()
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Repeat(3, func(as vm.AsyncSteps, i int) { log.add("loop %d", i) })
			as.Add(log.step("loop branch done"))
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(log.step("other 1"))
			as.Add(log.step("other 2"))
		})
		root.Add(log.step("after"))
	}, "loop 0", "other 1", "loop 1", "other 2", "loop 2", "loop branch done", "after")
}

// Break from inside a branch to a loop outside the parallel cancels the
// sibling branches and leaves the loop.
func TestSemLoopBreakOutOfParallel(t *testing.T) {
	for _, label := range []string{"", "L"} {
		t.Run("label="+label, func(t *testing.T) {
			semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
				iter := 0
				root.Loop(func(as vm.AsyncSteps) {
					iter++
					log.add("iter %d", iter)
					p := as.Parallel(func(as vm.AsyncSteps, code string) { log.add("parallel handler must not run") })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetCancel(func(vm.AsyncSteps) { log.add("cancel waiting sibling") })
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(log.step("queued sibling 1"))
						as.Add(log.step("queued sibling 2 never"))
					})
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) {
							if label == "" {
								as.Break()
							}
							as.Break(label)
						})
					})
					as.Add(log.step("after parallel never"))
				}, label)
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("after loop, %d iteration(s)", iter) })
			}, "iter 1", "queued sibling 1", "cancel waiting sibling", "after loop, 1 iteration(s)")
		})
	}
}

// Continue from inside a branch to a loop outside the parallel cancels the
// siblings and starts the next iteration.
func TestSemLoopContinueOutOfParallel(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(2, func(as vm.AsyncSteps, i int) {
			p := as.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetCancel(func(vm.AsyncSteps) { log.add("cancel sibling %d", i) })
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Continue() })
			as.Add(log.step("after parallel never"))
		})
		root.Add(log.step("after loop"))
	}, "cancel sibling 0", "cancel sibling 1", "after loop")
}

// A loop does not keep values: the step after it gets none, even when the
// last iteration succeeded with some.
func TestSemLoopResultHasNoValues(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(2, func(as vm.AsyncSteps, i int) { as.Success(vm.Int(int64(i))) })
		root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after got %d", a.Len()) })
	}, "after got 0")
}

// The handle of an earlier iteration is stale in the next one, even when
// the loop reuses the iteration's memory: it is not Valid, and completing
// through it is InternalError without touching the current iteration.
func TestSemLoopStaleIterationHandle(t *testing.T) {
	for _, use := range []string{"valid", "Success", "Add", "Break"} {
		t.Run(use, func(t *testing.T) {
			var prev vm.AsyncSteps
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Repeat(3, func(as vm.AsyncSteps, i int) {
						log.add("iter %d", i)
						if i == 1 {
							switch use {
							case "valid":
								log.add("prev valid=%v", prev.Valid())
							case "Success":
								prev.Success()
							case "Add":
								prev.Add(log.step("added through stale never"))
							case "Break":
								prev.Break()
							}
						}
						prev = as
					})
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
			})
			if use == "valid" {
				semOK(t, r.f)
				semExpect(t, r.log, "iter 0", "iter 1", "prev valid=false", "iter 2")
				return
			}
			semFail(t, r.f, vm.InternalError)
			semExpect(t, r.log, "iter 0", "iter 1", "handler InternalError")
		})
	}
}

// A loop that never waits does not starve the rest of the loop: timers,
// other flows' steps and Immediate callbacks get their turns, so a flag
// they set can end it. A lone loop's pass runs some 256 iterations; a
// timer that was due waited for 66,049 when the dispatch's budget and the
// loop's own were nested rather than shared.
func TestSemBusyLoopIsFair(t *testing.T) {
	for _, by := range []string{"timer", "immediate", "other flow", "post"} {
		t.Run(by, func(t *testing.T) {
			l, _ := semLoop()
			stop := false
			iters := 0
			root := l.NewSteps()
			root.Loop(func(as vm.AsyncSteps) {
				iters++
				if stop {
					as.Break()
				}
				if iters > 10_000_000 && by != "post" {
					as.Error("Starved")
				}
			})
			f := root.Promise()
			switch by {
			case "timer":
				l.Deferred(0, func() { stop = true })
			case "immediate":
				l.Immediate(func() { l.Immediate(func() { stop = true }) })
			case "other flow":
				other := l.NewSteps()
				other.Add(func(vm.AsyncSteps, vm.Args) {})
				other.Add(func(vm.AsyncSteps, vm.Args) { stop = true })
				other.Execute()
			case "post":
				go l.Post(func() { stop = true })
			}
			semDrive(l, f)
			semOK(t, f)
			// A Post comes from another goroutine, whenever it is scheduled:
			// only its delivery is checked.
			if iters > 1_000 && by != "post" {
				t.Fatalf("the flag took %d iterations to be seen", iters)
			}
		})
	}
}

// Loop iterations can wait for external events; a Resumer of an earlier
// iteration is refused in a later one.
func TestSemLoopIterationWaits(t *testing.T) {
	l, _ := semLoop()
	root := l.NewSteps()
	var log semLog
	var resumers []vm.Resumer
	root.Repeat(3, func(as vm.AsyncSteps, i int) {
		log.add("iter %d", i)
		resumers = append(resumers, as.Resumer())
		as.WaitExternal()
	})
	root.Add(log.step("after"))
	f := root.Promise()
	for i := range 3 {
		l.RunUntilIdle()
		if len(resumers) != i+1 {
			t.Fatalf("iteration %d did not wait", i)
		}
		for j := range i {
			if resumers[j].Success() {
				t.Fatalf("Resumer of iteration %d accepted in iteration %d", j, i)
			}
		}
		if !resumers[i].Success() {
			t.Fatalf("Resumer of iteration %d refused", i)
		}
	}
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, &log, "iter 0", "iter 1", "iter 2", "after")
}

// Continue from an error handler inside a loop starts the next iteration.
func TestSemLoopContinueInErrorHandler(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(3, func(as vm.AsyncSteps, i int) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.Error("E")
			}, func(as vm.AsyncSteps, code string) {
				log.add("handler %d", i)
				as.Continue()
			})
			as.Add(log.step("rest never"))
		})
		root.Add(log.step("after"))
	}, "handler 0", "handler 1", "handler 2", "after")
}

// When nested loops share a label, Break with it leaves the innermost one.
func TestSemLoopSameLabelInnermost(t *testing.T) {
	semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
		root.Repeat(2, func(as vm.AsyncSteps, i int) {
			as.Repeat(3, func(as vm.AsyncSteps, j int) {
				log.add("%d.%d", i, j)
				as.Break("L")
			}, "L")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("%d after inner", i) })
		}, "L")
	}, "0.0", "0 after inner", "1.0", "1 after inner")
}
