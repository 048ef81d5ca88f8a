package vm

import (
	"math"
	"reflect"
	"strconv"
	"unsafe"
)

// Kind is the type held by a Value.
type Kind uint8

// The kinds of Value, one per constructor (Int, Uint, Float, Bool, Str,
// Bytes, Any).
const (
	KindNone Kind = iota // the zero Value, and Args.Get past Len
	KindInt
	KindUint
	KindFloat
	KindBool
	KindString
	KindBytes
	KindAny
)

var kindNames = [...]string{"none", "int", "uint", "float", "bool", "string", "bytes", "any"}

// String returns the kind's name ("int", "string", ...), and "kind?" for
// a value that is not a kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// Value is a tagged union of the values steps pass to each other. Scalars,
// strings and byte slices are stored without allocation; Any boxes its
// argument. The zero Value has KindNone.
type Value struct {
	ptr  unsafe.Pointer // string or bytes data; *any for KindAny
	num  uint64         // scalar bits, or the length of a string or bytes
	kind Kind
}

// Int returns a Value of KindInt.
func Int(v int64) Value { return Value{num: uint64(v), kind: KindInt} }

// Uint returns a Value of KindUint.
func Uint(v uint64) Value { return Value{num: v, kind: KindUint} }

// Float returns a Value of KindFloat.
func Float(v float64) Value { return Value{num: math.Float64bits(v), kind: KindFloat} }

// Bool returns a Value of KindBool.
func Bool(v bool) Value {
	var n uint64
	if v {
		n = 1
	}
	return Value{num: n, kind: KindBool}
}

// Str returns a Value of KindString that shares v's bytes, without
// allocating.
func Str(v string) Value {
	return Value{ptr: unsafe.Pointer(unsafe.StringData(v)), num: uint64(len(v)), kind: KindString}
}

// Bytes wraps b without copying: the receiving step sees the same array.
func Bytes(b []byte) Value {
	return Value{ptr: unsafe.Pointer(unsafe.SliceData(b)), num: uint64(len(b)), kind: KindBytes}
}

// Any boxes v; it allocates unless v is nil.
func Any(v any) Value {
	if v == nil {
		return Value{kind: KindAny}
	}
	return Value{ptr: unsafe.Pointer(&v), kind: KindAny}
}

// Kind returns the kind of the value.
func (v Value) Kind() Kind { return v.kind }

// Int returns the value as int64: ints and uints as they are, floats
// truncated, bools as 0 or 1, and 0 for other kinds.
func (v Value) Int() int64 {
	switch v.kind {
	case KindInt, KindUint, KindBool:
		return int64(v.num)
	case KindFloat:
		return int64(math.Float64frombits(v.num))
	}
	return 0
}

// Uint is Int converted to uint64.
func (v Value) Uint() uint64 {
	if v.kind == KindUint {
		return v.num
	}
	return uint64(v.Int())
}

// Float returns the value as float64: floats as they are, ints, uints and
// bools converted, and 0 for other kinds.
func (v Value) Float() float64 {
	switch v.kind {
	case KindFloat:
		return math.Float64frombits(v.num)
	case KindInt, KindBool:
		return float64(int64(v.num))
	case KindUint:
		return float64(v.num)
	}
	return 0
}

// Bool reports whether the value is non-zero: a number other than 0 (or
// a NaN), true, a non-empty string or bytes, a non-nil Any.
func (v Value) Bool() bool {
	switch v.kind {
	case KindFloat: // by value, not bits: -0 is zero
		return math.Float64frombits(v.num) != 0
	case KindString, KindBytes:
		return v.num != 0
	case KindAny:
		return v.ptr != nil
	}
	return v.num != 0
}

// String returns a string value as is and formats the other kinds, so that
// traces can print any Value.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return unsafe.String((*byte)(v.ptr), int(v.num))
	case KindBytes:
		return string(unsafe.Slice((*byte)(v.ptr), int(v.num)))
	case KindInt:
		return strconv.FormatInt(int64(v.num), 10)
	case KindUint:
		return strconv.FormatUint(v.num, 10)
	case KindFloat:
		return strconv.FormatFloat(math.Float64frombits(v.num), 'g', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.num != 0)
	case KindAny:
		if a := v.Any(); a != nil {
			if s, ok := a.(interface{ String() string }); ok {
				return stringOf(s)
			}
			return "<any>"
		}
		return "<nil>"
	}
	return ""
}

