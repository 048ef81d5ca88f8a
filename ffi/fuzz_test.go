//go:build cgo

package ffi_test

import (
	"testing"
	"time"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/internal/fuzzinput"
	"github.com/stepvm/stepvm/vm"
)

// FuzzFFI runs C flows whose every step, handler and callback does what a
// byte program says next (ffi/internal/ctest/fuzz.c): any sequence of the
// binary interface's calls, the forbidden ones and unusable values
// included, through live and stale handles, and from another thread between
// the loop's passes. Roots may start with a Go step instead, which the same
// program drives (goSide), with Go steps, handlers and loops around the C
// steps. Whatever it does, nothing may panic out of the loop, every flow
// must complete, and once the roots are released every custom object
// passed to stepvm is cleaned up exactly once, every Stack cleanup (C or
// Go) runs once on intact memory, every state variable is cleaned up, every
// Go value comes back from C as itself, and the loop holds no arena memory
// and no root.
//
//	go test -run '^$' -fuzz '^FuzzFFI$' -fuzztime 10m -parallel 1 ./ffi
func FuzzFFI(f *testing.F) {
	// Starting points only: what a byte means follows the interpreter's
	// encoding (fuzz.c), which changes as it grows.
	for _, seed := range [][]byte{
		{},
		{0, 2, 2, 3, 4, 5},
		{1, 3, 0, 1, 2, 2, 0, 1, 1, 4, 5, 0},
		{0, 6, 9, 6, 3, 1, 10, 5, 7, 3, 2, 11},
		{2, 13, 3, 1, 1, 1, 7, 3, 8, 1, 19, 5, 1},
		{1, 22, 4, 4, 23, 15, 0, 0, 16, 24},
	} {
		f.Add(seed)
	}
	f.Fuzz(runFFIProgram)
}

func runFFIProgram(t *testing.T, prog []byte) {
	l, clk := newLoop()
	defer l.Close()
	// The first byte chooses how many roots run the program, the FutoInSync
	// of its sections (a vm.Mutex, or one written in C), and whether each
	// root's first step is the program's C step or its Go step.
	var first byte
	if len(prog) > 0 {
		first = prog[0]
	}
	roots := 1 + int(first)%3
	sync := ctest.CMutex()
	if first&4 == 0 {
		sync = ffi.Sync(vm.NewMutex(1, 0))
		defer ffi.ReleaseSync(sync)
	}
	ctest.FuzzBegin(prog, sync)
	defer ctest.FuzzFinish()
	g := &goSide{sync: ffi.WrapSync(sync)}

	handles := make([]vm.AsyncSteps, roots)
	futures := make([]*vm.Future, roots)
	for i := range handles {
		handles[i] = l.NewSteps()
		if first&(8<<i) == 0 {
			ctest.FuzzStart(ffi.Binary(handles[i]))
		} else {
			handles[i].Add(g.step, g.handler) // Go steps around C ones
		}
		futures[i] = handles[i].Promise()
	}
	// The program's timeouts and delays are under 40 ms: a few hundred
	// rounds leave only the flows that wait for what never comes.
	for range 400 {
		l.RunUntilIdle()
		away := make(chan struct{})
		go func() {
			defer close(away)
			ctest.FuzzAway()
			g.away()
		}()
		<-away
		l.RunUntilIdle() // what the other thread's calls posted
		if l.Stats().Timers == 0 {
			break
		}
		clk.Advance(5 * time.Millisecond)
	}
	for _, h := range handles {
		h.Release() // cancels the flows still waiting
	}
	ctest.FuzzFinish()
	l.RunUntilIdle()
	for i, f := range futures {
		select {
		case <-f.Done():
		default:
			t.Fatalf("root %d: its Future never resolved", i)
		}
	}
	clear(futures) // their values may hold the last Objects
	settleCleanups(l)
	if p := ctest.FuzzProblem(); p != "" {
		t.Fatal(p)
	}
	if p := g.check(); p != "" {
		t.Fatal(p)
	}
	if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 || s.RunningRoots != 0 {
		t.Fatalf("after every root was released: %+v", s)
	}
}

// settleCleanups runs collections and the loop until stepvm holds none of
// the run's custom objects, or collect gives up: the cleanups of the
// Objects nothing holds any more hand their C cleanup to l.
func settleCleanups(l *vm.Loop) {
	collect(func() bool {
		l.RunUntilIdle()
		return ctest.FuzzPending() == 0
	})
}

// TestFFIRandomPrograms runs FuzzFFI's check on 2,000 inputs drawn from a
// fixed seed; FFI_PROGRAMS sets another count.
func TestFFIRandomPrograms(t *testing.T) {
	fuzzinput.Run(t, 12, 2000, "FFI_PROGRAMS", runFFIProgram)
}
