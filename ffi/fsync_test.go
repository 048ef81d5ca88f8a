//go:build cgo

package ffi_test

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// sayArgs returns a Go step that prints "<name> got" and its values.
func sayArgs(name string) vm.ExecFunc {
	return func(as vm.AsyncSteps, args vm.Args) {
		s := name + " got"
		for i := range args.Len() {
			switch v := args.Get(i); v.Kind() {
			case vm.KindInt:
				s += fmt.Sprint(" ", v.Int())
			case vm.KindString:
				s += " " + v.String()
			default:
				s += fmt.Sprint(" kind", v.Kind())
			}
		}
		ctest.Say(s)
	}
}

// withoutLine returns tr without the lines line, and how many there were.
func withoutLine(tr []string, line string) ([]string, int) {
	var out []string
	for _, s := range tr {
		if s != line {
			out = append(out, s)
		}
	}
	return out, len(tr) - len(out)
}

// withoutOnce returns tr without line, which must be there once.
func withoutOnce(t *testing.T, tr []string, line string) []string {
	t.Helper()
	out, n := withoutLine(tr, line)
	if n != 1 {
		t.Errorf("%q %d times in %q", line, n, tr)
	}
	return out
}

// fsLoop starts a test of C sections: a new loop with a manual clock,
// its Stats before any flow, and the trace and fsync.c's state reset.
func fsLoop() (*vm.Loop, *vm.ManualClock, vm.LoopStats) {
	ctest.ResetTrace()
	ctest.FsReset()
	l, clk := newLoop()
	return l, clk, l.Stats()
}

// holdFor returns a Go flow, executed, that holds s for d.
func holdFor(l *vm.Loop, s vm.ISync, d time.Duration) vm.AsyncSteps {
	h := l.NewSteps()
	h.Sync(s, func(as vm.AsyncSteps, _ vm.Args) {
		as.WaitExternal()
		as.Tool().Deferred(d, func() { as.Success() })
	})
	h.Execute()
	return h
}

// cHolder returns a flow, executed, that holds sync in a C section "H"
// until the section times out after 10 ms, its error handler eh.
func cHolder(l *vm.Loop, sync unsafe.Pointer, eh int) vm.AsyncSteps {
	h := l.NewSteps()
	ctest.FsAdd(ffi.Binary(h), sync, ctest.FsTimeout, eh, "H")
	h.Execute()
	return h
}

// releaseClean releases roots and checks that l then holds no more than
// base.
func releaseClean(t *testing.T, l *vm.Loop, base vm.LoopStats, roots []vm.AsyncSteps) {
	t.Helper()
	for _, r := range roots {
		r.Release()
	}
	l.RunUntilIdle()
	expectClean(t, l, base)
}

func fourValues(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Int(1), vm.Int(2), vm.Int(3), vm.Int(4)) }

