package vm_test

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// stkOn checks that the list the end of as's frame looks through holds
// want allocations, logging a mismatch.
func (s *stkProbe) stkOn(as vm.AsyncSteps, name string, want int) {
	if got := vm.StackListLen(as); got != want {
		s.log.add("%s: %d allocations on its thread's list, want %d", name, got, want)
	}
}

// stkEach is how many allocations stkProbe.alloc makes.
const stkEach = 5

// Stack memory taken through the handle of a waiting step from elsewhere
// (a sibling branch's step, a branch of a parallel nested in another
// branch, an Immediate, the test driving the loop, another root's step)
// goes on the list of that step's thread, and is destroyed when that step
// ends, with its own, newest first, exactly once.
func TestSemStackThreadsForeignHandles(t *testing.T) {
	l, clk := semLoop()
	s := &stkProbe{l: l, clk: clk, log: &semLog{}}
	var a1, b vm.AsyncSteps
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		s.alloc(as, "R")
		s.mark(0)
		p := as.Parallel()
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			s.alloc(as, "A")
			q := as.Parallel()
			q.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "A1")
				a1 = as
				as.WaitExternal()
			})
			q.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "A2")
				s.alloc(a1, "A2>A1")
				s.alloc(b, "A2>B")
				s.stkOn(as, "A2", stkEach)
				s.stkOn(a1, "A1", 2*stkEach)
				s.stkOn(b, "B", 2*stkEach)
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			s.alloc(as, "B")
			b = as
			as.WaitExternal()
		})
		as.Add(s.check("after parallel", 0))
	})
	f := root.Promise()
	l.RunUntilIdle()
	s.alloc(b, "out>B")
	s.stkOn(b, "B", 3*stkEach)
	l.Immediate(func() {
		s.alloc(a1, "imm>A1")
		s.stkOn(a1, "A1", 3*stkEach)
		s.stkOn(root, "root", -1)
		a1.Success()
	})
	l.RunUntilIdle()
	other := l.NewSteps()
	other.Add(func(as vm.AsyncSteps, _ vm.Args) {
		s.alloc(b, "other>B")
		s.stkOn(b, "B", 4*stkEach)
		b.Success()
	})
	of := other.Promise()
	l.RunUntilIdle()
	semOK(t, of)
	semOK(t, f)
	semExpect(t, s.log, stkSeq(
		stkDestroyed("A2"),
		stkDestroyed("imm>A1"), stkDestroyed("A2>A1"), stkDestroyed("A1"),
		stkDestroyed("A"),
		stkDestroyed("other>B"), stkDestroyed("out>B"), stkDestroyed("A2>B"), stkDestroyed("B"),
		"after parallel", stkDestroyed("R"))...)
	root.Release()
	other.Release()
	semClean(t, l)
}

// stkWaiting starts another root whose step takes memory O and waits; it
// returns a new probe on a fresh loop, that root, its Future and the
// handle of the waiting step, valid once the loop has run.
func stkWaiting() (s *stkProbe, other vm.AsyncSteps, f *vm.Future, waiting *vm.AsyncSteps) {
	l, clk := semLoop()
	s = &stkProbe{l: l, clk: clk, log: &semLog{}}
	waiting = new(vm.AsyncSteps)
	other = l.NewSteps()
	other.Add(func(as vm.AsyncSteps, _ vm.Args) {
		s.alloc(as, "O")
		*waiting = as
		as.WaitExternal()
	})
	return s, other, other.Promise(), waiting
}

