package vm_test

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/stepvm/stepvm/vm"
)

// stkProbe allocates every kind of stack memory in a frame and checks,
// while the run goes on, that a frame's memory is back once it has ended.
type stkProbe struct {
	l    *vm.Loop
	clk  *vm.ManualClock
	log  *semLog
	base [2]int64 // at the start of the run, in mid once M is allocated
	ptrs []weak.Pointer[stkPtrRec]
}

type stkPtrRec struct {
	S   string
	Pad [64]int64
}

// alloc takes, in frame as, a pointer-free Stack, a Stack holding Go
// pointers, and StackRaw blocks of size 0, small and dedicated-chunk size,
// each with a destroy callback that logs name.
func (s *stkProbe) alloc(as vm.AsyncSteps, name string) {
	vm.Stack[[128]int64](as)[0] = 1
	p := vm.Stack[stkPtrRec](as)
	p.S = name
	s.ptrs = append(s.ptrs, weak.Make(p))
	for _, c := range []struct {
		size int
		tag  string
	}{{0, "0"}, {1500, "raw"}, {20000, "big"}} {
		tag := name + "/" + c.tag
		m := as.StackRaw(c.size, func(p unsafe.Pointer) {
			s.log.add("destroy %s", tag)
			if c.size > 0 && *(*byte)(p) != 0x5A {
				s.log.add("destroy %s got other memory", tag)
			}
		})
		if c.size > 0 {
			*(*byte)(m) = 0x5A
		}
	}
}

// mark records the arena bytes in use as base i.
func (s *stkProbe) mark(i int) { s.base[i] = s.l.Stats().ArenaInUse }

// check is a step that logs line, and a leak if the arena holds 1 KB more
// than at mark i.
func (s *stkProbe) check(line string, i int) vm.ExecFunc {
	return func(as vm.AsyncSteps, _ vm.Args) {
		if d := s.l.Stats().ArenaInUse - s.base[i]; d > 1024 {
			s.log.add("%s: %d arena bytes more than at the mark", line, d)
			return
		}
		s.log.add("%s", line)
	}
}

// stkRun runs the flow build adds to a root on a fresh loop and checks that
// it succeeds with the trace want and leaves nothing in use.
func stkRun(t *testing.T, build func(s *stkProbe, root vm.AsyncSteps), want ...string) {
	t.Helper()
	l, clk := semLoop()
	s := &stkProbe{l: l, clk: clk, log: &semLog{}}
	root := l.NewSteps()
	build(s, root)
	f := root.Promise()
	l.RunUntilIdle()
	semOK(t, f)
	semExpect(t, s.log, want...)
	root.Release()
	semClean(t, l)
}

func stkDestroyed(name string) []string {
	return []string{"destroy " + name + "/big", "destroy " + name + "/raw", "destroy " + name + "/0"}
}

func stkSeq(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return out
}

