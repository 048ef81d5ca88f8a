package prog

import (
	"fmt"
	"strconv"
)

// SyntaxError is an error in a program's text, at a 1-based line and
// column (in bytes).
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tInt
	tFloat
	tDur
	tString
	tLBrace
	tRBrace
	tLBrack
	tRBrack
	tComma
	tColon
	tSemi
)

var tokNames = [...]string{
	tEOF: "end of file", tIdent: "name", tInt: "integer", tFloat: "float",
	tDur: "duration", tString: "string", tLBrace: "{", tRBrace: "}",
	tLBrack: "[", tRBrack: "]", tComma: ",", tColon: ":", tSemi: ";",
}

type token struct {
	kind      tokKind
	line, col int
	text      string  // identifier, or the literal as written
	str       string  // tString: the unquoted value
	num       int64   // tInt, tDur
	flt       float64 // tFloat
}

func (t token) String() string {
	switch t.kind {
	case tIdent, tInt, tFloat, tDur, tString:
		return strconv.Quote(t.text)
	}
	return tokNames[t.kind]
}

// scanner splits a program's text into tokens. Comments run from # to the
// end of the line.
type scanner struct {
	src       string
	off       int
	line, col int
}

func (s *scanner) errorf(line, col int, format string, args ...any) error {
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func isLetter(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

// advance moves over n bytes of the current line.
func (s *scanner) advance(n int) {
	s.off += n
	s.col += n
}

func (s *scanner) next() (token, error) {
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case c == '\n':
			s.off++
			s.line++
			s.col = 1
		case c == ' ' || c == '\t' || c == '\r':
			s.advance(1)
		case c == '#':
			for s.off < len(s.src) && s.src[s.off] != '\n' {
				s.advance(1)
			}
		default:
			return s.token()
		}
	}
	return token{kind: tEOF, line: s.line, col: s.col}, nil
}

func (s *scanner) token() (token, error) {
	t := token{line: s.line, col: s.col}
	start := s.off
	c := s.src[s.off]
	switch {
	case isLetter(c):
		for s.off < len(s.src) && (isLetter(s.src[s.off]) || isDigit(s.src[s.off])) {
			s.advance(1)
		}
		t.kind, t.text = tIdent, s.src[start:s.off]
		return t, nil
	case isDigit(c) || c == '-' && s.off+1 < len(s.src) && isDigit(s.src[s.off+1]):
		return s.number(t)
	case c == '"':
		return s.string(t)
	}
	if k := punct(c); k != tEOF {
		s.advance(1)
		t.kind = k
		return t, nil
	}
	if c < 0x20 || c >= 0x7f {
		return t, s.errorf(t.line, t.col, "unexpected byte %#02x", c)
	}
	return t, s.errorf(t.line, t.col, "unexpected character %q", c)
}

func (s *scanner) digits() {
	for s.off < len(s.src) && isDigit(s.src[s.off]) {
		s.advance(1)
	}
}

// number scans an integer, a float or a duration (an integer followed by
// ms).
func (s *scanner) number(t token) (token, error) {
	start := s.off
	if s.src[s.off] == '-' {
		s.advance(1)
	}
	s.digits()
	isFloat := false
	if s.off+1 < len(s.src) && s.src[s.off] == '.' && isDigit(s.src[s.off+1]) {
		isFloat = true
		s.advance(1)
		s.digits()
	}
	if s.off < len(s.src) && (s.src[s.off] == 'e' || s.src[s.off] == 'E') {
		j := s.off + 1
		if j < len(s.src) && (s.src[j] == '+' || s.src[j] == '-') {
			j++
		}
		if j < len(s.src) && isDigit(s.src[j]) {
			isFloat = true
			s.advance(j - s.off)
			s.digits()
		}
	}
	t.text = s.src[start:s.off]
	if !isFloat && s.off+1 < len(s.src) && s.src[s.off] == 'm' && s.src[s.off+1] == 's' &&
		(s.off+2 == len(s.src) || !isLetter(s.src[s.off+2]) && !isDigit(s.src[s.off+2])) {
		s.advance(2)
		t.kind = tDur
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil || v < 0 || v > MaxDuration {
			return t, s.errorf(t.line, t.col, "duration %sms out of range 0ms..%dms", t.text, MaxDuration)
		}
		t.text += "ms"
		t.num = v
		return t, nil
	}
	if s.off < len(s.src) && (isLetter(s.src[s.off]) || s.src[s.off] == '.') {
		return t, s.errorf(t.line, t.col, "malformed number %q", t.text+string(s.src[s.off]))
	}
	if isFloat {
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || !validFloat(f) {
			return t, s.errorf(t.line, t.col, "float %s out of range", t.text)
		}
		t.kind, t.flt = tFloat, f
		return t, nil
	}
	v, err := strconv.ParseInt(t.text, 10, 64)
	if err != nil {
		return t, s.errorf(t.line, t.col, "integer %s out of range", t.text)
	}
	t.kind, t.num = tInt, v
	return t, nil
}

func (s *scanner) string(t token) (token, error) {
	start := s.off
	s.advance(1)
	for {
		if s.off >= len(s.src) || s.src[s.off] == '\n' {
			return t, s.errorf(t.line, t.col, "string not terminated")
		}
		c := s.src[s.off]
		if c == '"' {
			s.advance(1)
			break
		}
		if c == '\\' && s.off+1 < len(s.src) && s.src[s.off+1] != '\n' {
			s.advance(1)
		}
		s.advance(1)
	}
	t.text = s.src[start:s.off]
	v, err := strconv.Unquote(t.text)
	if err != nil {
		return t, s.errorf(t.line, t.col, "malformed string %s", t.text)
	}
	t.kind, t.str = tString, v
	return t, nil
}

func punct(c byte) tokKind {
	switch c {
	case '{':
		return tLBrace
	case '}':
		return tRBrace
	case '[':
		return tLBrack
	case ']':
		return tRBrack
	case ',':
		return tComma
	case ':':
		return tColon
	case ';':
		return tSemi
	}
	return tEOF
}
