package ringbuf

import (
	"testing"

	"github.com/stepvm/stepvm/internal/fuzzinput"
)

// FuzzQueue drives a Queue from one goroutine as the input says, against
// the model that one producer's items come out in the order it pushed them,
// each once: pushes of any length, past the ring into the overflow; Drains
// whose fn pushes more items, or panics, at any item; and Empty, which must
// report whether every item pushed has been delivered.
//
//	go test -run '^$' -fuzz '^FuzzQueue$' -fuzztime 10m -parallel 1 ./ringbuf
func FuzzQueue(f *testing.F) {
	f.Add([]byte{3, 0, 9, 2, 0, 0, 1, 4, 2, 3, 1, 3})
	f.Add([]byte{0, 0, 1, 0, 1, 2, 1, 0, 2, 0, 2, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		input := fuzzinput.NewBytes(in)
		next := input.Next
		q := NewQueue[int](1 << (next() % 4))
		pushed, delivered := 0, 0
		push := func(n int) {
			for range n {
				q.Push(pushed)
				pushed++
			}
		}
		// drain delivers with fn pushing more items at item pushAt, and
		// panicking at item panicAt (-1: never).
		drain := func(pushAt, more, panicAt int) {
			defer func() {
				if p := recover(); p != nil && p != "fn" {
					panic(p)
				}
			}()
			before, i := delivered, 0
			n := q.Drain(func(v *int) {
				if *v != delivered {
					t.Fatalf("delivered %d, want %d (pushed %d)", *v, delivered, pushed)
				}
				delivered++
				if i == pushAt {
					push(more)
				}
				if i == panicAt {
					panic("fn")
				}
				i++
			})
			if n != delivered-before {
				t.Fatalf("Drain returned %d, delivered %d", n, delivered-before)
			}
		}
		for input.Left() {
			switch next() % 4 {
			case 0, 1:
				push(next() % 12)
			case 2:
				panicAt := -1
				if b := next(); b%3 == 0 {
					panicAt = b / 3 % 8
				}
				drain(next()%8, next()%6, panicAt)
			case 3:
				if q.Empty() != (delivered == pushed) {
					t.Fatalf("Empty = %v with %d of %d delivered", q.Empty(), delivered, pushed)
				}
			}
		}
		for rounds := 0; !q.Empty(); rounds++ {
			if rounds > pushed+1 {
				t.Fatalf("Drain makes no progress: %d of %d delivered", delivered, pushed)
			}
			drain(-1, 0, -1)
		}
		if delivered != pushed {
			t.Fatalf("Empty with %d of %d delivered", delivered, pushed)
		}
	})
}
