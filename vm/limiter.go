package vm

import "time"

// LimiterOptions are the limits of a Limiter (FTN12 2.5). A zero field
// takes the FTN12 default: Concurrent 1, MaxQueue 0, Rate 1, Period one
// second, Burst 0. MaxQueue and Burst may be Unbounded.
type LimiterOptions struct {
	Concurrent int           // flows inside at a time
	MaxQueue   int           // flows waiting for a place inside
	Rate       int           // entries per Period
	Period     time.Duration // the rate's period
	Burst      int           // flows inside waiting for the rate to admit them
}

// Limiter imposes both a concurrency and a rate limit on its critical
// sections (FTN12 1.11.7): a flow first takes one of Concurrent places as
// in a Mutex (waiting in a queue of up to MaxQueue flows), then, holding
// it, waits for the rate to admit it as in a Throttle (in a queue of up to
// Burst flows). A flow that finds a queue full fails with DefenseRejected
// and the ErrorInfo "Mutex queue limit" or "Throttle queue limit".
// Re-entry by a flow follows the Mutex and Throttle rules: it does not
// take a second place but counts against the rate. Make it with
// NewLimiter: a flow that syncs on a zero Limiter fails with InternalError.
type Limiter struct {
	mutex    *Mutex
	throttle *Throttle
}

// NewLimiter returns a Limiter of loop l with the limits o. Any goroutine
// may call it, as it may NewMutex and NewThrottle.
func NewLimiter(l *Loop, o LimiterOptions) *Limiter {
	switch {
	case l == nil:
		panic("vm: NewLimiter: nil loop")
	case o.Concurrent < 0 || o.Rate < 0 || o.Period < 0:
		panic("vm: NewLimiter: negative Concurrent, Rate or Period")
	case o.MaxQueue < Unbounded || o.Burst < Unbounded:
		panic("vm: NewLimiter: MaxQueue and Burst must be Unbounded or at least 0")
	}
	if o.Concurrent == 0 {
		o.Concurrent = 1
	}
	if o.Rate == 0 {
		o.Rate = 1
	}
	if o.Period == 0 {
		o.Period = time.Second
	}
	m := NewMutex(o.Concurrent, o.MaxQueue)
	m.bind(l)
	return &Limiter{mutex: m, throttle: NewThrottle(l, o.Rate, o.Period, o.Burst)}
}

// Sync adds to as a step that runs fn inside the limits (ISync). Use it
// through AsyncSteps.Sync.
func (lm *Limiter) Sync(as AsyncSteps, fn ExecFunc, onError ErrorFunc) {
	switch {
	case lm == nil:
		as.misuse("Sync on a nil *Limiter")
	case lm.mutex == nil:
		as.misuse("Sync on a zero Limiter: make it with NewLimiter")
	default:
		as.addSync(lm.mutex, lm.throttle, fn, onError)
	}
}

// Stats returns the counters of the concurrency limit (a Mutex's) and of
// the rate limit (a Throttle's), zero for a zero Limiter. Loop goroutine
// only.
func (lm *Limiter) Stats() (concurrency, rate SyncStats) {
	if lm.mutex == nil {
		return
	}
	return lm.mutex.Stats(), lm.throttle.Stats()
}
