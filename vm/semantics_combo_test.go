package vm_test

import (
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// Loops combined with parallel steps, timeouts, cancel handlers and Stack
// memory.

// semClean fails t unless l holds nothing for a flow any more: no arena
// bytes, running roots, timers, queued work or callback records.
func semClean(t *testing.T, l *vm.Loop) {
	t.Helper()
	s := l.Stats()
	if s.ArenaInUse != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.Queued != 0 || vm.CallbacksInUse(l) != 0 {
		t.Fatalf("not clean: %+v callbacks=%d", s, vm.CallbacksInUse(l))
	}
}

// An iteration that adds a sub-step and then unwinds (Break, Continue, a
// panic, Error) is carried out as the unwinding says, also when an earlier
// iteration of the same turn ended by implicit success: the sub-step never
// runs.
func TestSemLoopUnwindAfterAddFollowingQuickIteration(t *testing.T) {
	cases := []struct {
		how  string
		code string // "" for success
		want []string
	}{
		{"break", "", []string{"iter 0", "iter 1", "next"}},
		{"continue", "", []string{"iter 0", "iter 1", "iter 2", "next"}},
		{"panic", vm.InternalError, []string{"iter 0", "iter 1", "handler InternalError"}},
		{"error", vm.InternalError, []string{"iter 0", "iter 1", "handler InternalError"}},
	}
	for _, c := range cases {
		t.Run(c.how, func(t *testing.T) {
			r := semStart(func(root vm.AsyncSteps, log *semLog) {
				root.Add(func(as vm.AsyncSteps, _ vm.Args) {
					as.Repeat(3, func(as vm.AsyncSteps, i int) {
						log.add("iter %d", i)
						if i != 1 {
							return // ends at once: the next iteration runs in the same turn
						}
						as.Add(log.step("sub never"))
						switch c.how {
						case "break":
							as.Break()
						case "continue":
							as.Continue()
						case "panic":
							panic("boom")
						case "error":
							as.Error("E") // after Add: InternalError
						}
					})
				}, func(as vm.AsyncSteps, code string) { log.add("handler %s", code) })
				root.Add(log.step("next"))
			})
			if c.code == "" {
				semOK(t, r.f)
			} else {
				semFail(t, r.f, c.code)
			}
			semExpect(t, r.log, c.want...)
			semClean(t, r.l)
		})
	}
}