// A C section of a Go Mutex, entered at once or after a Go flow held it,
// ends every way a C step can end; the Mutex is left however it ends, a
// Go flow queued behind gets it, and nothing stays behind.
func TestCSectionEndsOnGoMutex(t *testing.T) {
	const got = "S got 1 2 3 4"
	for _, tc := range []struct {
		name     string
		mode, eh int
		loop     bool
		code     string
		info     string
		trace    []string
	}{
		{"success", ctest.FsSuccess, ctest.FsNoHandler, false, "", "", []string{got, "after got 1 2 3 4"}},
		{"error", ctest.FsError, ctest.FsHandlerSay, false, "Boom", "section fails", []string{got, "S handler Boom"}},
		{"error recovered", ctest.FsError, ctest.FsHandlerRecover, false, "", "", []string{got, "S handler Boom", "after got recovered"}},
		{"error syncs again", ctest.FsError, ctest.FsHandlerSync, false, "", "", []string{got, "S handler Boom", "in handler got", "after got"}},
		{"break", ctest.FsBreak, ctest.FsHandlerSay, true, "", "", []string{got, "after got"}},
		{"continue", ctest.FsContinue, ctest.FsHandlerSay, true, "", "", []string{got, got, "after got"}},
		{"timeout", ctest.FsTimeout, ctest.FsHandlerSay, false, vm.Timeout, "", []string{got, "S handler Timeout"}},
		{"parallel", ctest.FsParallel, ctest.FsNoHandler, false, "", "", []string{got, "branch 1", "branch 2", "after got"}},
		{"lock", ctest.FsLock, ctest.FsHandlerSay, false, vm.InternalError,
			"lock of a stepvm synchronization primitive: they admit flows through addSync only",
			[]string{got, "S lock returned", "S handler InternalError"}},
		{"unlock", ctest.FsUnlock, ctest.FsHandlerSay, false, vm.InternalError,
			"unlock of a stepvm synchronization primitive: they admit flows through addSync only",
			[]string{got, "S unlock returned", "S handler InternalError"}},
		{"nested", ctest.FsNested, ctest.FsNoHandler, false, "", "", []string{got, "nested got", "after got"}},
	} {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/waited=%v", tc.name, wait), func(t *testing.T) {
				l, clk, base := fsLoop()
				m := vm.NewMutex(1, vm.Unbounded)
				p := ffi.Sync(m)
				defer ffi.ReleaseSync(p)
				var roots []vm.AsyncSteps
				if wait {
					roots = append(roots, holdFor(l, m, 5*time.Millisecond))
				}
				root := l.NewSteps()
				if tc.loop {
					root.Repeat(2, func(as vm.AsyncSteps, _ int) {
						as.Add(fourValues)
						ctest.FsAdd(ffi.Binary(as), p, tc.mode, tc.eh, "S")
					})
				} else {
					root.Add(fourValues)
					ctest.FsAdd(ffi.Binary(root), p, tc.mode, tc.eh, "S")
				}
				root.Add(sayArgs("after"))
				f := root.Promise()
				roots = append(roots, root)
				l.RunUntilIdle()
				q := l.NewSteps()
				q.Sync(m, say("Q in"))
				fq := q.Promise()
				roots = append(roots, q)
				for range 5 {
					clk.Advance(5 * time.Millisecond)
					l.RunUntilIdle()
				}
				_, err := result(t, f)
				expectOutcome(t, err, tc.code)
				if e, _ := err.(*vm.Error); e != nil && tc.info != "" && e.Info != tc.info {
					t.Errorf("info %q, want %q", e.Info, tc.info)
				}
				if _, err := result(t, fq); err != nil {
					t.Errorf("Q: %v", err)
				}
				// Q runs once, in a turn of its own: where it falls among
				// the flow's turns does not matter here.
				expectLines(t, tc.name, withoutOnce(t, takeTrace(), "Q in"), tc.trace...)
				if s := m.Stats(); s.Inside != 0 || s.Queued != 0 {
					t.Errorf("mutex %+v after the flows ended", s)
				}
				releaseClean(t, l, base, roots)
			})
		}
	}
}