// stringOf returns s.String(), or "<nil>" for a nil pointer whose String
// method does not take one (a value method, or one that dereferences), as
// fmt prints it: a trace printing such a Value must not panic. Other
// panics of the method are its own and go on.
func stringOf(s interface{ String() string }) (str string) {
	defer func() {
		if p := recover(); p != nil {
			if rv := reflect.ValueOf(s); rv.Kind() == reflect.Pointer && rv.IsNil() {
				str = "<nil>"
				return
			}
			panic(p)
		}
	}()
	return s.String()
}

// Bytes returns the bytes of a bytes or string value (for a string, a read
// only view of its data), and nil otherwise.
func (v Value) Bytes() []byte {
	switch v.kind {
	case KindBytes, KindString:
		return unsafe.Slice((*byte)(v.ptr), int(v.num))
	}
	return nil
}

// Any returns the value boxed: the argument of Any as it was, and the Go
// value of the other kinds (which allocates for most of them).
func (v Value) Any() any {
	switch v.kind {
	case KindAny:
		if v.ptr == nil {
			return nil
		}
		return *(*any)(v.ptr)
	case KindInt:
		return int64(v.num)
	case KindUint:
		return v.num
	case KindFloat:
		return v.Float()
	case KindBool:
		return v.num != 0
	case KindString:
		return v.String()
	case KindBytes:
		return v.Bytes()
	}
	return nil
}

// MaxArgs is the most values one step passes to the next (the limit of the
// FTN12 binary interface).
const MaxArgs = 4

// argBuf holds the values passed from one step to the next.
type argBuf struct {
	v [MaxArgs]Value
	n uint8
}

// set stores vals, at most MaxArgs of them. It copies them one by one: a
// copy() of a pointerful slice is a runtime call, too slow for one value.
func (b *argBuf) set(vals []Value) {
	vals = vals[:min(len(vals), MaxArgs)]
	for i, v := range vals {
		b.v[i] = v
	}
	b.n = uint8(len(vals))
}

func (b *argBuf) copyFrom(o *argBuf) {
	for i := o.n; i < b.n; i++ { // values past o's would stay alive unseen
		b.v[i] = Value{}
	}
	b.n = o.n
	for i := uint8(0); i < o.n; i++ {
		b.v[i] = o.v[i]
	}
}

func (b *argBuf) clear() {
	for i := uint8(0); i < b.n; i++ {
		b.v[i] = Value{}
	}
	b.n = 0
}

// Args are the values the previous step succeeded with: a copy of them,
// which a step may keep, capture in a closure or hand to another goroutine
// as it would any value. (Values of strings and bytes share memory with
// the sender.)
type Args struct{ b argBuf }

// args returns the values b holds (none for a nil b) as Args.
func (b *argBuf) args() Args {
	if b == nil {
		return Args{}
	}
	return Args{*b}
}

// Len returns the number of values, at most MaxArgs.
func (a Args) Len() int { return int(a.b.n) }

// Get returns value i, or the zero Value when i is out of range.
func (a Args) Get(i int) Value {
	if uint(i) >= uint(a.b.n) {
		return Value{}
	}
	return a.b.v[i]
}

// Int is Get(i).Int(): 0 when i is out of range.
func (a Args) Int(i int) int64 { return a.Get(i).Int() }

// Uint is Get(i).Uint(): 0 when i is out of range.
func (a Args) Uint(i int) uint64 { return a.Get(i).Uint() }

// Float is Get(i).Float(): 0 when i is out of range.
func (a Args) Float(i int) float64 { return a.Get(i).Float() }

// Bool is Get(i).Bool(): false when i is out of range.
func (a Args) Bool(i int) bool { return a.Get(i).Bool() }

// String is Get(i).String(): "" when i is out of range.
func (a Args) String(i int) string { return a.Get(i).String() }

// BytesAt is Get(i).Bytes(): nil when i is out of range.
func (a Args) BytesAt(i int) []byte {
	return a.Get(i).Bytes()
}

// Any is Get(i).Any(): nil when i is out of range.
func (a Args) Any(i int) any { return a.Get(i).Any() }

// Values copies the values out.
func (a Args) Values() []Value {
	if a.Len() == 0 {
		return nil
	}
	return append([]Value(nil), a.b.v[:a.b.n]...)
}
