package ringbuf_test

import (
	"fmt"

	"github.com/stepvm/stepvm/ringbuf"
)

func ExampleQueue() {
	q := ringbuf.NewQueue[string](2)

	// Producers may run on any goroutine; the third item overflows the
	// two-slot ring but is kept, in order.
	for _, s := range []string{"open", "read", "close"} {
		q.Push(s)
	}

	// The consumer drains once per loop pass.
	n := q.Drain(func(s *string) { fmt.Println(*s) })
	fmt.Println(n, q.Empty())
	// Output:
	// open
	// read
	// close
	// 3 true
}