// A flow with a C section of a Go Mutex, Throttle or Limiter, waiting in
// the section (with a cancel handler) or queued for it, is canceled,
// released or timed out: the section's cancel handler runs once if it
// entered, the primitive lets the next flow in, and nothing stays behind,
// also once the root is reused from the pool for another C section.
func TestCSectionFlowEndsOnGoPrimitive(t *testing.T) {
	prims := []string{"Mutex", "Throttle", "Limiter"}
	for _, prim := range prims {
		for _, how := range []string{"Cancel", "Release", "Timeout"} {
			for _, queued := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/queued=%v", prim, how, queued), func(t *testing.T) {
					l, clk, base := fsLoop()
					var s vm.ISync
					switch prim {
					case "Mutex":
						s = vm.NewMutex(1, vm.Unbounded)
					case "Throttle":
						s = vm.NewThrottle(l, 1, 50*time.Millisecond, vm.Unbounded)
					case "Limiter":
						s = vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: 4, Rate: 1, Period: 50 * time.Millisecond, Burst: 4})
					}
					p := ffi.Sync(s)
					defer ffi.ReleaseSync(p)
					var roots []vm.AsyncSteps
					if queued {
						roots = append(roots, holdFor(l, s, 30*time.Millisecond))
					}
					root := l.NewSteps()
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.SetTimeout(10 * time.Millisecond)
						as.Add(fourValues)
						ctest.FsAdd(ffi.Binary(as), p, ctest.FsWait, ctest.FsHandlerSay, "S")
					}, func(as vm.AsyncSteps, code string) { ctest.Say("outer handler " + code) })
					root.Execute()
					l.RunUntilIdle()
					q := l.NewSteps()
					q.Sync(s, say("Q in"))
					fq := q.Promise()
					ffi.EndRunBy(l, clk, root, how)
					if how != "Release" {
						roots = append(roots, root)
					}
					// The released root, from the pool: its frames held
					// nothing the primitive still knows.
					again := l.NewSteps()
					again.Add(fourValues)
					ctest.FsAdd(ffi.Binary(again), p, ctest.FsSuccess, ctest.FsNoHandler, "again")
					fa := again.Promise()
					roots = append(roots, q, again)
					for range 8 {
						clk.Advance(25 * time.Millisecond)
						l.RunUntilIdle()
					}
					if _, err := result(t, fq); err != nil {
						t.Errorf("Q: %v", err)
					}
					if _, err := result(t, fa); err != nil {
						t.Errorf("again: %v", err)
					}
					tr := withoutOnce(t, takeTrace(), "Q in")
					var want []string
					if !queued {
						want = append(want, "S got 1 2 3 4", "S canceled")
						if how == "Timeout" {
							want = append(want, "S handler Timeout", "outer handler Timeout")
						}
					} else if how == "Timeout" {
						want = append(want, "outer handler Timeout")
					}
					want = append(want, "again got 1 2 3 4")
					expectLines(t, how, tr, want...)
					if n := ctest.FsCancels(); n != map[bool]int{false: 1, true: 0}[queued] {
						t.Errorf("the section's cancel handler ran %d times", n)
					}
					switch s := s.(type) {
					case *vm.Mutex:
						if st := s.Stats(); st.Inside != 0 || st.Queued != 0 {
							t.Errorf("mutex %+v after the flows ended", st)
						}
					case *vm.Throttle:
						if st := s.Stats(); st.Queued != 0 {
							t.Errorf("throttle %+v after the flows ended", st)
						}
					}
					releaseClean(t, l, base, roots)
				})
			}
		}
	}
}

// A C section gets the values of its Sync step (four: the run queue's
// spilled form) whether its flow enters at once or after waiting, on a
// Mutex and through both sections of a Limiter, the entry made at every
// point around the end of the inline budget.
func TestCSectionValuesAcrossInlineBudget(t *testing.T) {
	for _, prim := range []string{"Mutex", "Limiter"} {
		for _, wait := range []bool{false, true} {
			for nops := 250; nops <= 260; nops++ {
				ctest.ResetTrace()
				l, clk := newLoop()
				var s vm.ISync = vm.NewMutex(1, vm.Unbounded)
				if prim == "Limiter" {
					s = vm.NewLimiter(l, vm.LimiterOptions{MaxQueue: vm.Unbounded, Rate: 1, Period: time.Millisecond, Burst: vm.Unbounded})
				}
				p := ffi.Sync(s)
				var roots []vm.AsyncSteps
				if wait {
					roots = append(roots, holdFor(l, s, 5*time.Millisecond))
				}
				root := l.NewSteps()
				for range nops {
					root.Add(func(vm.AsyncSteps, vm.Args) {})
				}
				root.Add(fourValues)
				ctest.FsAdd(ffi.Binary(root), p, ctest.FsSuccess, ctest.FsNoHandler, "S")
				root.Add(sayArgs("after"))
				f := root.Promise()
				roots = append(roots, root)
				for range 4 {
					l.RunUntilIdle()
					clk.Advance(5 * time.Millisecond)
				}
				if _, err := result(t, f); err != nil {
					t.Fatalf("%s wait=%v nops=%d: %v", prim, wait, nops, err)
				}
				expectLines(t, fmt.Sprintf("%s wait=%v nops=%d", prim, wait, nops), takeTrace(),
					"S got 1 2 3 4", "after got 1 2 3 4")
				for _, r := range roots {
					r.Release()
				}
				ffi.ReleaseSync(p)
			}
		}
	}
}

