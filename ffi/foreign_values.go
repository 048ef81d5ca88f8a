package ffi

/*
#include <stdlib.h>
#include "foreign.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Values between Go steps and a foreign engine. The engine owns the values
// it passes a step (FutoInArgs is const) and takes those passed to its
// success, emptying the caller's FutoInArgs, as stepvm does; values it
// leaves there were not taken and Go resets them.

// fromForeign copies the values a foreign engine passes a Go step: as
// stepvm's own C steps' values become Go values (see fromC), except custom
// objects: a Go value Go handed the engine comes back as it was, any other
// object is lent to the step (a borrowed *Object, valid during the call).
func fromForeign(args *C.FutoInArgs, vals *[vm.MaxArgs]vm.Value) (int, string) {
	if args == nil {
		return 0, ""
	}
	a := argsOf(args)
	n := 0
	for i := range a {
		b := &a[i]
		if b.typ == nil {
			continue
		}
		var v vm.Value
		bad := ""
		switch {
		case uint8(b.typ.flags) != C.FTN_TYPE_CUSTOM_OBJECT:
			v, _, bad = plainValue(b)
		case b.typ == &C.stepvm_fx_go_type:
			gv, ok := fxGet(b.custom).(fxValue)
			if !ok {
				bad = "a Go value that has been dropped"
			}
			v = gv.v
		default:
			v = vm.Any(borrowedObject(b))
		}
		if bad != "" {
			*vals = [vm.MaxArgs]vm.Value{}
			return 0, fmt.Sprintf("argument %d: %s", i, bad)
		}
		vals[i] = v
		n = i + 1
	}
	return n, ""
}

// borrowedObject returns a custom object a foreign engine lends: its
// cleanup is the engine's business, so it counts as released already.
func borrowedObject(b *binval) *Object {
	st := &objState{typ: b.typ, u: b.u, custom: b.custom, length: b.length}
	st.done.Store(true)
	return &Object{st}
}

// toForeign fills a with vals for a foreign success: scalars as INT64,
// UINT64, DOUBLE and BOOL; strings and byte slices copied to malloc'd
// memory, NUL-terminated, that their type's cleanup frees; an *Object that
// came from a stepvm C step passes to the engine with its cleanup (Go lets
// go of it); other Go values as custom objects of stepvm_fx_go_type, which
// a Go step gets back as they were. On failure, a may hold values
// converted before: the caller resets them.
func toForeign(vals []vm.Value, a *cargs) string {
	if len(vals) > vm.MaxArgs {
		return "more than 4 values"
	}
	for i, v := range vals {
		b := &a[i]
		u := unsafe.Pointer(&b.u)
		switch v.Kind() {
		case vm.KindInt, vm.KindUint, vm.KindFloat, vm.KindBool:
			putScalar(b, v)
		case vm.KindString, vm.KindBytes:
			data := v.Bytes()
			p := C.malloc(C.size_t(len(data) + 1))
			if p == nil {
				return fmt.Sprintf("argument %d: out of memory", i)
			}
			copy(unsafe.Slice((*byte)(p), len(data)), data)
			*(*byte)(unsafe.Add(p, len(data))) = 0
			b.typ = &C.stepvm_fx_string_type
			if v.Kind() == vm.KindBytes {
				b.typ = &C.stepvm_fx_bytes_type
			}
			*(*unsafe.Pointer)(u) = p
			b.length = uint32(len(data))
		case vm.KindAny:
			if o, ok := v.Any().(*Object); ok {
				if o.st.res == nil || !o.st.done.CompareAndSwap(false, true) {
					return fmt.Sprintf("argument %d: a custom object that has been released, or that a foreign engine lent, cannot be passed on", i)
				}
				b.typ, b.u, b.custom, b.length = o.st.typ, o.st.u, o.st.custom, o.st.length
				break
			}
			b.typ = &C.stepvm_fx_go_type
			b.custom = fxPut(fxValue{v})
		}
	}
	return ""
}

// resetArgs runs the cleanup of the values left in a.
func resetArgs(a *cargs) {
	for i := range a {
		if a[i].typ != nil {
			C.stepvm_cleanup_arg((*C.FutoInBinaryValue)(unsafe.Pointer(&a[i])), 0)
		}
		a[i] = binval{}
	}
}
