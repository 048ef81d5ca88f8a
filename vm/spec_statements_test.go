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
