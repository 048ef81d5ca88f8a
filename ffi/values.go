package ffi

/*
#include "ffi.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// Object is a custom object (FTN_TYPE_CUSTOM_OBJECT) that C code passed to
// success; Go steps receive it as vm.Any(*Object) and may pass it on. Its
// cleanup runs exactly once: when Release is called, when a C step it was
// lent to returns without passing it on, or, for an Object dropped without
// either, once the garbage collector finds it unreachable (on the loop's
// goroutine while the loop runs; on a goroutine of its own once the loop
// has been closed or collected). An Object does not keep its loop alive.
//
// An Object a foreign AsyncSteps engine passes to a Go step (see Wrap) is
// lent: it is valid during the step's call, its cleanup is the engine's
// business, Release does nothing, and it cannot be passed on.
type Object struct{ st *objState }

// objState is an Object's cleanup argument, so it must not lead back to
// the Object: it reaches the loop through res only, which does not hold
// the loop either, or an Object the loop's flows hold would keep the loop
// alive for good.
type objState struct {
	typ    *C.FutoInType
	u      uint64
	custom uintptr
	length uint32
	res    *loopRes // nil: lent by a foreign engine
	done   atomic.Bool
}

func newObject(res *loopRes, b *binval) *Object {
	st := &objState{typ: b.typ, u: b.u, custom: b.custom, length: b.length, res: res}
	o := &Object{st}
	runtime.AddCleanup(o, orphaned, st)
	return o
}

// Pointer returns the object's p field. Like Data, it is an integer: C
// code may store anything there, and Go must not hold a value that is not a
// valid pointer in a pointer type.
func (o *Object) Pointer() uintptr { return uintptr(o.st.u) }

// Data returns the object's custom_data field.
func (o *Object) Data() uintptr { return o.st.custom }

// Len returns the object's length field.
func (o *Object) Len() uint32 { return o.st.length }

// Release runs the object's cleanup, unless it has already run. Call it on
// the goroutine of the loop whose flow received the object; called on any
// other, the cleanup runs for no loop.
func (o *Object) Release() { o.st.release() }

// take claims the object's cleanup: it reports whether one is to run.
func (st *objState) take() bool {
	return st.done.CompareAndSwap(false, true) && st.typ.cleanup != nil
}

// cleanup runs the object's C cleanup for the given loop (0: none).
func (st *objState) cleanup(loop C.uint32_t) {
	C.stepvm_cleanup_value(st.typ, C.uint64_t(st.u), C.uintptr_t(st.custom), C.uint32_t(st.length), loop)
}

// release runs the cleanup for the object's loop when called on its
// goroutine, and for none elsewhere (or once the loop has been collected):
// another goroutine must not enter the loop's call state.
func (st *objState) release() {
	if !st.take() {
		return
	}
	if ls := st.res.ls.Value(); ls != nil && !ls.elsewhere() {
		st.runFor(ls)
		return
	}
	st.cleanup(0)
}

// releaseIn runs the cleanup for ls, the loop whose goroutine calls it,
// which need not be the object's own: a C step of one loop may pass an
// object to a step of another.
func (st *objState) releaseIn(ls *loopState) {
	if st.take() {
		st.runFor(ls)
	}
}

func (st *objState) runFor(ls *loopState) {
	s := ls.enter(vm.AsyncSteps{})
	st.cleanup(ls.id)
	ls.leave(s) // a cleanup has no flow to fail
}

// releaseOff runs the cleanup off the loop's goroutine, for no loop.
func (st *objState) releaseOff() {
	if st.take() {
		st.cleanup(0)
	}
}

// orphaned releases an object the program dropped: on its loop while the
// loop can run callbacks, which it holds for loopGone meanwhile, since a
// loop the program drops runs none; at once otherwise.
func orphaned(st *objState) {
	if st.done.Load() {
		return
	}
	res := st.res
	if ls := res.ls.Value(); ls != nil {
		res.mu.Lock()
		res.orphans = append(res.orphans, st)
		res.mu.Unlock()
		if ls.l.Post(res.drain) {
			return
		}
		res.releaseOrphansOff() // the loop is closed: nothing else runs its callbacks
		return
	}
	st.releaseOff()
}

// releaseOrphans runs the cleanups of the Objects orphaned queued, on the
// loop's goroutine.
func (res *loopRes) releaseOrphans() {
	ls := res.ls.Value() // alive: this runs on its loop
	for _, st := range res.takeOrphans() {
		st.releaseIn(ls)
	}
}

// releaseOrphansOff runs them off the loop's goroutine.
func (res *loopRes) releaseOrphansOff() {
	for _, st := range res.takeOrphans() {
		st.releaseOff()
	}
}

func (res *loopRes) takeOrphans() []*objState { return take(res, &res.orphans) }

// cArgs returns the values of args as a FutoInArgs in the loop's scratch
// memory, for the C call just entered, and its size: the caller gives it
// back (unlend) once the call has returned, and the Objects among them,
// which it adds to lentObjs (settleStep). It stamps the call anew, so that
// a Go value lent to an earlier call is refused (see object).
func (ls *loopState) cArgs(args *vm.Args) (*C.FutoInArgs, int) {
	ls.lends++
	ls.lentID = ls.lends
	n := args.Len()
	if n == 0 {
		return &C.stepvm_no_args, 0
	}
	size := C.sizeof_FutoInArgs
	for i := range n {
		if k := args.Get(i).Kind(); k == vm.KindString || k == vm.KindBytes {
			size += len(args.Get(i).Bytes()) + 1
		}
	}
	p := ls.scratch.Alloc(uintptr(size))
	ls.lentArgs, ls.lentSize = p, size
	a := (*cargs)(p)
	extra := unsafe.Add(p, C.sizeof_FutoInArgs)
	for i := range n {
		v, b := args.Get(i), &a[i]
		u := unsafe.Pointer(&b.u)
		switch v.Kind() {
		case vm.KindInt, vm.KindUint, vm.KindFloat, vm.KindBool:
			putScalar(b, v)
		case vm.KindString, vm.KindBytes:
			b.typ = &C.stepvm_base_types[C.FTN_TYPE_STRING]
			if v.Kind() == vm.KindBytes {
				b.typ = &C.stepvm_bytes_type
			}
			data := v.Bytes()
			copy(unsafe.Slice((*byte)(extra), len(data)), data)
			*(*unsafe.Pointer)(u) = extra
			b.length = uint32(len(data))
			extra = unsafe.Add(extra, len(data)+1) // Alloc zeroed the NUL
		case vm.KindAny:
			if o, ok := v.Any().(*Object); ok {
				b.typ, b.u, b.custom, b.length = o.st.typ, o.st.u, o.st.custom, o.st.length
				ls.lentObjs = append(ls.lentObjs, lentObj{o: o})
				break
			}
			// A Go value is opaque to C, which may only pass it on: the
			// index tells success which lent value it is, the stamp
			// that it was lent to this call.
			b.typ = &C.stepvm_go_value_type
			b.u, b.custom = ls.lentID, uintptr(i+1)
			if ls.lentAt == 0 {
				ls.lent = append(ls.lent, *args)
				ls.lentAt = len(ls.lent)
			}
		}
	}
	return (*C.FutoInArgs)(p), size
}

// unlend gives back size bytes of scratch memory at p that a C call was
// lent (none for size 0), once the call has returned.
func (ls *loopState) unlend(p unsafe.Pointer, size int) {
	if size != 0 {
		ls.scratch.Free(p, uintptr(size))
	}
}

// What success does with a value it took.
const (
	dispUnread  = iota // after an unusable one: taken, unless lent (discard)
	dispCopied         // copied into Go: run its cleanup
	dispOwned          // a new Object owns it
	dispLent           // a value stepvm lent to a C step, passed back
	dispBad            // unusable: success fails, but takes it as copied
	dispBadType        // its type is no pointer: success fails, and drops it
)

// maxBytes bounds the arrays success accepts: a length beyond it is taken
// for garbage rather than read.
const maxBytes = 1 << 30

// fromC takes the values of a C success into vals, through ls, the loop
// whose C call lent values (if any): it converts them, runs the cleanup of
// those it copied, and empties args, which now belong to stepvm. A new
// Object belongs to owner, the loop of the step that succeeds. It returns
// the number of values, or why they are unusable: it then takes them all
// the same, as discard does.
func fromC(ls *loopState, owner *loopRes, args *C.FutoInArgs, vals *[vm.MaxArgs]vm.Value) (int, string) {
	if args == nil || args == &C.stepvm_no_args {
		// The empty FutoInArgs lent to steps without values is const C
		// memory: a step that passes back what it received must not
		// have it written to.
		return 0, ""
	}
	a := argsOf(args)
	n := 0
	for i := range a {
		if a[i].typ != nil {
			n = i + 1
		}
	}
	var disp [vm.MaxArgs]int
	var bad string
	for i := range a {
		if t := typeAddr(&a[i]); badType(t) {
			disp[i] = dispBadType
			if bad == "" {
				bad = fmt.Sprintf("argument %d: type at address %#x, which is not a pointer", i, t)
			}
		}
	}
	for i := range n {
		if a[i].typ == nil || bad != "" {
			continue
		}
		if vals[i], disp[i], bad = ls.value(owner, &a[i]); bad != "" {
			bad = fmt.Sprintf("argument %d: %s", i, bad)
			break
		}
	}
	for i := range a {
		b := &a[i]
		switch {
		case b.typ == nil, disp[i] == dispBadType:
		case disp[i] == dispLent && bad == "":
			ls.passOn(b)
		case disp[i] == dispUnread && ls.lentValue(b):
		case disp[i] == dispUnread || disp[i] == dispCopied || disp[i] == dispBad:
			C.stepvm_cleanup_arg((*C.FutoInBinaryValue)(unsafe.Pointer(b)), ls.id)
		case disp[i] == dispOwned && bad != "":
			vals[i].Any().(*Object).st.releaseIn(ls)
		}
		*b = binval{}
	}
	if bad != "" {
		// The lent values read are not passed on (passOn): the step
		// releases them as it returns.
		*vals = [vm.MaxArgs]vm.Value{}
		return 0, bad
	}
	return n, ""
}

// value converts one C value; a new Object belongs to owner's loop.
func (ls *loopState) value(owner *loopRes, b *binval) (vm.Value, int, string) {
	if uint8(b.typ.flags) == C.FTN_TYPE_CUSTOM_OBJECT {
		return ls.object(owner, b)
	}
	if s, ok := ls.lentString(b); ok {
		return vm.Str(s), dispCopied, ""
	}
	return plainValue(b)
}

// lentString reads a string stepvm lent to the innermost C step, which
// that step passes back: to its length, as a Go string may hold NULs,
// which a string from C may not before its length (cString).
func (ls *loopState) lentString(b *binval) (string, bool) {
	if ls.lentArgs == nil || b.typ != &C.stepvm_base_types[C.FTN_TYPE_STRING] {
		return "", false
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&b.u))
	start, end := uintptr(ls.lentArgs), uintptr(ls.lentArgs)+uintptr(ls.lentSize)
	if at := uintptr(p); at < start || at >= end || uint64(end-at) <= uint64(b.length) {
		return "", false // not within the block, NUL included
	}
	return C.GoStringN((*C.char)(p), C.int(b.length)), true
}

// plainValue copies a C value that is not a custom object.
func plainValue(b *binval) (vm.Value, int, string) {
	flags := uint8(b.typ.flags)
	u := unsafe.Pointer(&b.u)
	if flags&C.FTN_COMPLEX_TYPE_MASK == C.FTN_TYPE_ARRAY {
		return array(flags&C.FTN_BASE_TYPE_MASK, &b.u, b.length)
	}
	switch flags {
	case C.FTN_TYPE_STRING:
		s, bad := cString(&b.u, b.length, 1)
		return vm.Str(s), dispCopied, bad
	case C.FTN_TYPE_STRING16:
		s, bad := cString(&b.u, b.length, 2)
		return vm.Str(s), dispCopied, bad
	case C.FTN_TYPE_STRING32:
		s, bad := cString(&b.u, b.length, 4)
		return vm.Str(s), dispCopied, bad
	case C.FTN_TYPE_BOOL:
		return vm.Bool(*(*uint8)(u) != 0), dispCopied, "" // not read as a bool: see array
	case C.FTN_TYPE_INT8:
		return vm.Int(int64(*(*int8)(u))), dispCopied, ""
	case C.FTN_TYPE_INT16:
		return vm.Int(int64(*(*int16)(u))), dispCopied, ""
	case C.FTN_TYPE_INT32:
		return vm.Int(int64(*(*int32)(u))), dispCopied, ""
	case C.FTN_TYPE_INT64:
		return vm.Int(*(*int64)(u)), dispCopied, ""
	case C.FTN_TYPE_UINT8:
		return vm.Uint(uint64(*(*uint8)(u))), dispCopied, ""
	case C.FTN_TYPE_UINT16:
		return vm.Uint(uint64(*(*uint16)(u))), dispCopied, ""
	case C.FTN_TYPE_UINT32:
		return vm.Uint(uint64(*(*uint32)(u))), dispCopied, ""
	case C.FTN_TYPE_UINT64:
		return vm.Uint(*(*uint64)(u)), dispCopied, ""
	case C.FTN_TYPE_FLOAT:
		return vm.Float(float64(*(*float32)(u))), dispCopied, ""
	case C.FTN_TYPE_DOUBLE:
		return vm.Float(*(*float64)(u)), dispCopied, ""
	}
	return vm.Value{}, dispBad, fmt.Sprintf("unknown type tag 0x%02x", flags)
}

// object converts a custom object: one stepvm lent to the running C step
// (an Object, to any C step whose call runs) comes back as it was; any
// other becomes an Object.
func (ls *loopState) object(owner *loopRes, b *binval) (vm.Value, int, string) {
	if b.typ == &C.stepvm_go_value_type {
		k := int(b.custom) - 1
		var v vm.Value
		if ls.lentAt != 0 && b.u == ls.lentID {
			v = ls.lent[ls.lentAt-1].Get(k) // the zero Value for a k out of range
		}
		if v.Kind() != vm.KindAny {
			return vm.Value{}, dispBad, "a Go value can only be passed on by the C step it was passed to, during that call"
		}
		return v, dispLent, ""
	}
	if k := ls.lentObject(b); k >= 0 {
		return vm.Any(ls.lentObjs[k].o), dispLent, ""
	}
	return vm.Any(newObject(owner, b)), dispOwned, ""
}

// lentObject returns the position in lentObjs of the Object lent to a C
// step whose call runs that b is, the innermost call's first, or -1.
func (ls *loopState) lentObject(b *binval) int {
	for k := len(ls.lentObjs) - 1; k >= 0; k-- {
		if o := ls.lentObjs[k].o; o != nil && o.st.typ == b.typ && o.st.u == b.u && o.st.custom == b.custom {
			return k
		}
	}
	return -1
}

// passOn marks the lent Object that b is, if it is one, as passed on: the
// step it was lent to does not release it.
func (ls *loopState) passOn(b *binval) {
	if k := ls.lentObject(b); k >= 0 {
		ls.lentObjs[k].passed = true
	}
}

// discard takes the values of a success refused unread (a NULL or stale
// record, a call ignored after handle_error): success takes its values,
// accepted or not, or a late completion, a C library's commonest, would
// leak those with a cleanup. Their cleanups run for the C call of loop cur
// (0: none), and args is emptied, but for the values lent to the C calls
// of ls (its loop's state; nil: none) that run, which are left as they
// are: they are stepvm's still, the calls may read them on, and a custom
// object among them is released as its call returns (settleStep).
func discard(ls *loopState, args *C.FutoInArgs, cur C.uint32_t) {
	if args == nil || args == &C.stepvm_no_args {
		return // const C memory; see fromC
	}
	a := argsOf(args)
	for i := range a {
		b := &a[i]
		switch {
		case badType(typeAddr(b)):
			*b = binval{}
		case b.typ != nil && !ls.lentValue(b):
			C.stepvm_cleanup_arg((*C.FutoInBinaryValue)(unsafe.Pointer(b)), cur)
		}
	}
}

// typeAddr returns b's type pointer as the integer it may be: read as a
// pointer, an address in the first page would fail the runtime's stack
// checks (see pointerAt).
func typeAddr(b *binval) uintptr { return *(*uintptr)(unsafe.Pointer(&b.typ)) }

// badType reports whether a type pointer is an integer in the first page,
// which neither conversion nor a value's C cleanup can follow.
func badType(t uintptr) bool { return t != 0 && t < 4096 }

// lentValue reports whether b is a value lent to a C call of ls (nil:
// none): one of stepvm's own types, which only such values have, or a
// custom object lent to a C step whose call runs.
func (ls *loopState) lentValue(b *binval) bool {
	base := uintptr(unsafe.Pointer(&C.stepvm_base_types[0]))
	switch t := uintptr(unsafe.Pointer(b.typ)); {
	case t-base < unsafe.Sizeof(C.stepvm_base_types), b.typ == &C.stepvm_bytes_type, b.typ == &C.stepvm_go_value_type:
		return true
	}
	return ls != nil && uint8(b.typ.flags) == C.FTN_TYPE_CUSTOM_OBJECT && ls.lentObject(b) >= 0
}

// pointerAt returns the pointer the union u holds, or why it is not one.
// Addresses in the first page are integers, not data: holding one in an
// unsafe.Pointer would fail the runtime's stack checks.
func pointerAt(u *uint64, length uint32, what string) (unsafe.Pointer, string) {
	switch {
	case *u == 0 && length != 0:
		return nil, fmt.Sprintf("NULL %s of length %d", what, length)
	case *u != 0 && *u < 4096:
		return nil, fmt.Sprintf("%s at address %#x, which is not a pointer", what, *u)
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(u)), ""
}

// cString copies a string of width-byte code units. A length of 0 means
// NUL-terminated; a NUL before length means length runs past the data.
func cString(u *uint64, length uint32, width int) (string, string) {
	p, bad := pointerAt(u, length, "string")
	if p == nil {
		return "", bad
	}
	n := 0
	limit := int(length)
	if limit == 0 {
		limit = maxBytes / width
	} else if limit > maxBytes/width {
		return "", fmt.Sprintf("string length %d is beyond any plausible data", length)
	}
	for n < limit && unit(p, n, width) != 0 {
		n++
	}
	if length != 0 && n < limit {
		return "", fmt.Sprintf("string length %d is beyond its data (a NUL at %d)", length, n)
	}
	switch width {
	case 1:
		return C.GoStringN((*C.char)(p), C.int(n)), ""
	case 2:
		return string(utf16.Decode(unsafe.Slice((*uint16)(p), n))), ""
	}
	var sb strings.Builder
	for _, r := range unsafe.Slice((*rune)(p), n) {
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	return sb.String(), ""
}

func unit(p unsafe.Pointer, i, width int) uint32 {
	switch width {
	case 1:
		return uint32(*(*uint8)(unsafe.Add(p, i)))
	case 2:
		return uint32(*(*uint16)(unsafe.Add(p, 2*i)))
	}
	return *(*uint32)(unsafe.Add(p, 4*i))
}

// array copies an array of base type base: UINT8 arrays become Bytes, the
// others Any of a Go slice.
func array(base uint8, u *uint64, length uint32) (vm.Value, int, string) {
	var size int
	switch base {
	case C.FTN_TYPE_BOOL, C.FTN_TYPE_INT8, C.FTN_TYPE_UINT8:
		size = 1
	case C.FTN_TYPE_INT16, C.FTN_TYPE_UINT16:
		size = 2
	case C.FTN_TYPE_INT32, C.FTN_TYPE_UINT32, C.FTN_TYPE_FLOAT:
		size = 4
	case C.FTN_TYPE_INT64, C.FTN_TYPE_UINT64, C.FTN_TYPE_DOUBLE:
		size = 8
	}
	switch {
	case size == 0:
		return vm.Value{}, dispBad, fmt.Sprintf("unknown type tag 0x%02x (arrays of base type %d are not supported)", C.FTN_TYPE_ARRAY|base, base)
	case uint64(length)*uint64(size) > maxBytes:
		return vm.Value{}, dispBad, fmt.Sprintf("array length %d is beyond any plausible data", length)
	}
	p, bad := pointerAt(u, length, "array")
	if bad != "" {
		return vm.Value{}, dispBad, bad
	}
	n := int(length)
	var v any
	switch base {
	case C.FTN_TYPE_UINT8:
		return vm.Bytes(C.GoBytes(p, C.int(n))), dispCopied, ""
	case C.FTN_TYPE_BOOL:
		// C's bytes are read as such: a byte other than 0 or 1 copied into
		// a bool would be true and false at once to compiled Go.
		bs := make([]bool, n)
		for i, c := range unsafe.Slice((*byte)(p), n) {
			bs[i] = c != 0
		}
		v = bs
	case C.FTN_TYPE_INT8:
		v = slices.Clone(unsafe.Slice((*int8)(p), n))
	case C.FTN_TYPE_INT16:
		v = slices.Clone(unsafe.Slice((*int16)(p), n))
	case C.FTN_TYPE_INT32:
		v = slices.Clone(unsafe.Slice((*int32)(p), n))
	case C.FTN_TYPE_INT64:
		v = slices.Clone(unsafe.Slice((*int64)(p), n))
	case C.FTN_TYPE_UINT16:
		v = slices.Clone(unsafe.Slice((*uint16)(p), n))
	case C.FTN_TYPE_UINT32:
		v = slices.Clone(unsafe.Slice((*uint32)(p), n))
	case C.FTN_TYPE_UINT64:
		v = slices.Clone(unsafe.Slice((*uint64)(p), n))
	case C.FTN_TYPE_FLOAT:
		v = slices.Clone(unsafe.Slice((*float32)(p), n))
	case C.FTN_TYPE_DOUBLE:
		v = slices.Clone(unsafe.Slice((*float64)(p), n))
	}
	return vm.Any(v), dispCopied, ""
}

// putScalar stores a scalar Value (int, uint, float, bool) in b as the
// FutoIn base type of its kind.
func putScalar(b *binval, v vm.Value) {
	u := unsafe.Pointer(&b.u)
	switch v.Kind() {
	case vm.KindInt:
		b.typ = &C.stepvm_base_types[C.FTN_TYPE_INT64]
		*(*int64)(u) = v.Int()
	case vm.KindUint:
		b.typ = &C.stepvm_base_types[C.FTN_TYPE_UINT64]
		*(*uint64)(u) = v.Uint()
	case vm.KindFloat:
		b.typ = &C.stepvm_base_types[C.FTN_TYPE_DOUBLE]
		*(*float64)(u) = v.Float()
	case vm.KindBool:
		b.typ = &C.stepvm_base_types[C.FTN_TYPE_BOOL]
		*(*bool)(u) = v.Bool()
	}
}
