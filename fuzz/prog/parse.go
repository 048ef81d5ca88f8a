package prog

import (
	"fmt"
	"slices"
)

// Limits on the numbers a program may contain. They keep every program
// cheap to run and every count within an int on any platform.
const (
	MaxValues   = 4             // values of a success (the VM's limit)
	MaxCount    = 1_000_000     // repeat count, wait turns, mutex sizes
	MaxStack    = 65536         // bytes of one stack allocation
	MaxDuration = 1_000_000_000 // milliseconds of a timeout or cancel time
)

// maxDepth bounds the nesting of blocks. The parser, the printer, the
// model and the harness all recurse on it, and the parser keeps the labels
// of the enclosing loops per level: unbounded, a file of a few hundred
// kilobytes of nested loops took gigabytes, and deeper nesting overflowed
// the goroutine stack.
const maxDepth = 100

// maxCopied bounds the statements that copy statements copy, counted as
// they expand: a model copied twice by another, copied twice by a third,
// and so on, doubles with each model, and forty lines of them made the
// harness build trillions of steps until memory ran out.
const maxCopied = 1 << 20

// Parse reads a program. A program that parses is well-formed: every name
// it uses is declared before, every Break and Continue is inside a loop
// with that label, terminal statements end their blocks, and no step both
// adds sub-steps and succeeds or waits (the VM would report InternalError).
// The error, if any, is a *SyntaxError.
func Parse(src string) (prog *Program, err error) {
	p := &parser{s: scanner{src: src, line: 1, col: 1}, names: map[string]string{}, sizes: map[string]int{}}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*SyntaxError)
			if !ok {
				panic(r)
			}
			prog, err = nil, se
		}
	}()
	p.next()
	return p.program(), nil
}

// context is the kind of block a statement is in: it decides which
// statements are allowed.
type context uint8

const (
	inRoot     context = iota // the body of a root or a model
	inBody                    // a step, loop or sync body
	inHandler                 // an error handler
	inCancel                  // a cancel handler
	inParallel                // the branches of a parallel step
)

var contextNames = [...]string{
	inRoot: "a root or model body", inBody: "a step body", inHandler: "an error handler",
	inCancel: "a cancel handler", inParallel: "a parallel step (only adders are branches)",
}

type parser struct {
	s        scanner
	tok      token
	prevLine int               // line of the last token consumed
	names    map[string]string // declared name -> "root", "model" or "mutex"
	root     string            // the root whose body is being read; "" in a model
	depth    int               // blocks open
	size     int               // statements read, each copy counted as what it copies
	sizes    map[string]int    // model name -> its statements, copies expanded
	copied   int               // statements that copies copy, in the whole program
}

