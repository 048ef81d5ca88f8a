// Package ringbuf hands work from any goroutine to one consumer goroutine
// without locks on the common path and without allocating per item.
//
// [Ring] is a bounded multi-producer single-consumer FIFO that refuses items
// when full. [Queue] wraps a Ring with an overflow slice so that Push never
// fails and never waits for the consumer; it is what an event loop drains once
// per pass.
//
// # Sleep/wake handshake
//
// Every Push publishes its item with a sequentially consistent atomic write
// (a compare-and-swap of the ring's tail, or a store to the overflow flag),
// and [Queue.Empty] reads those words with sequentially consistent atomic
// loads. A consumer may therefore park with a Dekker-style handshake:
//
//	// consumer                      // producer
//	sleeping.Store(1)                q.Push(v)
//	if q.Empty() {                   if sleeping.Load() == 1 {
//		<-wake                           wake <- struct{}{} // non-blocking
//	}                                }
//	sleeping.Store(0)
//
// Because both sides write one word and then read the other's, at least one
// of them sees the other: either the consumer observes the item and does not
// park, or the producer observes sleeping == 1 and wakes it.
package ringbuf