// Error handlers take Stack memory on their frame's thread however they
// are run: by a timeout (no thread's turn runs), nested in another
// branch's handler, which fails their step through its handle, and a
// parallel step's handler reached from there. That first handler, whose
// branch has been freed under it meanwhile, then takes memory through
// another root's waiting step, which that step's end gives back.
func TestSemStackThreadsErrorHandlers(t *testing.T) {
	s, other, of, waiting := stkWaiting()
	l, clk := s.l, s.clk
	var b2 vm.AsyncSteps
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		s.mark(0)
		p := as.Parallel(func(as vm.AsyncSteps, code string) {
			s.log.add("parallel handler %s", code)
			s.alloc(as, "PH")
			s.stkOn(as, "PH", stkEach)
			as.Success()
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "T")
				as.SetTimeout(time.Second)
			}, func(as vm.AsyncSteps, code string) {
				s.log.add("T handler %s", code)
				s.alloc(as, "TH")
				s.stkOn(as, "TH", 2*stkEach)
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					s.stkOn(as, "T's recovery", 2*stkEach)
					b2 = as
					as.WaitExternal()
				}, func(as vm.AsyncSteps, code string) {
					s.log.add("B2 handler %s", code)
					s.alloc(as, "B2H")
					s.stkOn(as, "B2H", 3*stkEach)
				})
			})
		})
		p.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.SetTimeout(2 * time.Second)
			as.SetCancel(func(vm.AsyncSteps) { s.log.add("B1 canceled") })
		}, func(as vm.AsyncSteps, code string) {
			s.log.add("B1 handler %s", code)
			s.alloc(as, "B1")
			s.log.add("B1 fails B2")
			b2.Error("Fail")
			s.log.add("B1 goes on")
			s.alloc(*waiting, "B1>O")
			s.stkOn(*waiting, "O", 2*stkEach)
			waiting.Success()
		})
		as.Add(s.check("after parallel", 0))
	})
	f := root.Promise()
	l.RunUntilIdle()
	clk.Advance(time.Second + time.Millisecond)
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	semOK(t, f)
	semOK(t, of)
	semExpect(t, s.log, stkSeq(
		"T handler Timeout",
		"B1 canceled", "B1 handler Timeout", "B1 fails B2",
		"B2 handler Fail", stkDestroyed("B2H"), stkDestroyed("TH"), stkDestroyed("T"),
		stkDestroyed("B1"),
		"parallel handler Fail", stkDestroyed("PH"),
		"B1 goes on", stkDestroyed("B1>O"), stkDestroyed("O"),
		"after parallel")...)
	root.Release()
	other.Release()
	semClean(t, l)
}

// frameTag takes 64 bytes of memory owned by frame as through
// vm.FrameAlloc, logging tag when they are destroyed.
func (s *stkProbe) frameTag(as vm.AsyncSteps, tag string) {
	if vm.FrameAlloc(as, 64, func(unsafe.Pointer) { s.log.add("destroy %s", tag) }) == nil {
		s.log.add("FrameAlloc %s refused", tag)
	}
}

// vm.FrameAlloc on frames that are not innermost (a step whose sub-step
// runs, a started parallel step from its branch, a loop from its
// iteration) and from Stack destroy callbacks and cancel handlers (on the
// ending frame and its enclosing ones) puts the memory on its frame's
// thread's list: each is destroyed exactly once, when its frame ends.
func TestSemStackThreadsFrameAllocElsewhere(t *testing.T) {
	stkRun(t, func(s *stkProbe, root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { s.mark(0) })
		root.Add(func(outer vm.AsyncSteps, _ vm.Args) {
			var b2 vm.AsyncSteps
			p := outer.Parallel()
			p.Add(func(br vm.AsyncSteps, _ vm.Args) {
				s.frameTag(p, "b1>P")
				br.Repeat(2, func(it vm.AsyncSteps, i int) {
					it.Add(func(as vm.AsyncSteps, _ vm.Args) {
						s.frameTag(br, fmt.Sprintf("it%d>br", i))
						s.frameTag(it, fmt.Sprintf("it%d", i))
						as.StackRaw(8, func(unsafe.Pointer) {
							s.log.add("destroy step%d", i)
							s.frameTag(as, fmt.Sprintf("step%d self", i))
							s.frameTag(it, fmt.Sprintf("step%d>it", i))
							s.frameTag(p, fmt.Sprintf("step%d>P", i))
						})
					})
				})
				br.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetCancel(func(c vm.AsyncSteps) {
						s.log.add("b1 canceled")
						s.frameTag(c, "cancel self")
						s.frameTag(br, "cancel>br")
						s.frameTag(p, "cancel>P")
					})
					s.l.Immediate(func() { b2.Error("Stop") })
				})
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.frameTag(outer, "b2>outer")
				b2 = as
				as.WaitExternal()
			})
		}, func(as vm.AsyncSteps, code string) {
			s.log.add("outer handler %s", code)
			as.Success()
		})
		root.Add(s.check("after", 0))
	},
		"destroy step0", "destroy step0 self", "destroy step0>it", "destroy it0",
		"destroy step1", "destroy step1 self", "destroy step1>it", "destroy it1",
		"b1 canceled", "destroy cancel self",
		"destroy cancel>br", "destroy it1>br", "destroy it0>br",
		"destroy cancel>P", "destroy step1>P", "destroy step0>P", "destroy b1>P",
		"outer handler Stop", "destroy b2>outer", "after")
}

