package benchmarks

import (
	"errors"
	"testing"

	"github.com/stepvm/stepvm/vm"
)

// ErrorPath: per flow, a step fails with code "E" and its error handler
// recovers with Success.

func errorSteps() (fail vm.ExecFunc, onError vm.ErrorFunc, handled *int) {
	handled = new(int)
	fail = func(as vm.AsyncSteps, _ vm.Args) { as.Error("E") }
	onError = func(as vm.AsyncSteps, code string) {
		if code == "E" {
			*handled++
		}
		as.Success()
	}
	return fail, onError, handled
}

func errorStepvm(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	fail, onError, handled := errorSteps()
	flow := func() {
		as := l.NewSteps()
		as.Add(fail, onError)
		as.Execute()
		l.RunUntilIdle()
		as.Release()
	}
	timeFlows(b, flow, func() { *handled = 0 })
	if *handled != b.N {
		b.Fatalf("%d errors handled, want %d", *handled, b.N)
	}
}

func errorSpawn(b *testing.B) {
	l := vm.NewLoop()
	defer l.Close()
	fail, onError, handled := errorSteps()
	flow := func() {
		l.Spawn(fail, onError)
		l.RunUntilIdle()
	}
	timeFlows(b, flow, func() { *handled = 0 })
	if *handled != b.N {
		b.Fatalf("%d errors handled, want %d", *handled, b.N)
	}
}

// errE is the error the goroutines side fails with: a sentinel, as Go
// code declares the errors callers test for.
var errE = errors.New("E")

//go:noinline
func failE() error { return errE }

// errorGoroutines runs each flow as a goroutine that returns its error to
// the caller over a channel reused across flows; the caller handles it.
func errorGoroutines(b *testing.B) {
	errc := make(chan error, 1)
	handled := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		go func() { errc <- failE() }()
		if err := <-errc; errors.Is(err, errE) {
			handled++
		}
	}
	b.StopTimer()
	reportPer(b, "flow")
	if handled != b.N {
		b.Fatalf("%d errors handled, want %d", handled, b.N)
	}
}
