//go:build cgo

package ffi_test

import (
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/vm"
)

// Binary and Wrap are part of the public API contract; this fails to
// compile if their signatures change.
var (
	_ func(vm.AsyncSteps) unsafe.Pointer = ffi.Binary
	_ func(unsafe.Pointer) vm.AsyncSteps = ffi.Wrap
)
