package vm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stepvm/stepvm/vm"
)

// A Success that ends a thread's base from inside that thread's own call
// (its step, or an error handler a timeout runs) ends the thread in its
// next turn. Lifecycle calls made in that window, later in the same call,
// find the flow still running: a Cancel or Release of the root cancels it
// (the pending end is dropped, the Future settles once, canceled), a root
// canceled and executed again runs its new steps once, and a branch that
// fails a sibling through a kept handle aborts the parallel step once,
// its own pending end dropped with it. The loop is left clean after each.
func TestSemDeferredEndThenLifecycle(t *testing.T) {
	for _, where := range []string{"step", "timeout handler"} {
		for _, call := range []string{"Cancel", "Release", "Cancel and Promise", "fail sibling"} {
			t.Run(where+"/"+call, func(t *testing.T) {
				l, clk := semLoop()
				root := l.NewSteps()
				var log semLog
				var again *vm.Future
				var sibling vm.AsyncSteps
				window := func(as vm.AsyncSteps) {
					as.Success(vm.Int(1))
					switch call {
					case "Cancel":
						root.Cancel()
					case "Release":
						root.Release()
					case "Cancel and Promise":
						root.Cancel()
						root.Add(log.step("again"))
						again = root.Promise()
					case "fail sibling":
						sibling.Error("Sib")
					}
					log.add("window done")
				}
				last := func(as vm.AsyncSteps, _ vm.Args) {
					if where == "step" {
						window(as)
						return
					}
					as.SetTimeout(time.Millisecond)
				}
				handler := func(as vm.AsyncSteps, code string) {
					log.add("handler %s", code)
					window(as)
				}
				if call == "fail sibling" {
					p := root.Parallel(func(as vm.AsyncSteps, code string) { log.add("parallel handler %s", code) })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { sibling = as; as.WaitExternal() })
					p.Add(func(as vm.AsyncSteps, _ vm.Args) { as.Add(last, handler) })
					root.Add(log.step("after parallel"))
				} else {
					root.Add(last, handler)
				}
				f := root.Promise()
				l.RunUntilIdle()
				clk.Advance(time.Millisecond)
				l.RunUntilIdle()
				clk.Advance(time.Hour)
				l.RunUntilIdle()

				want := []string{"window done"}
				if where != "step" {
					want = []string{"handler Timeout", "window done"}
				}
				switch call {
				case "fail sibling":
					// The parallel's handler returns: the error ends the flow.
					want = append([]string{want[0], "parallel handler Sib"}, want[1:]...)
					if where == "step" {
						want = []string{"parallel handler Sib", "window done"}
					}
					semFail(t, f, "Sib")
				case "Cancel and Promise":
					want = append(want, "again")
					fallthrough
				default:
					if _, err := semResult(t, f); !errors.Is(err, vm.ErrCanceled) {
						t.Fatalf("first run: %v, want canceled", err)
					}
				}
				semExpect(t, &log, want...)
				if again != nil {
					semOK(t, again)
				}
				if call != "Release" {
					root.Release()
				}
				semClean(t, l)
				semNextRootWorks(t, l)
			})
		}
	}
}