// A C mutex that tells flows apart by rootId, as a C library would: a
// flow that holds it, or waits for it, and is canceled, released or timed
// out lets the next flow in. Its unlock, run as the flow is torn down,
// gets the rootId its lock got.
func TestCMutexFlowEnds(t *testing.T) {
	for _, how := range []string{"Cancel", "Release", "Timeout"} {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", how, queued), func(t *testing.T) {
				l, clk, base := fsLoop()
				m := ctest.CMutex()
				var roots []vm.AsyncSteps
				if queued {
					roots = append(roots, cHolder(l, m, ctest.FsNoHandler))
				}
				root := l.NewSteps()
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.SetTimeout(5 * time.Millisecond)
					ctest.FsAdd(ffi.Binary(as), m, ctest.FsWait, ctest.FsNoHandler, "S")
				}, func(as vm.AsyncSteps, code string) { ctest.Say("outer handler " + code) })
				root.Execute()
				l.RunUntilIdle()
				ffi.EndRunBy(l, clk, root, how)
				if how != "Release" {
					roots = append(roots, root)
				}
				q := l.NewSteps()
				ctest.FsAdd(ffi.Binary(q), m, ctest.FsSuccess, ctest.FsNoHandler, "Q")
				fq := q.Promise()
				roots = append(roots, q)
				for range 4 {
					clk.Advance(10 * time.Millisecond)
					l.RunUntilIdle()
				}
				if _, err := result(t, fq); err != nil {
					t.Errorf("Q: %v (trace %q)", err, ctest.Trace())
				}
				withoutOnce(t, takeTrace(), "Q got")
				releaseClean(t, l, base, roots)
			})
		}
	}
}

// Branches of one flow under a C mutex that tells flows apart by rootId:
// the first holds it, the second waits. The flow is canceled, released or
// timed out: the first's unlock hands the mutex to the second as the
// branches are torn down, whose unlock then gives it back, so that
// another flow gets it.
func TestCMutexBranchesTornDown(t *testing.T) {
	for _, how := range []string{"Cancel", "Release", "Timeout"} {
		t.Run(how, func(t *testing.T) {
			l, clk, base := fsLoop()
			m := ctest.CMutex()
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.SetTimeout(10 * time.Millisecond)
				par := ffi.Binary(as.Parallel())
				ctest.FsAdd(par, m, ctest.FsWait, ctest.FsNoHandler, "A")
				ctest.FsAdd(par, m, ctest.FsWait, ctest.FsNoHandler, "B")
			}, func(as vm.AsyncSteps, code string) { ctest.Say("outer handler " + code) })
			root.Execute()
			l.RunUntilIdle()
			ffi.EndRunBy(l, clk, root, how)
			q := l.NewSteps()
			ctest.FsAdd(ffi.Binary(q), m, ctest.FsSuccess, ctest.FsNoHandler, "Q")
			fq := q.Promise()
			for range 3 {
				clk.Advance(10 * time.Millisecond)
				l.RunUntilIdle()
			}
			if _, err := result(t, fq); err != nil {
				t.Errorf("Q: %v", err)
			}
			withoutOnce(t, takeTrace(), "Q got")
			if how != "Release" {
				root.Release()
			}
			q.Release()
			l.RunUntilIdle()
			expectClean(t, l, base)
		})
	}
}

