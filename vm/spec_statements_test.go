package vm_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Statements of FTN12 v1.14 that no other test checks, one test each, named
// after the section that makes them.

// FTN12 2.2.2: "Execution API - can be used only inside execute_callback.
// Note: success() and error() can be used in error_callback as well", and
// 2.1 of error_callback: "any violation is reported as
// as.error( InternalError )". SetTimeout, SetCancel, WaitExternal and
// Resumer from a step's error handler fail the flow with InternalError,
// whatever the handler does next, and leave nothing armed; Stack, which
// stepvm lets an error handler use, still works there.
func TestSpec2_2_2ExecutionAPIOnlyInStepFunction(t *testing.T) {
	calls := []struct {
		name string
		call func(as vm.AsyncSteps, log *semLog)
	}{
		{"SetTimeout", func(as vm.AsyncSteps, _ *semLog) { as.SetTimeout(5 * time.Millisecond) }},
		{"SetCancel", func(as vm.AsyncSteps, log *semLog) {
			as.SetCancel(func(vm.AsyncSteps) { log.add("handler's cancel ran") })
		}},
		{"WaitExternal", func(as vm.AsyncSteps, _ *semLog) { as.WaitExternal() }},
		{"Resumer", func(as vm.AsyncSteps, _ *semLog) { as.Resumer().Success(vm.Int(1)) }},
	}
	for _, c := range calls {
		for _, then := range []string{"returns", "adds a step", "succeeds"} {
			t.Run(c.name+"/"+then, func(t *testing.T) {
				r := semStart(func(root vm.AsyncSteps, log *semLog) {
					root.Add(func(as vm.AsyncSteps, _ vm.Args) {
						as.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
							log.add("handler %s", code)
							c.call(as, log)
							log.add("handler went on")
							switch then {
							case "adds a step":
								as.Add(log.step("added step"))
							case "succeeds":
								as.Success()
							}
						})
					}, func(as vm.AsyncSteps, code string) {
						log.add("outer handler %s", code)
					})
					root.Add(log.step("next"))
				})
				r.advance(time.Second)
				e := semFail(t, r.f, vm.InternalError)
				semInfoMentions(t, e.Info, c.name, "error handler")
				semExpect(t, r.log, "handler E", "outer handler InternalError")
				r.root.Release()
				semClean(t, r.l)
			})
		}
	}
	t.Run("Stack", func(t *testing.T) {
		var freed bool
		semRunOK(t, func(root vm.AsyncSteps, log *semLog) {
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
				*vm.Stack[int64](as) = 7
				as.StackRaw(8, func(unsafe.Pointer) { freed = true })
				as.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("freed before recovery: %v", freed) })
			})
			root.Add(func(as vm.AsyncSteps, _ vm.Args) { log.add("freed after: %v", freed) })
		}, "freed before recovery: false", "freed after: true")
	})
}

// FTN12 1.7: "error_info - value of the second parameter passed to the last
// as.error() call"; last_exception "should be populated with FutoIn errors
// as well". A Timeout is raised with no info: after an earlier error with
// info was handled, its handler sees an empty ErrorInfo and the Timeout as
// LastException.
func TestSpec1_7TimeoutReplacesErrorInfo(t *testing.T) {
	r := semStart(func(root vm.AsyncSteps, log *semLog) {
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Error("First", "first info") },
			func(as vm.AsyncSteps, code string) { as.Success() })
		root.Add(func(as vm.AsyncSteps, _ vm.Args) { as.SetTimeout(time.Millisecond) },
			func(as vm.AsyncSteps, code string) {
				st := as.State()
				e, _ := st.LastException().(*vm.Error)
				log.add("%s info=%q last=%v", code, st.ErrorInfo(), e != nil && e.Code == vm.Timeout && e.Info == "")
			})
	})
	r.advance(time.Millisecond)
	semExpect(t, r.log, `Timeout info="" last=true`)
	semFail(t, r.f, vm.Timeout)
}

// FTN12 1.11.3: the synchronization object "is responsible for adding
// request steps under protection of provided synchronization", and 1.2.1:
// steps an error handler adds "remain on the same async stack level". The
// steps the section's error handler adds run inside the section: a
// re-entry there does not wait, and a flow queued meanwhile enters only
// once they end.
func TestSpec1_11_3SectionHandlerStepsStayInside(t *testing.T) {
	l, _ := semLoop()
	m := vm.NewMutex(1, vm.Unbounded)
	var log semLog
	root, other := l.NewSteps(), l.NewSteps()
	root.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }, func(as vm.AsyncSteps, code string) {
		log.add("handler %s", code)
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			log.add("recovery, inside %d queued %d", m.Stats().Inside, m.Stats().Queued)
			as.Sync(m, func(as vm.AsyncSteps, _ vm.Args) { as.Success(vm.Str("re-entered")) })
		})
	})
	root.Add(func(as vm.AsyncSteps, a vm.Args) { log.add("after: %s", a.String(0)) })
	other.Sync(m, log.step("other entered"))
	f, fo := root.Promise(), other.Promise()
	l.RunUntilIdle()
	semExpect(t, &log, "handler E", "recovery, inside 1 queued 1", "other entered", "after: re-entered")
	semOK(t, f)
	semOK(t, fo)
	if s := m.Stats(); s.Inside != 0 || s.Queued != 0 || s.Entered != 2 {
		t.Fatalf("Mutex stats %+v", s)
	}
	semClean(t, l)
}

// FTN12 1.11.4: "None of paralleled steps should inherit the lock state of
// its parent step." A Limiter's branches take places of their own: with
// two places and the parent in one, the first branch takes the other and
// the second waits for it, where an inherited place would let both in.
func TestSpec1_11_4ParallelDoesNotInheritLock(t *testing.T) {
	l, clk := semLoop()
	lm := vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 2, MaxQueue: vm.Unbounded, Rate: 10, Burst: vm.Unbounded})
	var log semLog
	root := l.NewSteps()
	root.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
		p := as.Parallel()
		for _, name := range []string{"a", "b"} {
			p.Sync(lm, func(as vm.AsyncSteps, _ vm.Args) {
				log.add("%s enters", name)
				as.Add(func(vm.AsyncSteps, vm.Args) {
					c, _ := lm.Stats()
					log.add("%s leaves, inside %d queued %d", name, c.Inside, c.Queued)
				})
			})
		}
	})
	f := root.Promise()
	l.RunUntilIdle()
	clk.Advance(time.Second)
	l.RunUntilIdle()
	semExpect(t, &log, "a enters", "a leaves, inside 2 queued 1", "b enters", "b leaves, inside 2 queued 0")
	semOK(t, f)
	semClean(t, l)
}
