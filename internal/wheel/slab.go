package wheel

// nilIndex ends a list. Slot 0 of the slab is never handed out, so the zero
// Timer refers to no node.
const nilIndex = 0

// freeList is node.list for a node on the free list.
const freeList = ^uint16(0)

// stagedList marks a node whose timer is staged: added, not yet filed into
// a list (see Wheel.Add).
const stagedList = freeList - 1

// unsealedList marks a node whose timer was added by AddAfter and awaits
// the Seal that gives it a deadline.
const unsealedList = freeList - 2

// node is one timer. It holds no pointers, so a slab of them costs the
// garbage collector nothing to keep.
type node struct {
	next, prev uint32 // list neighbours, nilIndex at the ends; next also links the free list
	gen        uint32 // advanced on every release, so handles to earlier uses go stale
	list       uint16 // the list holding the node, stagedList, unsealedList or freeList
	due        uint64 // due tick, fixed when filed; while staged, the deadline; while unsealed, the delay
	data       uint64
}

// alloc returns an unused node and its index, growing the slab only when
// the free list is empty.
func (w *Wheel) alloc() (uint32, *node) {
	if i := w.free; i != nilIndex {
		n := &w.nodes[i]
		w.free = n.next
		return i, n
	}
	if uint64(len(w.nodes)) > uint64(^uint32(0)) {
		panic("wheel: too many timers")
	}
	w.nodes = append(w.nodes, node{list: freeList})
	i := len(w.nodes) - 1
	return uint32(i), &w.nodes[i]
}

// release returns node i, already unlinked, to the free list. Reuse is LIFO
// to keep the working set of the slab small.
func (w *Wheel) release(i uint32) {
	n := &w.nodes[i]
	n.gen++
	n.list = freeList
	n.prev = nilIndex
	n.next = w.free
	w.free = i
}

// push appends node i to the tail of list l, which keeps each list in the
// order its nodes arrived: the basis of the FIFO guarantee.
func (w *Wheel) push(l uint16, i uint32) {
	n := &w.nodes[i]
	n.list = l
	n.next = nilIndex
	n.prev = w.tail[l]
	if n.prev == nilIndex {
		w.head[l] = i
		w.markOccupied(l, n.due)
	} else {
		w.nodes[n.prev].next = i
		w.noteDue(l, n.due)
	}
	w.tail[l] = i
}

// unlink removes node i from its list.
func (w *Wheel) unlink(i uint32) {
	n := &w.nodes[i]
	l := n.list
	if n.prev == nilIndex {
		w.head[l] = n.next
	} else {
		w.nodes[n.prev].next = n.next
	}
	if n.next == nilIndex {
		w.tail[l] = n.prev
	} else {
		w.nodes[n.next].prev = n.prev
	}
	if w.head[l] == nilIndex {
		w.markEmpty(l)
	}
}

// take detaches all of list l and returns its first node; the rest follow by
// next. The caller must re-push every node.
func (w *Wheel) take(l uint16) uint32 {
	i := w.head[l]
	w.head[l], w.tail[l] = nilIndex, nilIndex
	w.markEmpty(l)
	return i
}
