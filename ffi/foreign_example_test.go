//go:build cgo

package ffi_test

import (
	"fmt"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/cengine"
	"github.com/stepvm/stepvm/vm"
)

// Wrap adopts a FutoInAsyncSteps implemented in C (here the tiny engine of
// the tests): Go steps run on that engine through the usual API, errors
// included.
func ExampleWrap_foreign() {
	p := cengine.NewRoot() // a root of the C engine
	root := ffi.Wrap(p)
	root.Add(func(as vm.AsyncSteps, _ vm.Args) {
		fmt.Println("Go step on a C engine")
		as.Add(func(as vm.AsyncSteps, _ vm.Args) {
			as.Error("Oops")
		}, func(as vm.AsyncSteps, code string) {
			fmt.Println("handled", code)
			as.Success(vm.Int(42))
		})
	})
	root.Add(func(as vm.AsyncSteps, args vm.Args) { fmt.Println("got", args.Int(0)) })
	root.Execute()
	cengine.Run() // the C engine's event loop
	cengine.Free(p)
	// Output:
	// Go step on a C engine
	// handled Oops
	// got 42
}
