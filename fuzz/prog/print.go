package prog

import (
	"strconv"
	"strings"
)

// String returns the program's text in canonical form: Parse reads it back
// as the same program.
func (p *Program) String() string {
	var w printer
	for i, d := range p.Decls {
		if i > 0 {
			w.b.WriteByte('\n')
		}
		switch d := d.(type) {
		case *Mutex:
			if d.Limiter {
				w.line("limiter " + d.Name + " " + strconv.Itoa(d.Max) + " " + strconv.Itoa(d.Queue) + " " +
					strconv.Itoa(d.Rate) + " " + duration(d.PeriodMS) + " " + strconv.Itoa(d.Burst))
				break
			}
			if d.PeriodMS > 0 {
				w.line("throttle " + d.Name + " " + strconv.Itoa(d.Max) + " " + duration(d.PeriodMS) + " " + strconv.Itoa(d.Queue))
				break
			}
			w.line("mutex " + d.Name + " " + strconv.Itoa(d.Max) + " " + strconv.Itoa(d.Queue))
		case *Model:
			w.open("model " + d.Name)
			w.stmts(d.Body)
			w.close("")
		case *Root:
			head := "root " + d.Name
			if d.Cancel >= 0 {
				head += " cancel " + duration(d.Cancel)
			}
			w.open(head)
			w.stmts(d.Body)
			w.close("")
		}
	}
	return w.b.String()
}

func duration(ms int64) string { return strconv.FormatInt(ms, 10) + "ms" }

type printer struct {
	b      strings.Builder
	indent int
}

func (w *printer) line(s string) {
	for range w.indent {
		w.b.WriteString("  ")
	}
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

func (w *printer) open(head string) {
	w.line(head + " {")
	w.indent++
}

// close ends a block; tail follows the brace on its line.
func (w *printer) close(tail string) {
	w.indent--
	w.line("}" + tail)
}

func (w *printer) stmts(ss []Stmt) {
	for _, s := range ss {
		w.stmt(s)
	}
}

// withName appends a name, if any, to a statement's head.
func withName(head, name string) string {
	if name != "" {
		return head + " " + name
	}
	return head
}

// blockWithCatch prints head { body } and the catch block, if any.
func (w *printer) blockWithCatch(head string, body []Stmt, catch *Block) {
	w.open(head)
	w.stmts(body)
	if catch == nil {
		w.close("")
		return
	}
	w.close(" catch {")
	w.indent++
	w.stmts(catch.Stmts)
	w.close("")
}

func (w *printer) stmt(s Stmt) {
	switch s := s.(type) {
	case *Step:
		w.blockWithCatch(withName("step", s.Name), s.Body, s.Catch)
	case *Parallel:
		w.blockWithCatch(withName("parallel", s.Name), s.Branches, s.Catch)
	case *Sync:
		w.blockWithCatch(withName("sync "+s.Mutex, s.Name), s.Body, s.Catch)
	case *Loop:
		w.open(withName("loop", s.Label))
		w.stmts(s.Body)
		w.close("")
	case *Repeat:
		w.open(withName("repeat "+strconv.Itoa(s.Count), s.Label))
		w.stmts(s.Body)
		w.close("")
	case *ForEach:
		w.open(withName("forEach "+items(s), s.Label))
		w.stmts(s.Body)
		w.close("")
	case *SuccessStep:
		w.line("successStep" + FormatValues(s.Values))
	case *Copy:
		w.line("copy " + s.Model)
	case *Print:
		w.line("print " + strconv.Quote(s.Text))
	case *Set:
		w.line("set " + s.Var + " " + strconv.Quote(s.Text))
	case *Timeout:
		w.line("timeout " + duration(s.MS))
	case *OnCancel:
		w.open("onCancel")
		w.stmts(s.Body.Stmts)
		w.close("")
	case *Stack:
		w.line("stack " + s.operand())
	case *Success:
		w.line("success" + FormatValues(s.Values))
	case *Error:
		w.line(errorText(s))
	case *Wait:
		head := "wait " + strconv.Itoa(s.Turns)
		if s.MS > 0 {
			head = "wait " + duration(s.MS)
		}
		if s.Resumer {
			head += " resumer"
		}
		switch t := s.Then.(type) {
		case *Success:
			w.line(head + " success" + FormatValues(t.Values))
		case *Error:
			w.line(head + " " + errorText(t))
		default:
			w.line("wait")
		}
	case *Break:
		w.line(withName("break", s.Label))
	case *Continue:
		w.line(withName("continue", s.Label))
	case *Panic:
		w.line("panic " + strconv.Quote(s.Text))
	case *Cancel:
		if s.Release {
			w.line("release " + s.Root)
		} else {
			w.line("cancel " + s.Root)
		}
	}
}

func errorText(e *Error) string {
	if e.Info != "" {
		return "error " + e.Code + " " + strconv.Quote(e.Info)
	}
	return "error " + e.Code
}

func items(s *ForEach) string {
	if s.IsMap && len(s.Keys) == 0 {
		return "[:]"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range s.Values {
		if i > 0 {
			b.WriteString(", ")
		}
		if s.IsMap {
			b.WriteString(strconv.Quote(s.Keys[i]))
			b.WriteString(": ")
		}
		b.WriteString(v.String())
	}
	b.WriteByte(']')
	return b.String()
}
