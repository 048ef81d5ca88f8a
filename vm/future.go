package vm

import (
	"context"
	"errors"
	"runtime"
	"weak"
)

// Future is the result of a root run through Promise (FTN12 1.13).
type Future struct {
	done chan struct{}
	args Args
	err  error
	loop weak.Pointer[Loop] // the loop of the run; weak, as the table is
}

// futureTable holds the Futures of the runs Promise started and that have
// not ended, by number, which the root's arena mark carries while the run
// goes on (markFutureShift). A root the program drops while its run waits
// for what nothing can deliver any more never ends its run: its reclaim
// (reclaimMem) settles the Future from here, and the cleanup of a loop the
// program drops settles those left (settleDropped), so that nobody waits
// on one for good. It is an object of its own, which that cleanup can hold
// without holding the loop.
type futureTable struct {
	futures []*Future // by number - 1
	free    []uint32  // entries not in use
}

// markFutureShift places a run's Future number in its arena's mark, above
// markLive and markRunning; the end of the run clears it (endEpoch).
const markFutureShift = 32

// put stores f and returns its number, never 0.
func (t *futureTable) put(f *Future) uint32 {
	i := takeEntry(&t.futures, &t.free)
	t.futures[i] = f
	return i + 1
}

// take removes and returns the Future numbered n, or nil if none is.
func (t *futureTable) take(n uint32) *Future {
	i := n - 1 // 0, no number, wraps past every entry
	if i >= uint32(len(t.futures)) || t.futures[i] == nil {
		return nil
	}
	f := t.futures[i]
	t.futures[i] = nil
	t.free = append(t.free, i)
	return f
}

// What the Future of a run that can never end reports.
const (
	errRootDropped = "the root was dropped and collected while its run waited: nothing could complete it"
	errLoopDropped = "the loop was dropped and collected while the run waited: nothing could complete it"
)

// settleDropped settles the Futures of the runs of a loop the program
// dropped. It runs on the collector's cleanup goroutine, once nothing can
// reach the loop.
func settleDropped(t *futureTable) {
	for _, f := range t.futures {
		if f != nil {
			f.resolve(Args{}, &Error{Code: InternalError, Info: errLoopDropped})
		}
	}
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
	f := &Future{done: make(chan struct{}), loop: r.l.self}
	st := r.st()
	st.future, st.futureNum = f, r.l.futures.put(f)
	as.Execute()
	r.a.SetMarkAgain(markLive | markRunning | uint64(st.futureNum)<<markFutureShift)
	return f
}

// Done is closed once the flow has completed.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait blocks until the flow completes and returns what its last step
// succeeded with, or its error: an *Error with the unhandled code and the
// state's ErrorInfo, or ErrCanceled. A run that can never end, because
// the program dropped its root (or its loop) while the run waited for what
// nothing could deliver any more, reports InternalError once the collector
// has reclaimed the root (or the loop). Call Wait from another goroutine
// than the loop's, or once Done is closed: the loop must run for it to
// return. Called inside a callback of the Run that drives the loop (a
// step, an Immediate, a Post), where it could never return, Wait of a
// Future not yet settled panics as a nested Run does, with an
// InternalError *Error, which fails the calling step's flow; a step hands
// the wait to another goroutine with Await instead. A ctx done first ends
// the wait with ctx.Err(); a Future settled before the call reports its
// result, whatever ctx is.
func (f *Future) Wait(ctx context.Context) (Args, error) {
	select {
	case <-f.done: // first: select picks at random among ready cases
		return f.args, f.err
	default:
	}
	// The goroutine that runs Run is inside it: the loop cannot settle f
	// until Wait returns. (A loop driven by RunUntilIdle or Iterate has no
	// driver that other goroutines may read, so Wait cannot tell its
	// callbacks from a goroutine that waits while the loop runs; nor does
	// it read its goroutine's id then.)
	if l := f.loop.Value(); l != nil {
		if id := l.runner.Load(); id != 0 && id == goid() {
			l.raiseMisuse("Future.Wait inside a callback of the loop that runs the flow, which cannot complete while the callback waits: wait on another goroutine (Await), or read the result once Done is closed")
		}
	}
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
// times out, or when the loop, dropped by the program, is collected. A
// *Error from fn keeps its code (a nil one is InternalError, as a panic
// with it is); any other error becomes InternalError with the error's text
// as ErrorInfo; a panic in fn, or a runtime.Goexit, becomes InternalError
// as well.
func (as AsyncSteps) Await(fn func(ctx context.Context) (Value, error), onError ...ErrorFunc) AsyncSteps {
	if fn == nil {
		as.misuse("Await with a nil function")
		return as
	}
	return as.Add(func(as AsyncSteps, _ Args) {
		ctx, cancel := context.WithCancel(context.Background())
		res := as.Resumer()
		as.SetCancel(func(AsyncSteps) { cancel() })
		// fn's goroutine holds the loop weakly, and the loop's collection
		// cancels ctx: a loop the program drops while fn waits for ctx is
		// collected (which settles the Future) and the goroutine ends.
		var self weak.Pointer[Loop]
		var dropped runtime.Cleanup
		if res.l != nil {
			self = weak.Make(res.l)
			dropped = runtime.AddCleanup(res.l, func(c context.CancelFunc) { c() }, cancel)
			res.l = nil
		}
		go func() {
			// The step completes from a deferred call, which runs also
			// when fn ends the goroutine (runtime.Goexit) without
			// returning: err stays errAwaitExit then.
			var v Value
			err := errAwaitExit
			defer func() {
				cancel()
				dropped.Stop()
				if res.l = self.Value(); res.l == nil {
					return // the loop is gone, and the Future with it settled
				}
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
			v, err = awaitCall(fn, ctx)
		}()
	}, onError...)
}

// errAwaitExit fails the step of an Await function that ended its
// goroutine (runtime.Goexit, as t.FailNow does) instead of returning.
var errAwaitExit error = &Error{Code: InternalError, Info: "the Await function called runtime.Goexit instead of returning"}

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