// The lock and unlock of a FutoInSync that Sync made, called by a C step
// through its own record, NULL, or the record of a section that has
// ended, fail that step; so does addSync with a released record or a C
// FutoInSync without unlock. The flow's handler sees InternalError, and a
// call made with no C call running on the thread is ignored.
func TestSyncRecordMisusedFromC(t *testing.T) {
	const lockInfo = "lock of a stepvm synchronization primitive: they admit flows through addSync only"
	const unlockInfo = "unlock of a stepvm synchronization primitive: they admit flows through addSync only"
	for _, tc := range []struct {
		name string
		add  func(root vm.AsyncSteps, p, released unsafe.Pointer)
		info string
	}{
		{"lock/own", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, false, 0, "call") }, lockInfo},
		{"lock/NULL", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, false, 1, "call") }, lockInfo},
		{"lock/ended", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, false, 2, "call") }, lockInfo},
		{"unlock/own", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, true, 0, "call") }, unlockInfo},
		{"unlock/NULL", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, true, 1, "call") }, unlockInfo},
		{"unlock/ended", func(r vm.AsyncSteps, p, _ unsafe.Pointer) { ctest.FsAddCall(ffi.Binary(r), p, true, 2, "call") }, unlockInfo},
		{"lock/released record", func(r vm.AsyncSteps, _, released unsafe.Pointer) {
			ctest.FsAddCall(ffi.Binary(r), released, false, 0, "call")
		}, lockInfo},
		{"addSync/released record", func(r vm.AsyncSteps, _, released unsafe.Pointer) {
			ctest.FsAddStep(ffi.Binary(r), released, "never")
		}, "addSync with a FutoInSync that has been released"},
		{"addSync/no unlock", func(r vm.AsyncSteps, _, _ unsafe.Pointer) {
			ctest.FsAddStep(ffi.Binary(r), ctest.FsHalfSync(), "never")
		}, "addSync with a FutoInSync whose lock or unlock is NULL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _, base := fsLoop()
			m := vm.NewMutex(1, vm.Unbounded)
			p := ffi.Sync(m)
			defer ffi.ReleaseSync(p)
			released := ffi.Sync(m)
			ffi.ReleaseSync(released)
			root := l.NewSteps()
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				ctest.FsAdd(ffi.Binary(as), p, ctest.FsWait, ctest.FsNoHandler, "S")
			})
			root.Add(func(as vm.AsyncSteps, _ vm.Args) {
				tc.add(as, p, released)
			}, func(as vm.AsyncSteps, code string) { ctest.Say("handler " + code) })
			root.Add(say("never"))
			f := root.Promise()
			l.RunUntilIdle()
			ctest.FsCompleteKept() // the section ends; its record is kept
			l.RunUntilIdle()
			expectError(t, f, vm.InternalError, tc.info)
			tr := takeTrace()
			if tr[len(tr)-1] != "handler InternalError" {
				t.Errorf("trace %q", tr)
			}
			// From outside any C call: nothing to fail, nothing done.
			ctest.FsCall(nil, p, false)
			ctest.FsCall(ffi.Binary(root), p, true)
			if st := m.Stats(); st.Inside != 0 || st.Queued != 0 {
				t.Errorf("mutex %+v", st)
			}
			root.Release()
			l.RunUntilIdle()
			expectClean(t, l, base)
		})
	}
}

// A custom object a C step succeeds with, lent to a C section of a Go
// Mutex or a C mutex that does not pass it on, entered at once or after
// waiting, is cleaned up once, as the section returns.
func TestCSectionLentObject(t *testing.T) {
	for _, prim := range []string{"Go Mutex", "C mutex"} {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/waited=%v", prim, wait), func(t *testing.T) {
				ctest.ResetCleanups()
				l, clk, base := fsLoop()
				var p unsafe.Pointer
				if prim == "Go Mutex" {
					p = ffi.Sync(vm.NewMutex(1, vm.Unbounded))
					defer ffi.ReleaseSync(p)
				} else {
					p = ctest.CMutex()
				}
				var roots []vm.AsyncSteps
				if wait {
					roots = append(roots, cHolder(l, p, ctest.FsHandlerRecover))
				}
				root := l.NewSteps()
				ctest.Emit(ffi.Binary(root), 5)
				ctest.FsAdd(ffi.Binary(root), p, ctest.FsParallel, ctest.FsNoHandler, "S")
				f := root.Promise()
				roots = append(roots, root)
				for i := range 3 {
					l.RunUntilIdle()
					if i == 0 && wait && ctest.Cleanups() != 0 {
						t.Fatal("the object was cleaned up while its flow waited")
					}
					clk.Advance(10 * time.Millisecond)
				}
				if _, err := result(t, f); err != nil {
					t.Fatal(err)
				}
				if n := ctest.Cleanups(); n != 1 {
					t.Errorf("%d cleanups, want 1", n)
				}
				withoutOnce(t, takeTrace(), "S got")
				releaseClean(t, l, base, roots)
			})
		}
	}
}