// Every way a frame ends gives its stack memory back at once, innermost
// frame first, and leaves the enclosing frame's memory alone until that
// frame ends: checked by a step that runs after the frame, in the same run.
func TestSemStackFreedPerEnding(t *testing.T) {
	cases := []struct {
		name string
		// body builds F's frame inside mid's; F's handler, if any, is
		// given; mid's handler catches what leaves F.
		body   func(s *stkProbe, mid vm.AsyncSteps)
		want   []string
		failed string
	}{
		{"implicit success", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F") })
		}, stkSeq(stkDestroyed("F"), "after F"), ""},
		{"success", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F"); as.Success(vm.Int(1)) })
		}, stkSeq(stkDestroyed("F"), "after F"), ""},
		{"success later", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.WaitExternal()
				s.l.Immediate(func() { as.Success() })
			})
		}, stkSeq(stkDestroyed("F"), "after F"), ""},
		{"sub-steps of sub-steps", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) {
					s.alloc(as, "G")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "H") })
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.log.add("G's second") })
				})
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.log.add("F's second") })
			})
		}, stkSeq(stkDestroyed("H"), "G's second", stkDestroyed("G"), "F's second", stkDestroyed("F"), "after F"), ""},
		{"own handler succeeds", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F"); as.Error("E") },
				func(as vm.AsyncSteps, code string) { s.alloc(as, "FH"); as.Success() })
		}, stkSeq(stkDestroyed("FH"), stkDestroyed("F"), "after F"), ""},
		{"own handler adds steps", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F"); as.Error("E") },
				func(as vm.AsyncSteps, code string) {
					s.alloc(as, "FH")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "R"); s.log.add("recovery") })
				})
		}, stkSeq("recovery", stkDestroyed("R"), stkDestroyed("FH"), stkDestroyed("F"), "after F"), ""},
		{"own handler returns", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F"); as.Error("E") },
				func(as vm.AsyncSteps, code string) { s.alloc(as, "FH") })
		}, stkSeq(stkDestroyed("FH"), stkDestroyed("F"), "mid handler E", stkDestroyed("M"), "after mid"), "E"},
		{"own handler errors", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "F"); as.Error("E") },
				func(as vm.AsyncSteps, code string) { s.alloc(as, "FH"); as.Error("E2") })
		}, stkSeq(stkDestroyed("FH"), stkDestroyed("F"), "mid handler E2", stkDestroyed("M"), "after mid"), "E2"},
		{"error in sub-step caught above", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "G"); panic("boom") })
			})
		}, stkSeq(stkDestroyed("G"), stkDestroyed("F"), "mid handler InternalError", stkDestroyed("M"), "after mid"), "InternalError"},
		{"timeout", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.SetTimeout(time.Second)
				as.SetCancel(func(vm.AsyncSteps) { s.log.add("F canceled") })
				s.l.Immediate(func() { s.clk.Advance(2 * time.Second) })
			})
		}, stkSeq("F canceled", stkDestroyed("F"), "mid handler Timeout", stkDestroyed("M"), "after mid"), "Timeout"},
		{"parallel sibling's error", func(s *stkProbe, mid vm.AsyncSteps) {
			p := mid.Parallel()
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "G"); as.WaitExternal() })
			})
			p.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "S")
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("Abort") })
			})
		}, stkSeq(stkDestroyed("S"), stkDestroyed("G"), stkDestroyed("F"), "mid handler Abort", stkDestroyed("M"), "after mid"), "Abort"},
		{"parallel step's own memory", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				p := as.Parallel(func(as vm.AsyncSteps, code string) { as.Success() })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "B1") })
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "B2"); as.Error("X") })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.log.add("after parallel") })
			})
		}, stkSeq(stkDestroyed("B1"), stkDestroyed("B2"), "after parallel", stkDestroyed("F"), "after F"), ""},
		{"break and continue", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.Repeat(3, func(as vm.AsyncSteps, i int) {
					s.alloc(as, "I")
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						s.alloc(as, "J")
						if i == 0 {
							as.Continue()
						}
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "K"); as.Break() })
					})
				})
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.log.add("after loop") })
			})
		}, stkSeq(stkDestroyed("J"), stkDestroyed("I"), stkDestroyed("K"), stkDestroyed("J"), stkDestroyed("I"),
			"after loop", stkDestroyed("F"), "after F"), ""},
		{"loop body's handler", func(s *stkProbe, mid vm.AsyncSteps) {
			mid.Add(func(as vm.AsyncSteps, _ vm.Args) {
				s.alloc(as, "F")
				as.Loop(func(as vm.AsyncSteps) {
					as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "J"); as.Error("E") },
						func(as vm.AsyncSteps, code string) { s.alloc(as, "JH"); as.Break() })
				})
			})
		}, stkSeq(stkDestroyed("JH"), stkDestroyed("J"), stkDestroyed("F"), "after F"), ""},
	}
	for _, c := range cases {
		want := c.want
		if c.failed == "" {
			want = stkSeq(want, stkDestroyed("M"), "after mid")
		}
		t.Run(c.name, func(t *testing.T) {
			stkRun(t, func(s *stkProbe, root vm.AsyncSteps) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) { s.mark(0) })
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					s.alloc(as, "M")
					s.ptrs = nil // M's lives on
					s.mark(1)
					c.body(s, as)
					as.Add(func(as vm.AsyncSteps, _ vm.Args) {
						runtime.GC()
						for i, w := range s.ptrs {
							if w.Value() != nil {
								s.log.add("pointer Stack %d still reachable", i)
							}
						}
						s.ptrs = nil
					})
					as.Add(s.check("after F", 1))
				}, func(as vm.AsyncSteps, code string) {
					s.log.add("mid handler %s", code)
					as.Success()
				})
				root.Add(s.check("after mid", 0))
			}, want...)
		})
	}
}

// A parallel step's error handler is an error handler like a step's: it
// can take stack memory, which lives until the parallel step ends.
func TestSemStackInParallelErrorHandler(t *testing.T) {
	cases := []struct {
		name    string
		handler func(s *stkProbe, as vm.AsyncSteps)
		want    []string
	}{
		{"success", func(s *stkProbe, as vm.AsyncSteps) { s.alloc(as, "PH"); as.Success() },
			stkSeq(stkDestroyed("B"), stkDestroyed("PH"), "after parallel")},
		{"adds steps", func(s *stkProbe, as vm.AsyncSteps) {
			s.alloc(as, "PH")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) { s.log.add("recovery") })
		}, stkSeq(stkDestroyed("B"), "recovery", stkDestroyed("PH"), "after parallel")},
		{"returns", func(s *stkProbe, as vm.AsyncSteps) { s.alloc(as, "PH") },
			stkSeq(stkDestroyed("B"), stkDestroyed("PH"), "outer handler X")},
		{"raises", func(s *stkProbe, as vm.AsyncSteps) { s.alloc(as, "PH"); as.Error("Y") },
			stkSeq(stkDestroyed("B"), stkDestroyed("PH"), "outer handler Y")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stkRun(t, func(s *stkProbe, root vm.AsyncSteps) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					p := as.Parallel(func(as vm.AsyncSteps, _ string) { c.handler(s, as) })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { s.alloc(as, "B"); as.Error("X") })
					as.Add(s.log.step("after parallel"))
				}, func(as vm.AsyncSteps, code string) {
					s.log.add("outer handler %s", code)
					as.Success()
				})
			}, c.want...)
		})
	}
}
