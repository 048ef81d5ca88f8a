package vm

// State is the state of a flow (FTN12 1.7): variables shared by every step
// and branch of one root, plus the predefined error_info, last_exception and
// async_stack. It lives as long as its root and is cleared by Release.
// Keep the handle, not the *State: the root's memory, its State included,
// serves the next root the loop creates after Release, and a *State kept
// past it reads and writes that root's state.
type State struct {
	vars map[string]any

	errorInfo string
	lastCode  string
	lastInfo  string
	lastPanic any
	hasLast   bool
	stack     []uintptr // entry PCs of the step functions at the last error

	// The root's rarely used parts (see root.state).
	future    *Future  // settled when the run ends (Promise)
	futureNum uint32   // future's number in its loop's futureTable
	labels    []string // loop labels by slot number
	foreign   Foreign  // non-nil: the root is a stand-in for a foreign flow (foreign.go)
	misused   bool     // the root's set-up was misused: its next run fails (misuseIdle)
	// shrunk: a variable was Unset while more than pooledSlots were set.
	// The map keeps the table it grew to, which reset must drop.
	shrunk bool

	// native is what a foreign-function binding attached to the root
	// (SetNativeRootValue). Kept here rather than in the root, which most
	// flows keep small; reset leaves it: it lives as long as the root.
	native any
}

// Get returns the variable key and whether it is set.
func (s *State) Get(key string) (any, bool) {
	v, ok := s.vars[key]
	return v, ok
}

// Set sets variable key to v.
func (s *State) Set(key string, v any) {
	if s.vars == nil {
		s.vars = make(map[string]any)
	}
	s.vars[key] = v
}

// Exists reports whether variable key is set.
func (s *State) Exists(key string) bool {
	_, ok := s.vars[key]
	return ok
}

// Unset removes variable key.
func (s *State) Unset(key string) {
	if len(s.vars) > pooledSlots {
		s.shrunk = true
	}
	delete(s.vars, key)
}

// Keys returns the names of the variables, in no particular order.
func (s *State) Keys() []string {
	keys := make([]string, 0, len(s.vars))
	for k := range s.vars {
		keys = append(keys, k)
	}
	return keys
}

// ErrorInfo is the info of the last Error raised in the flow ("" if none
// was given), FTN12's error_info.
func (s *State) ErrorInfo() string { return s.errorInfo }

// LastException is the last error the flow raised or the last panic it
// recovered: an *Error for Error calls, timeouts and FutoIn errors, a
// *PanicError for other panics, nil if there was none. FTN12's
// last_exception.
func (s *State) LastException() error {
	if !s.hasLast {
		return nil
	}
	if s.lastPanic != nil {
		if e, ok := s.lastPanic.(*Error); ok {
			return e
		}
		return &PanicError{Value: s.lastPanic}
	}
	return &Error{Code: s.lastCode, Info: s.lastInfo}
}

// AsyncStack returns the entry PCs of the step functions that were on the
// flow's stack when the last error was raised, innermost last (FTN12's
// async_stack). runtime.FuncForPC names them.
func (s *State) AsyncStack() []uintptr { return append([]uintptr(nil), s.stack...) }

func (s *State) recordError(code, info string) {
	s.errorInfo = info
	s.recordLast(code, info)
}

// recordLast records an error as LastException only: one that is not
// raised, such as misuse in a cancel handler, leaves ErrorInfo to the
// error being raised.
func (s *State) recordLast(code, info string) {
	s.lastCode, s.lastInfo, s.lastPanic, s.hasLast = code, info, nil, true
}

func (s *State) recordPanic(v any) {
	if e, ok := v.(*Error); ok {
		v = RaisedError(e)
	}
	s.lastPanic, s.hasLast = v, true
}

func (s *State) reset() {
	// What one large run grew is dropped rather than kept for the next
	// (a pooled root keeps its State): a map keeps its buckets when
	// cleared, and when its variables are Unset (shrunk).
	switch {
	case len(s.vars) > pooledSlots || s.shrunk:
		s.vars, s.shrunk = nil, false
	case len(s.vars) != 0:
		clear(s.vars)
	}
	s.errorInfo, s.lastCode, s.lastInfo, s.lastPanic, s.hasLast = "", "", "", nil, false
	s.misused = false
	if cap(s.stack) > pooledSlots {
		s.stack = nil
	} else {
		s.stack = s.stack[:0]
	}
	if cap(s.labels) > pooledSlots {
		s.labels = nil
	}
}

// copyMissing copies the variables of m that s lacks (CopyFrom).
func (s *State) copyMissing(m *State) {
	if m == nil {
		return
	}
	for k, v := range m.vars {
		if _, ok := s.vars[k]; !ok {
			s.Set(k, v)
		}
	}
}
