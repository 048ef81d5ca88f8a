//go:build cgo

package ffi_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// A custom object lent to a C step stays lent while C code that stepvm
// runs during the step's call (a cancel handler, the allocate function of
// a state variable, a stack cleanup) runs: passed to success from there,
// it goes on as it is and the step does not release it; passed through a
// NULL record, it is left alone and the step releases it. Its cleanup
// runs once either way. Only the innermost call's lent values used to be
// known: the object became a second Object of the same C object, or went
// on while the step released it, and its cleanup ran twice, or while the
// receiver held it.
func TestLentObjectPassedOnFromNestedCall(t *testing.T) {
	for _, mode := range []int{ctest.NestCancel, ctest.NestAlloc, ctest.NestStack} {
		for _, through := range []string{"waiting step", "NULL record"} {
			t.Run(fmt.Sprintf("mode%d/%s", mode, through), func(t *testing.T) {
				l, _ := newLoop()
				base := l.Stats()
				before := ctest.NestCleanups()
				other := l.NewSteps()
				ctest.AddNestWait(ffi.Binary(other))
				other.Execute()
				var got any
				recv := l.NewSteps()
				ctest.AddWait(ffi.Binary(recv))
				recv.Add(func(_ vm.AsyncSteps, args vm.Args) { got = args.Get(0).Any() })
				fr := recv.Promise()
				l.RunUntilIdle()
				var target unsafe.Pointer
				if through == "waiting step" {
					target = ctest.Waiting()
				}
				root := l.NewSteps()
				ctest.AddNest(ffi.Binary(root), mode, ffi.Binary(other), target)
				f := root.Promise()
				l.RunUntilIdle()
				<-f.Done()
				if target != nil {
					if _, err := result(t, fr); err != nil {
						t.Fatalf("the receiving flow: %v", err)
					}
					o, ok := got.(*ffi.Object)
					if !ok {
						t.Fatalf("the receiving flow got %T, want *ffi.Object", got)
					}
					if n := ctest.NestCleanups() - before; n != 0 {
						t.Fatalf("%d cleanups while the receiver holds the object", n)
					}
					o.Release()
				}
				for _, r := range []vm.AsyncSteps{root, recv, other} {
					r.Release()
				}
				l.RunUntilIdle()
				if n := ctest.NestCleanups() - before; n != 1 {
					t.Errorf("%d cleanups, want 1", n)
				}
				if s := l.Stats(); s.RunningRoots != 0 || s.Timers != 0 || s.ArenaInUse != base.ArenaInUse || ffi.RecordsInUse(l) != 0 {
					t.Errorf("stats %+v, baseline %+v, records in use %d", s, base, ffi.RecordsInUse(l))
				}
			})
		}
	}
}
