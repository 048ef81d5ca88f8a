package ringbuf

import (
	"runtime"
	"sync"
	"testing"
)

const benchCap = 1024

func BenchmarkRingPushPop(b *testing.B) {
	r := NewRing[token](benchCap)
	var tk token
	for b.Loop() {
		r.TryPush(tk)
		tk, _ = r.TryPop()
	}
}

func BenchmarkChanPushPop(b *testing.B) {
	c := make(chan token, benchCap)
	var tk token
	for b.Loop() {
		c <- tk
		tk = <-c
	}
}

func BenchmarkQueuePushDrain(b *testing.B) {
	q := NewQueue[token](benchCap)
	var tk token
	fn := func(t *token) { tk = *t }
	for b.Loop() {
		q.Push(tk)
		q.Drain(fn)
	}
}

// contended runs b.N pushes from RunParallel producers against one consumer
// goroutine that takes items with pop until it has seen all of them.
func contended(b *testing.B, push func(token), pop func() int) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 0; n < b.N; {
			k := pop()
			if k == 0 {
				runtime.Gosched()
			}
			n += k
		}
	})
	b.RunParallel(func(pb *testing.PB) {
		var tk token
		for pb.Next() {
			tk.b++
			push(tk)
		}
	})
	wg.Wait()
}

func BenchmarkRingContended(b *testing.B) {
	r := NewRing[token](benchCap)
	contended(b,
		func(tk token) {
			for !r.TryPush(tk) {
				runtime.Gosched()
			}
		},
		func() int {
			if _, ok := r.TryPop(); ok {
				return 1
			}
			return 0
		})
}

func BenchmarkQueueContended(b *testing.B) {
	q := NewQueue[token](benchCap)
	var sum uint32
	fn := func(t *token) { sum += t.b }
	contended(b, q.Push, func() int { return q.Drain(fn) })
}

func BenchmarkChanContended(b *testing.B) {
	c := make(chan token, benchCap)
	contended(b,
		func(tk token) { c <- tk },
		func() int {
			<-c
			return 1
		})
}