// A branch's step that ends its own root (the thread whose turn runs is
// freed under it) and then takes Stack memory through another root's
// waiting step puts it on that step's thread: it is destroyed once, when
// that step ends, and both roots leave nothing in use.
func TestSemStackThreadsAfterOwnRootEnds(t *testing.T) {
	for _, how := range []string{"cancel", "release", "cancel and execute"} {
		t.Run(how, func(t *testing.T) {
			s, other, of, waiting := stkWaiting()
			l := s.l
			var again *vm.Future
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "R")
				p := as.Parallel()
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "B0"); as.WaitExternal() })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) {
					s.alloc(as, "B1")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						s.alloc(as, "B1'")
						switch how {
						case "release":
							root.Release()
						default:
							root.Cancel()
						}
						if how == "cancel and execute" {
							root.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "again") })
							again = root.Promise()
						}
						s.alloc(*waiting, "B1>O")
						s.stkOn(*waiting, "O", 2*stkEach)
						waiting.Success()
					})
				})
			})
			f := root.Promise()
			l.RunUntilIdle()
			semOK(t, of)
			want := stkSeq(stkDestroyed("B0"), stkDestroyed("B1'"), stkDestroyed("B1"), stkDestroyed("R"),
				stkDestroyed("B1>O"), stkDestroyed("O"))
			if how == "cancel and execute" {
				want = stkSeq(want, stkDestroyed("again"))
				semOK(t, again)
			}
			semExpect(t, s.log, want...)
			if how != "release" {
				semResult(t, f)
				root.Release()
			}
			other.Release()
			semClean(t, l)
		})
	}
}

// Stack memory in Mutex sections and loop iterations inside branches of
// nested parallels, left by a Break from an inner branch to a loop of the
// main thread: every frame's memory is destroyed once, innermost first in
// each thread, and the arena is back before the loop's next step.
func TestSemStackThreadsBreakAcrossBranches(t *testing.T) {
	m := vm.NewMutex(1, vm.Unbounded)
	stkRun(t, func(s *stkProbe, root vm.AsyncSteps) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { s.mark(0) })
		root.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Loop(func(as vm.AsyncSteps) {
				s.alloc(as, "L")
				p := as.Parallel()
				for _, name := range []string{"X", "Y"} {
					p.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) {
							s.alloc(as, name+"sec")
							q := as.Parallel()
							q.Add(func(as vm.AsyncSteps, _ vm.Args) {
								as.Repeat(3, func(as vm.AsyncSteps, i int) {
									s.alloc(as, fmt.Sprintf("%s%d", name, i))
									if i == 1 {
										as.Break("") // the innermost loop: the Repeat
									}
								})
								as.Add(func(as vm.AsyncSteps, _ vm.Args) {
									s.alloc(as, name+"brk")
									as.Break()
								})
							})
						})
					})
				}
			})
			as.Add(s.check("after loop", 0))
		})
	}, stkSeq(stkDestroyed("X0"), stkDestroyed("X1"), stkDestroyed("Xbrk"), stkDestroyed("Xsec"),
		stkDestroyed("L"), "after loop")...)
}
