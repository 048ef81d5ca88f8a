package vm

import "unsafe"

// CallbacksInUse reports the entries of l's callback table in use: the
// Immediates and Deferreds scheduled and the records of frames that wait
// with a timeout, a cancel handler or a Resumer. Tests check that none
// outlives its flow.
func CallbacksInUse(l *Loop) int {
	free := 0
	for slot := l.cbFree; slot != 0; slot = l.cbs[slot].seq {
		free++
	}
	return len(l.cbs) - 1 - free
}

// SetSeq sets the last Node.Seq stamp the root of as handed out, so that a
// test can bring the stamps to their wrap.
func SetSeq(as AsyncSteps, seq uint32) { as.r.seq = seq }

// HandleSeq returns the Node.Seq stamp the step handle as carries.
func HandleSeq(as AsyncSteps) uint32 { return as.seq }

// ResumersInUse reports the Resumer slots handed out and not yet released.
func ResumersInUse(l *Loop) int {
	n := int(l.resumers.next)
	if n > 0 {
		n--
	}
	return n - len(l.resumers.free)
}

// HandleNode returns the address of the node a step handle names (0 for a
// root handle), so that a test can tell that a stale handle's memory now
// serves another step.
func HandleNode(as AsyncSteps) uintptr { return uintptr(unsafe.Pointer(as.n)) }

// TableSizes reports the lengths of l's tables that grow with use and
// never shrink: callback records, spill entries, Futures, Mutexes, Resumer
// slots handed out and the run queue's ring. A long-running flow that ends
// each iteration as it began must leave them as they were.
func TableSizes(l *Loop) [6]int {
	return [6]int{len(l.cbs), len(l.spill), len(l.futures.futures), len(l.mutexes.entries), int(l.resumers.next), len(l.runq.buf)}
}

// SlotsInUse reports the length of the slot table of the root as names.
func SlotsInUse(as AsyncSteps) int { return as.r.slotCount() }

// StackListLen reports how many Stack allocations are on the list the end
// of as's frame looks through: its thread's. -1 for a handle of no frame.
func StackListLen(as AsyncSteps) int {
	n, ok := as.frame()
	if !ok {
		return -1
	}
	return allocsOf(threadOf(n)).Len()
}

// PooledTables reports the largest capacities the roots in l's pool keep:
// of their slot tables, and of their AsyncStack records and loop labels.
func PooledTables(l *Loop) (slots, stack int) {
	for _, r := range l.pool {
		if r.more != nil {
			slots = max(slots, inlineSlots+cap(r.more.tab), cap(r.more.freeHigh))
		}
		if r.state != nil {
			stack = max(stack, cap(r.state.stack), cap(r.state.labels))
		}
	}
	return slots, stack
}

// SpareSlots reports the capacity, in slots, of the slot tables l keeps to
// lend to runs with many slots in use at once.
func SpareSlots(l *Loop) int { return l.spareCap }

// ClockReads reports how many times c has been read.
func ClockReads(c *ManualClock) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}
