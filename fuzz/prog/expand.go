package prog

import (
	"strconv"
	"strings"
)

// Scope is what a template can refer to where it is expanded.
type Scope struct {
	Code string  // {code}: the error code, in an error handler
	Args []Value // {arg0}..{arg3}: the values the step received
	Info string  // {info}: the flow's error_info
	Loop LoopVars
	// State returns a state variable's text ({state.NAME}); nil: none set.
	State func(name string) (string, bool)
}

// LoopVars are the variables of the innermost repeat or forEach around a
// statement, which the steps it adds capture like closures do: {i} for a
// repeat, {key} and {val} for a forEach.
type LoopVars struct {
	Kind     LoopKind
	I        int
	Key, Val Value
}

// LoopKind tells which loop variables are bound.
type LoopKind uint8

const (
	NoLoop LoopKind = iota
	RepeatLoop
	ForEachLoop
)

// Expand replaces the references in a template by their text: {code},
// {info}, {arg0} to {arg3}, {i}, {key}, {val} and {state.NAME}. A
// reference to something the scope lacks expands to nothing; anything else
// in braces is kept as written.
func (sc *Scope) Expand(tmpl string) string {
	if !strings.Contains(tmpl, "{") {
		return tmpl
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		b.WriteString(tmpl[:i])
		name := tmpl[i+1 : i+j]
		if v, ok := sc.lookup(name); ok {
			b.WriteString(v)
		} else {
			b.WriteString(tmpl[i : i+j+1])
		}
		tmpl = tmpl[i+j+1:]
	}
}

func (sc *Scope) lookup(name string) (string, bool) {
	switch name {
	case "code":
		return sc.Code, true
	case "info":
		return sc.Info, true
	case "i":
		if sc.Loop.Kind == RepeatLoop {
			return strconv.Itoa(sc.Loop.I), true
		}
		return "", true
	case "key":
		if sc.Loop.Kind == ForEachLoop {
			return sc.Loop.Key.Text(), true
		}
		return "", true
	case "val":
		if sc.Loop.Kind == ForEachLoop {
			return sc.Loop.Val.Text(), true
		}
		return "", true
	case "arg0", "arg1", "arg2", "arg3":
		if k := int(name[3] - '0'); k < len(sc.Args) {
			return sc.Args[k].Text(), true
		}
		return "", true
	}
	if v, ok := strings.CutPrefix(name, "state."); ok {
		if sc.State != nil {
			s, _ := sc.State(v)
			return s, true
		}
		return "", true
	}
	return "", false
}
