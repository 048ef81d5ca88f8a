package vm

import (
	"context"
	"errors"
	"runtime"
)

// Future is the result of a root run through Promise (FTN12 1.13).
type Future struct {
	done chan struct{}
	args Args
	err  error
	// dropped settles the Future if the program drops its root while the
	// run waits for what nothing can deliver any more, and the collector
	// reclaims it: the run never ends, and whoever waits on the Future
	// would wait for good. The run's end stops it.
	dropped runtime.Cleanup
}

// errDropped is what the Future of a collected running root reports.
const errDropped = "the root was dropped and collected while its run waited: nothing could complete it"

// resolveDropped settles f for its collected root. It runs on the
// collector's cleanup goroutine; the loop cannot reach f any more.
func resolveDropped(f *Future) {
	f.resolve(Args{}, &Error{Code: InternalError, Info: errDropped})
}

// Promise executes the root and returns its Future.
func (as AsyncSteps) Promise() *Future {
	if f := as.foreign(); f != nil {
		return foreignPromise(f)
	}
	r := as.r
	if r == nil || as.n != nil || as.epoch != r.rootEpoch {
		as.misuse("Promise on a handle that is not a live root")
		f := &Future{done: make(chan struct{}), err: &Error{Code: InternalError, Info: "Promise on an invalid root"}}
		close(f.done)
		return f
	}
	if r.status == rootRunning || r.teardown&tearRelease != 0 {
		r.refuseStart("Promise")
		f := &Future{done: make(chan struct{}), err: &Error{Code: InternalError, Info: "Promise on a running root"}}
		close(f.done)
		return f
	}
	f := &Future{done: make(chan struct{})}
	f.dropped = runtime.AddCleanup(r, resolveDropped, f)
	r.st().future = f
	as.Execute()
	return f
}

// Done is closed once the flow has completed.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait blocks until the flow completes and returns what its last step
// succeeded with, or its error: an *Error with the unhandled code and the
// state's ErrorInfo, or ErrCanceled. A root the program dropped while its
// run waited for what nothing could deliver any more reports InternalError
// once the collector has reclaimed it. Call Wait from another goroutine
// than the loop's, or once Done is closed: the loop must run for it to
// return.
func (f *Future) Wait(ctx context.Context) (Args, error) {
	select {
	case <-f.done:
		return f.args, f.err
	case <-ctx.Done():
		return Args{}, ctx.Err()
	}
}

func (f *Future) resolve(args Args, err error) {
	f.args, f.err = args, err
	close(f.done)
}

// Await adds a step that runs fn on its own goroutine and succeeds with its
// value (FTN12 1.13). fn's context is canceled when the step is canceled or
// times out. A *Error from fn keeps its code (a nil one is InternalError,
// as a panic with it is); any other error becomes InternalError with the
// error's text as ErrorInfo; a panic in fn becomes InternalError as well.
func (as AsyncSteps) Await(fn func(ctx context.Context) (Value, error), onError ...ErrorFunc) AsyncSteps {
	if fn == nil {
		as.misuse("Await with a nil function")
		return as
	}
	return as.Add(func(as AsyncSteps, _ Args) {
		ctx, cancel := context.WithCancel(context.Background())
		res := as.Resumer()
		as.SetCancel(func(AsyncSteps) { cancel() })
		go func() {
			defer cancel()
			v, err := awaitCall(fn, ctx)
			if err == nil {
				res.Success(v)
				return
			}
			var e *Error
			if errors.As(err, &e) {
				e = RaisedError(e) // a nil *Error returned as an error is one
				res.Error(e.Code, e.Info)
			} else {
				res.Error(InternalError, err.Error())
			}
		}()
	}, onError...)
}

func awaitCall(fn func(context.Context) (Value, error), ctx context.Context) (v Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(*Error); ok {
				err = e
				return
			}
			err = &PanicError{Value: p}
		}
	}()
	return fn(ctx)
}