func (p *parser) failAt(t token, format string, args ...any) {
	panic(&SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) next() token {
	t := p.tok
	p.prevLine = t.line
	nt, err := p.s.next()
	if err != nil {
		panic(err)
	}
	p.tok = nt
	return t
}

func (p *parser) expect(k tokKind) token {
	if p.tok.kind != k {
		p.failAt(p.tok, "expected %s, found %s", tokNames[k], p.tok)
	}
	return p.next()
}

func (p *parser) ident(what string) token {
	if p.tok.kind != tIdent {
		p.failAt(p.tok, "expected %s, found %s", what, p.tok)
	}
	return p.next()
}

// lineEnd reports whether the current statement can end here: optional
// trailing operands must be on the statement's line.
func (p *parser) lineEnd() bool {
	switch p.tok.kind {
	case tEOF, tSemi, tRBrace:
		return true
	}
	return p.tok.line > p.prevLine
}

// endStmt consumes what separates a statement from the next.
func (p *parser) endStmt() {
	if p.tok.kind == tSemi {
		p.next()
		return
	}
	if !p.lineEnd() {
		p.failAt(p.tok, "unexpected %s at the end of a statement", p.tok)
	}
}

// optName reads an optional name before a block.
func (p *parser) optName() string {
	if p.tok.kind == tIdent && !p.lineEnd() {
		return p.next().text
	}
	return ""
}

func (p *parser) program() *Program {
	prog := &Program{}
	for p.tok.kind != tEOF {
		kw := p.ident("root, model, mutex, throttle or limiter")
		var d Decl
		switch kw.text {
		case "root":
			name := p.declName("root")
			r := &Root{Name: name, Cancel: -1}
			if p.tok.kind == tIdent && p.tok.text == "cancel" {
				p.next()
				r.Cancel = p.expect(tDur).num
			}
			p.root = name
			r.Body = p.block(inRoot, nil)
			p.root = ""
			p.names[name] = "root"
			d = r
		case "model":
			name := p.declName("model")
			m := &Model{Name: name}
			start := p.size
			m.Body = p.block(inRoot, nil)
			p.names[name] = "model"
			p.sizes[name] = p.size - start
			d = m
		case "mutex", "throttle", "limiter":
			name := p.declName(kw.text)
			m := &Mutex{Name: name}
			m.Max = p.intIn(kw.text+" size", 1, MaxCount)
			if kw.text == "throttle" {
				m.PeriodMS = p.period(kw.text)
			}
			m.Queue = p.intIn(kw.text+" queue limit", -1, MaxCount)
			if kw.text == "limiter" {
				m.Limiter = true
				m.Rate = p.intIn("limiter rate", 1, MaxCount)
				m.PeriodMS = p.period(kw.text)
				m.Burst = p.intIn("limiter burst", -1, MaxCount)
			}
			p.names[name] = "mutex" // sync takes any of them
			d = m
		default:
			p.failAt(kw, "expected root, model, mutex, throttle or limiter, found %s", kw)
		}
		p.endStmt()
		prog.Decls = append(prog.Decls, d)
	}
	return prog
}

// period reads the period of a throttle or limiter.
func (p *parser) period(what string) int64 {
	t := p.expect(tDur)
	if t.num < 1 {
		p.failAt(t, "%s period of %dms: a period is 1ms or more", what, t.num)
	}
	return t.num
}

func (p *parser) declName(what string) string {
	t := p.ident(what + " name")
	if k, ok := p.names[t.text]; ok {
		p.failAt(t, "%s redeclared (already a %s)", t.text, k)
	}
	return t.text
}

func (p *parser) intIn(what string, lo, hi int64) int {
	t := p.expect(tInt)
	if t.num < lo || t.num > hi {
		p.failAt(t, "%s %d out of range %d..%d", what, t.num, lo, hi)
	}
	return int(t.num)
}

// block reads { statements } in context ctx; labels are those of the
// enclosing loops, innermost last ("" for an unlabelled loop).
func (p *parser) block(ctx context, labels []string) []Stmt {
	if p.depth++; p.depth > maxDepth {
		p.failAt(p.tok, "blocks nested deeper than %d", maxDepth)
	}
	p.expect(tLBrace)
	var stmts []Stmt
	var terminal Stmt
	adders := false
	for p.tok.kind != tRBrace {
		if p.tok.kind == tSemi {
			p.next()
			continue
		}
		start := p.tok
		if terminal != nil {
			p.failAt(start, "statement after %s: it ends the block", keyword(terminal))
		}
		s := p.stmt(ctx, labels)
		p.size++
		switch s.(type) {
		case *Success, *Wait:
			if adders {
				p.failAt(start, "%s after sub-steps were added (the step completes when they do; use successStep)", keyword(s))
			}
		}
		if IsTerminal(s) {
			terminal = s
		}
		if IsAdder(s) {
			adders = true
		}
		stmts = append(stmts, s)
		p.endStmt()
	}
	p.next()
	p.depth--
	return stmts
}

// keyword names the statement s for error messages.
func keyword(s Stmt) string {
	switch s := s.(type) {
	case *Success:
		return "success"
	case *Error:
		return "error"
	case *Wait:
		return "wait"
	case *Break:
		return "break"
	case *Continue:
		return "continue"
	case *Panic:
		return "panic"
	case *Cancel:
		if s.Release {
			return "release"
		}
		return "cancel"
	}
	return "statement"
}

// allowed lists the contexts each statement keyword may appear in.
var allowed = map[string][]context{
	"step":        {inRoot, inBody, inHandler, inParallel},
	"parallel":    {inRoot, inBody, inHandler, inParallel},
	"loop":        {inRoot, inBody, inHandler, inParallel},
	"repeat":      {inRoot, inBody, inHandler, inParallel},
	"forEach":     {inRoot, inBody, inHandler, inParallel},
	"successStep": {inRoot, inBody, inHandler, inParallel},
	"sync":        {inRoot, inBody, inHandler, inParallel},
	"copy":        {inRoot, inBody, inHandler, inParallel},
	"set":         {inRoot, inBody, inHandler, inCancel},
	"print":       {inBody, inHandler, inCancel},
	"timeout":     {inBody},
	"onCancel":    {inBody},
	"stack":       {inBody, inHandler},
	"success":     {inBody, inHandler},
	"error":       {inBody, inHandler},
	"panic":       {inBody, inHandler},
	"wait":        {inBody},
	"break":       {inBody, inHandler},
	"continue":    {inBody, inHandler},
	"cancel":      {inBody, inHandler, inCancel},
	"release":     {inBody, inHandler, inCancel},
}

func (p *parser) stmt(ctx context, labels []string) Stmt {
	kw := p.ident("a statement")
	ctxs, ok := allowed[kw.text]
	if !ok {
		p.failAt(kw, "unknown statement %s", kw.text)
	}
	if !slices.Contains(ctxs, ctx) {
		p.failAt(kw, "%s is not allowed in %s", kw.text, contextNames[ctx])
	}
	switch kw.text {
	case "step":
		s := &Step{Name: p.optName()}
		s.Body = p.block(inBody, labels)
		s.Catch = p.catch(labels)
		return s
	case "parallel":
		s := &Parallel{Name: p.optName()}
		s.Branches = p.block(inParallel, labels)
		s.Catch = p.catch(labels)
		return s
	case "loop":
		s := &Loop{Label: p.optName()}
		s.Body = p.block(inBody, append(slices.Clip(labels), s.Label))
		return s
	case "repeat":
		s := &Repeat{Count: p.intIn("repeat count", 0, MaxCount)}
		s.Label = p.optName()
		s.Body = p.block(inBody, append(slices.Clip(labels), s.Label))
		return s
	case "forEach":
		s := &ForEach{}
		p.items(s)
		s.Label = p.optName()
		s.Body = p.block(inBody, append(slices.Clip(labels), s.Label))
		return s
	case "successStep":
		return &SuccessStep{Values: p.values()}
	case "sync":
		t := p.ident("mutex name")
		if p.names[t.text] != "mutex" {
			p.failAt(t, "sync on %s, which is not a mutex declared before", t.text)
		}
		s := &Sync{Mutex: t.text, Name: p.optName()}
		s.Body = p.block(inBody, labels)
		s.Catch = p.catch(labels)
		return s
	case "copy":
		t := p.ident("model name")
		if p.names[t.text] != "model" {
			p.failAt(t, "copy of %s, which is not a model declared before", t.text)
		}
		p.size += p.sizes[t.text]
		if p.copied += p.sizes[t.text]; p.copied > maxCopied {
			p.failAt(t, "copies expand to more than %d statements", maxCopied)
		}
		return &Copy{Model: t.text}
	case "set":
		v := p.ident("variable name")
		return &Set{Var: v.text, Text: p.expect(tString).str}
	case "print":
		return &Print{Text: p.expect(tString).str}
	case "timeout":
		return &Timeout{MS: p.expect(tDur).num}
	case "onCancel":
		return &OnCancel{Body: &Block{Stmts: p.block(inCancel, nil)}}
	case "stack":
		return p.stack()
	case "success":
		return &Success{Values: p.values()}
	case "error":
		return p.errorStmt()
	case "panic":
		return &Panic{Text: p.expect(tString).str}
	case "wait":
		return p.wait()
	case "break", "continue":
		label := ""
		if !p.lineEnd() {
			t := p.ident("loop label")
			label = t.text
			if !slices.Contains(labels, label) {
				p.failAt(t, "%s %s: no enclosing loop is labelled %s", kw.text, label, label)
			}
		} else if len(labels) == 0 {
			p.failAt(kw, "%s outside of a loop", kw.text)
		}
		if kw.text == "break" {
			return &Break{Label: label}
		}
		return &Continue{Label: label}
	case "cancel", "release":
		if p.root == "" {
			p.failAt(kw, "%s in a model: a model's steps run in any root", kw.text)
		}
		t := p.ident("root name")
		if t.text != p.root && p.names[t.text] != "root" {
			p.failAt(t, "%s of %s, which is neither this root nor one declared before", kw.text, t.text)
		}
		return &Cancel{Root: t.text, Release: kw.text == "release"}
	}
	panic("unreachable")
}

func (p *parser) stack() *Stack {
	if p.tok.kind != tIdent {
		return &Stack{Size: p.intIn("stack size", 1, MaxStack)}
	}
	kw := p.next()
	typ := slices.Index(stackTypeWords[:], kw.text)
	if typ <= int(StackRaw) { // not a type word (the raw one is empty)
		p.failAt(kw, "expected a stack size, array or pointers, found %s", kw)
	}
	s := &Stack{Type: StackType(typ)}
	t := p.tok
	if s.Size = p.intIn("stack size", 1, MaxStack); !slices.Contains(StackSizes, s.Size) {
		p.failAt(t, "stack %s %d: the size of a typed allocation is one of %v", kw.text, s.Size, StackSizes)
	}
	return s
}

func (p *parser) catch(labels []string) *Block {
	if p.tok.kind == tIdent && p.tok.text == "catch" {
		p.next()
		return &Block{Stmts: p.block(inHandler, labels)}
	}
	return nil
}

func (p *parser) errorStmt() *Error {
	e := &Error{Code: p.ident("error code").text}
	if !p.lineEnd() {
		e.Info = p.expect(tString).str
	}
	return e
}

func (p *parser) wait() *Wait {
	w := &Wait{}
	if p.lineEnd() {
		return w
	}
	if p.tok.kind == tDur {
		t := p.next()
		if t.num < 1 {
			p.failAt(t, "wait of %dms: a timer completes a wait 1ms later or more", t.num)
		}
		w.MS = t.num
	} else {
		w.Turns = p.intIn("wait turns", 1, MaxCount)
	}
	if p.tok.kind == tIdent && p.tok.text == "resumer" {
		p.next()
		w.Resumer = true
	}
	kw := p.ident("success or error")
	switch kw.text {
	case "success":
		w.Then = &Success{Values: p.values()}
	case "error":
		w.Then = p.errorStmt()
	default:
		p.failAt(kw, "expected success or error, found %s", kw)
	}
	return w
}

// values reads up to MaxValues values up to the end of the line.
func (p *parser) values() []Value {
	var vals []Value
	for !p.lineEnd() {
		if len(vals) == MaxValues {
			p.failAt(p.tok, "more than %d values", MaxValues)
		}
		vals = append(vals, p.value())
	}
	return vals
}

func (p *parser) value() Value {
	t := p.tok
	switch t.kind {
	case tInt:
		p.next()
		return IntValue(t.num)
	case tFloat:
		p.next()
		return FloatValue(t.flt)
	case tString:
		p.next()
		return StrValue(t.str)
	case tIdent:
		switch t.text {
		case "true", "false":
			p.next()
			return BoolValue(t.text == "true")
		}
	}
	p.failAt(t, "expected a value, found %s", t)
	panic("unreachable")
}

// items reads the list [v, ...] or the map ["k": v, ...] (or [:], the
// empty map) of a forEach.
func (p *parser) items(s *ForEach) {
	p.expect(tLBrack)
	if p.tok.kind == tColon {
		p.next()
		p.expect(tRBrack)
		s.IsMap = true
		return
	}
	for i := 0; p.tok.kind != tRBrack; i++ {
		if i > 0 {
			p.expect(tComma)
		}
		if i == 0 && p.tok.kind == tString {
			// A string followed by a colon starts a map.
			k := p.next()
			if p.tok.kind == tColon {
				s.IsMap = true
				p.next()
				s.Keys = append(s.Keys, k.str)
				s.Values = append(s.Values, p.value())
				continue
			}
			s.Values = append(s.Values, StrValue(k.str))
			continue
		}
		if s.IsMap {
			k := p.expect(tString)
			if slices.Contains(s.Keys, k.str) {
				p.failAt(k, "duplicate key %s", k.text)
			}
			p.expect(tColon)
			s.Keys = append(s.Keys, k.str)
		}
		s.Values = append(s.Values, p.value())
	}
	p.next()
}
