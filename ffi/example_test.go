//go:build cgo

package ffi_test

import (
	"fmt"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// A flow mixing Go steps and a C step: Binary hands the root to C, which
// adds a step that succeeds with strings of three widths; the Go step after
// it receives them as UTF-8 strings.
func ExampleBinary() {
	l := vm.NewLoop()
	root := l.NewSteps()
	root.Add(func(as vm.AsyncSteps, _ vm.Args) { fmt.Println("Go step") })
	ctest.Emit(ffi.Binary(root), 3) // C: root->api->add(root, ..., emit_step, NULL)
	root.Add(func(as vm.AsyncSteps, args vm.Args) {
		fmt.Println(args.Len(), args.String(0), args.String(1), args.String(2))
	})
	root.Execute()
	l.RunUntilIdle()
	root.Release()
	// Output:
	// Go step
	// 4 utf-8 ✓ héllo 😀 wörld 🚀
}

// Wrap turns a FutoInAsyncSteps* that Binary made back into the handle.
func ExampleWrap() {
	l := vm.NewLoop()
	root := l.NewSteps()
	p := ffi.Binary(root)
	fmt.Println(ffi.Wrap(p) == root, ffi.Wrap(nil).Valid())
	// Output: true false
}
