package arena_test

import (
	"fmt"
	"unsafe"

	"github.com/stepvm/stepvm/arena"
)

// frame is pointer-free, so it may live in an arena.
type frame struct {
	pc, sp uint64
	parent *frame // points into the arena: not a Go heap pointer
}

func Example() {
	var acct arena.Account // one per event loop
	var a arena.Arena      // one per flow root
	a.Init(&acct)

	root := (*frame)(a.Alloc(unsafe.Sizeof(frame{})))
	child := (*frame)(a.Alloc(unsafe.Sizeof(frame{})))
	child.parent, child.pc = root, 7
	fmt.Println(child.parent == root, root.pc, child.pc)
	fmt.Printf("in use %d, reserved %d, arenas %d\n", acct.InUse, acct.Reserved, acct.Arenas)

	a.Free(unsafe.Pointer(child), unsafe.Sizeof(frame{}))
	a.Reset() // the flow finished a unit of work: drop everything at once
	fmt.Printf("in use %d, reserved %d\n", acct.InUse, acct.Reserved)

	a.Release()
	fmt.Printf("in use %d, reserved %d, arenas %d\n", acct.InUse, acct.Reserved, acct.Arenas)
	// Output:
	// true 0 7
	// in use 64, reserved 256, arenas 1
	// in use 0, reserved 256
	// in use 0, reserved 0, arenas 0
}
