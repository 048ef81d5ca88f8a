package vm

import (
	"testing"

	"github.com/stepvm/stepvm/opcodes"
)

// The wait queue keeps FIFO order across removals from anywhere in it,
// ignores stale handles, and reuses its entries.
func TestWaitQueue(t *testing.T) {
	l := NewLoop()
	r := l.newRoot()
	var q waitQueue
	var args argBuf
	nodes := make([]*Node, 6)
	handles := make([]uint64, 6)
	for i := range nodes {
		nodes[i] = r.newNode(opcodes.OpSync)
		args.set([]Value{Int(int64(i))})
		handles[i] = q.push(r, r.base(), nodes[i], &args)
	}
	q.remove(handles[0]) // head
	q.remove(handles[3]) // middle
	q.remove(handles[5]) // tail
	q.remove(handles[3]) // again: stale
	if q.len() != 3 {
		t.Fatalf("len %d after removing 3 of 6", q.len())
	}
	i, w := q.pop()
	if w.n != nodes[1] || w.args.v[0].Int() != 1 {
		t.Fatalf("first waiter is not flow 1")
	}
	q.release(i)
	q.remove(handles[1]) // popped and released: stale
	args.set([]Value{Int(6)})
	h := q.push(r, r.base(), nodes[1], &args)
	if h == handles[1] {
		t.Fatal("a reused entry kept its handle")
	}
	var got []int64
	for {
		i, w := q.pop()
		if w == nil {
			break
		}
		got = append(got, w.args.v[0].Int())
		q.release(i)
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 4 || got[2] != 6 {
		t.Fatalf("order %v, want [2 4 6]", got)
	}
	if len(q.slab) != 6 || q.len() != 0 || q.head != 0 || q.tail != 0 {
		t.Fatalf("slab %d entries, len %d, head %d, tail %d", len(q.slab), q.len(), q.head, q.tail)
	}
	for i := range q.slab {
		if w := &q.slab[i]; w.r != nil || w.n != nil || w.args.n != 0 {
			t.Fatalf("free entry %d keeps references", i+1)
		}
	}
}
