package ffi

/*
#cgo CFLAGS: -I${SRCDIR}/include -std=gnu11 -Wall
#include "ffi.h"
*/
import "C"

import "unsafe"

// binval mirrors FutoInBinaryValue, whose anonymous union cgo cannot name.
type binval struct {
	typ    *C.FutoInType
	u      uint64  // the union: a pointer or a scalar
	custom uintptr // any integer: C may store one in a void*
	length uint32
	_      uint32
}

// The mirror must match the C layout exactly.
var (
	_ [unsafe.Offsetof(binval{}.u) - C.stepvm_off_binval_u]struct{}
	_ [C.stepvm_off_binval_u - unsafe.Offsetof(binval{}.u)]struct{}
	_ [unsafe.Offsetof(binval{}.custom) - C.stepvm_off_binval_custom]struct{}
	_ [C.stepvm_off_binval_custom - unsafe.Offsetof(binval{}.custom)]struct{}
	_ [unsafe.Offsetof(binval{}.length) - C.stepvm_off_binval_length]struct{}
	_ [C.stepvm_off_binval_length - unsafe.Offsetof(binval{}.length)]struct{}
	_ [unsafe.Sizeof(binval{}) - C.stepvm_size_binval]struct{}
	_ [C.stepvm_size_binval - unsafe.Sizeof(binval{})]struct{}
)

// cargs is FutoInArgs seen from Go.
type cargs [4]binval

func argsOf(p *C.FutoInArgs) *cargs { return (*cargs)(unsafe.Pointer(p)) }
