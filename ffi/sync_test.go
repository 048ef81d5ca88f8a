//go:build cgo

package ffi_test

import (
	"unsafe"

	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// FTN12 3.6: two flows enter a section that waits 10 ms. Under a mutex
// the second enters once the first has left, whoever implements the flows
// and the mutex.
func TestSync(t *testing.T) {
	want := []string{"A enter", "A leave", "B enter", "B leave"}
	goSection := func(name string) vm.ExecFunc {
		return func(as vm.AsyncSteps, _ vm.Args) {
			ctest.Say(name + " enter")
			as.Add(func(as vm.AsyncSteps, _ vm.Args) {
				as.WaitExternal()
				as.Tool().Deferred(10*time.Millisecond, func() { as.Success() })
			})
			as.Add(say(name + " leave"))
		}
	}
	for _, tc := range []struct {
		name  string
		build func(l *vm.Loop, root vm.AsyncSteps, flow int)
	}{
		{"Go flows, Go mutex", func() func(*vm.Loop, vm.AsyncSteps, int) {
			m := vm.NewMutex(1, vm.Unbounded)
			return func(_ *vm.Loop, root vm.AsyncSteps, flow int) {
				root.Sync(m, goSection([]string{"A", "B"}[flow]))
			}
		}()},
		{"C flows, Go mutex", func() func(*vm.Loop, vm.AsyncSteps, int) {
			m := ffi.Sync(vm.NewMutex(1, vm.Unbounded))
			return func(_ *vm.Loop, root vm.AsyncSteps, flow int) { ctest.SyncFlow(ffi.Binary(root), m, flow) }
		}()},
		{"C flows, C mutex", func() func(*vm.Loop, vm.AsyncSteps, int) {
			m := ctest.CMutex()
			return func(_ *vm.Loop, root vm.AsyncSteps, flow int) { ctest.SyncFlow(ffi.Binary(root), m, flow) }
		}()},
		{"Go and C flows, C mutex", func() func(*vm.Loop, vm.AsyncSteps, int) {
			m := ctest.CMutex()
			return func(_ *vm.Loop, root vm.AsyncSteps, flow int) {
				if flow == 0 {
					ctest.SyncFlow(ffi.Binary(root), m, flow)
					return
				}
				root.Sync(ffi.WrapSync(m), goSection("B"))
			}
		}()},
		{"Go and C flows, Go throttle", func() func(*vm.Loop, vm.AsyncSteps, int) {
			var m unsafe.Pointer
			return func(l *vm.Loop, root vm.AsyncSteps, flow int) {
				if m == nil {
					// One entry per 20 ms: B enters 20 ms after A, as A leaves at 10 ms.
					m = ffi.Sync(vm.NewThrottle(l, 1, 20*time.Millisecond, vm.Unbounded))
				}
				if flow == 0 {
					root.Sync(ffi.WrapSync(m), goSection("A"))
					return
				}
				ctest.SyncFlow(ffi.Binary(root), m, flow)
			}
		}()},
		{"C flows, Go limiter", func() func(*vm.Loop, vm.AsyncSteps, int) {
			var m unsafe.Pointer
			return func(l *vm.Loop, root vm.AsyncSteps, flow int) {
				if m == nil {
					m = ffi.Sync(vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: 4, Rate: 10, Period: time.Second}))
				}
				ctest.SyncFlow(ffi.Binary(root), m, flow)
			}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctest.ResetTrace()
			l, clk := newLoop()
			var fs []*vm.Future
			var roots []vm.AsyncSteps
			for flow := range 2 {
				root := l.NewSteps()
				tc.build(l, root, flow)
				roots = append(roots, root)
				fs = append(fs, root.Promise())
			}
			for range 4 {
				l.RunUntilIdle()
				clk.Advance(10 * time.Millisecond)
			}
			l.RunUntilIdle()
			for i, f := range fs {
				if _, err := result(t, f); err != nil {
					t.Fatalf("flow %d: %v", i, err)
				}
				roots[i].Release()
			}
			expectLines(t, tc.name, takeTrace(), want...)
		})
	}
}

// A flow canceled while it waits for a C mutex leaves its queue: unlock
// runs for it, and the next flow gets the mutex.
func TestSyncCancelWhileQueued(t *testing.T) {
	ctest.ResetTrace()
	l, clk := newLoop()
	m := ctest.CMutex()
	a, b, c := l.NewSteps(), l.NewSteps(), l.NewSteps()
	for i, root := range []vm.AsyncSteps{a, b, c} {
		ctest.SyncFlow(ffi.Binary(root), m, i)
		root.Execute()
	}
	l.RunUntilIdle()
	b.Cancel()
	for range 3 {
		clk.Advance(10 * time.Millisecond)
		l.RunUntilIdle()
	}
	expectLines(t, "trace", takeTrace(), "A enter", "A leave", "C enter", "C leave")
}

// lock and unlock of stepvm's own primitives are for foreign engines; they
// are not supported and fail the caller.
func TestSyncRecords(t *testing.T) {
	p := ffi.Sync(vm.NewMutex(1, 0))
	if p == nil || ffi.WrapSync(p) == nil {
		t.Fatal("no record for a Go mutex")
	}
	ffi.ReleaseSync(p)
	if ffi.WrapSync(p) != nil {
		t.Fatal("a released record still names its primitive")
	}
	ffi.ReleaseSync(p) // twice: nothing happens
}
