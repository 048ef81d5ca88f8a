package prog

import (
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a Value.
type Kind uint8

const (
	Int Kind = iota
	Float
	Str
	Bool
)

// Value is a literal a step succeeds with: an integer, a finite float, a
// string or a boolean. Only the field of its Kind is set.
type Value struct {
	Kind  Kind
	Int   int64
	Float float64
	Str   string
	Bool  bool
}

// IntValue, FloatValue, StrValue and BoolValue make Values.
func IntValue(v int64) Value     { return Value{Kind: Int, Int: v} }
func FloatValue(v float64) Value { return Value{Kind: Float, Float: v} }
func StrValue(v string) Value    { return Value{Kind: Str, Str: v} }
func BoolValue(v bool) Value     { return Value{Kind: Bool, Bool: v} }

// String returns v in the syntax of the language: strings quoted, floats
// always with a point or an exponent so that they read back as floats.
func (v Value) String() string {
	switch v.Kind {
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		s := strconv.FormatFloat(v.Float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case Str:
		return strconv.Quote(v.Str)
	case Bool:
		return strconv.FormatBool(v.Bool)
	}
	return "?"
}

// Text returns v as a template expansion shows it: strings as they are,
// the other kinds as String does.
func (v Value) Text() string {
	if v.Kind == Str {
		return v.Str
	}
	return v.String()
}

// validFloat reports whether f can be written and read back: NaN and the
// infinities cannot.
func validFloat(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// FormatValues returns vals separated by spaces, each in the syntax of the
// language, with a leading space unless vals is empty: the form traces
// append to an event.
func FormatValues(vals []Value) string {
	var b strings.Builder
	for _, v := range vals {
		b.WriteByte(' ')
		b.WriteString(v.String())
	}
	return b.String()
}
