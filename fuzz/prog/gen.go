package prog

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
)

// Generate maps any byte string to a well-formed program, so that a fuzzer
// mutating the bytes explores programs rather than syntax errors. The bytes
// are a stream of choices, each taken modulo the number of options; once
// they run out every choice is 0, which ends lists, so a short input makes
// a small program. The programs stay small (at most genBudget statements,
// genDepth levels of blocks) and use only timeouts of 1 ms or more.
func Generate(data []byte) *Program {
	g := &gen{src: data}
	return g.program(nil)
}

// Encode returns bytes that Generate maps back to p, for programs in the
// generator's reach (declarations ordered mutexes, models, roots; small
// enough; strings of printable ASCII; numbers from its tables). It is how
// programs written by hand join the fuzzer's seed corpus.
func Encode(p *Program) ([]byte, error) {
	g := &gen{enc: true}
	g.program(p)
	if g.bad {
		return nil, errors.New("prog: the program is outside of the generator's reach")
	}
	if !reflect.DeepEqual(Generate(g.out), p) {
		return nil, errors.New("prog: the program does not round-trip through the generator")
	}
	return g.out, nil
}

const (
	genBudget = 48 // statements in a program
	genDepth  = 5  // nested blocks
	genStrLen = 40 // characters of a generated string
)

// Tables of the values the generator picks from.
var (
	genDurations = []int64{1, 2, 3, 5, 10, 20, 50, 100, 1000}
	genWaitMS    = []int64{1, 2, 5, 20} // completions by timer: on deadlines of timeouts
	genFloats    = []float64{0.5, -1.25, 3, 1e21, 2.5e-7}
	genCodes     = []string{"E1", "E2", "Timeout", "InternalError"}
	genVars      = []string{"x", "y"}
	genTemplates = []string{
		"a", "b", "{code}", "{arg0}", "{arg0} {arg1}", "{i}", "{key}={val}",
		"{info}", "{state.x}", "{state.y}",
	}
)

// gen is the generator and, with enc set, its inverse: every choice goes
// through pick, which either reads a byte or writes the choice that
// reproduces the target program.
type gen struct {
	src []byte
	pos int

	enc bool
	out []byte
	bad bool // enc: the target cannot be reproduced

	budget  int
	mutexes []string
	models  []string
	roots   []string // the roots a cancel may name: those declared so far
	decls   map[string]bool
}

// pick returns a choice in [0, n). Decoding, it reads a byte (0 once the
// input is exhausted); encoding, it records want(). With n <= 1 there is
// nothing to choose and nothing is read or written.
func (g *gen) pick(n int, want func() int) int {
	if n <= 1 {
		return 0
	}
	if g.enc {
		w := want()
		if w < 0 || w >= n {
			g.bad = true
			w = 0
		}
		g.out = append(g.out, byte(w))
		return w
	}
	if g.pos >= len(g.src) {
		return 0
	}
	b := g.src[g.pos]
	g.pos++
	return int(b) % n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// count picks a list length in [0, max], encoding len(list) of the target.
func (g *gen) count(max int, want func() int) int { return g.pick(max+1, want) }

func (g *gen) program(t *Program) *Program {
	g.budget = genBudget
	g.decls = map[string]bool{}
	var mutexes, models, roots []Decl
	if t != nil {
		for _, d := range t.Decls {
			switch d.(type) {
			case *Mutex:
				mutexes = append(mutexes, d)
			case *Model:
				models = append(models, d)
			case *Root:
				roots = append(roots, d)
			}
		}
		if !slices.Equal(t.Decls, slices.Concat(mutexes, models, roots)) {
			g.bad = true
		}
	}
	p := &Program{}
	nm := g.count(2, func() int { return len(mutexes) })
	for i := range nm {
		var tm *Mutex
		if t != nil {
			tm = mutexes[i].(*Mutex)
		}
		m := &Mutex{Name: g.declName("mx", i, func() string { return tm.Name })}
		m.Max = 1 + g.pick(3, func() int { return tm.Max - 1 })
		m.Queue = g.pick(5, func() int { return tm.Queue + 1 }) - 1
		// One in four is a Throttle, one in four a Limiter, with a period
		// from genWaitMS.
		n := len(genWaitMS)
		k := g.pick(4*n, func() int {
			if tm.PeriodMS == 0 {
				return 0
			}
			if i := index(genWaitMS, tm.PeriodMS); i >= 0 {
				return (2+b2i(tm.Limiter))*n + i
			}
			return -1
		})
		if k >= 2*n {
			m.PeriodMS = genWaitMS[k%n]
		}
		if k >= 3*n {
			m.Limiter = true
			m.Rate = 1 + g.pick(3, func() int { return tm.Rate - 1 })
			m.Burst = g.pick(5, func() int { return tm.Burst + 1 }) - 1
		}
		g.mutexes = append(g.mutexes, m.Name)
		p.Decls = append(p.Decls, m)
	}
	// Models are named here, their bodies made after the roots: the input
	// is read in order and often runs out, and the roots are what runs.
	nmod := g.count(2, func() int { return len(models) })
	var mods []*Model
	for i := range nmod {
		m := &Model{Name: g.declName("m", i, func() string { return models[i].(*Model).Name })}
		g.models = append(g.models, m.Name)
		mods = append(mods, m)
		p.Decls = append(p.Decls, m)
	}
	nr := 1 + g.count(2, func() int { return len(roots) - 1 })
	for i := range nr {
		var tr *Root
		if t != nil && i < len(roots) {
			tr = roots[i].(*Root)
		}
		r := &Root{Name: g.declName("r", i, func() string { return tr.Name })}
		g.roots = append(g.roots, r.Name)
		c := g.pick(len(genDurations)+1, func() int {
			if tr.Cancel < 0 {
				return 0
			}
			return index(genDurations, tr.Cancel) + 1
		})
		r.Cancel = -1
		if c > 0 {
			r.Cancel = genDurations[c-1]
		}
		// The roots after this one and the models keep a share of the
		// budget.
		g.share(g.budget-genShare*(nr-1-i+nmod), func() {
			r.Body = g.block(inRoot, nil, 0, func() []Stmt { return tr.Body })
		})
		p.Decls = append(p.Decls, r)
	}
	all := g.models
	g.roots = nil // a model's steps run in any root: they cancel none
	for i, m := range mods {
		g.models = all[:i] // a model copies only those declared before it
		g.share(genShare+genShare/2, func() {
			m.Body = g.block(inRoot, nil, 0, func() []Stmt { return models[i].(*Model).Body })
		})
	}
	return p
}

// genShare is the budget a root keeps for each declaration made after it.
const genShare = 8

// share runs fn with at most n statements of the budget. Blocks go on
// while the budget lasts and a choice of 0 ends each, so without shares
// the first declaration took nearly all of it: models, which run only
// when copied, and the first root left the other roots empty.
func (g *gen) share(n int, fn func()) {
	n = max(0, min(n, g.budget))
	rest := g.budget - n
	g.budget = n
	fn()
	g.budget += rest
}

// index returns the position of v in s, or -1 (which pick rejects).
func index[T comparable](s []T, v T) int { return slices.Index(s, v) }

// declName names a declaration: prefix+i, or an identifier; a name taken
// already gets a suffix.
func (g *gen) declName(prefix string, i int, want func() string) string {
	def := prefix + strconv.Itoa(i)
	name := def
	if g.pick(4, func() int { return 3 * b2i(want() != def) }) == 3 {
		name = g.ident(want)
	}
	for g.decls[name] {
		name += "_"
	}
	g.decls[name] = true
	return name
}

const (
	identFirst = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
	identRest  = identFirst + "0123456789"
)

func (g *gen) ident(want func() string) string {
	n := 1 + g.pick(16, func() int { return len(want()) - 1 })
	b := make([]byte, n)
	for i := range b {
		set := identRest
		if i == 0 {
			set = identFirst
		}
		b[i] = set[g.pick(len(set), func() int {
			w := want()
			if i >= len(w) {
				return -1
			}
			return indexByte(set, w[i])
		})]
	}
	return string(b)
}

func indexByte(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// optIdent is an optional name or label, present one time in four.
func (g *gen) optIdent(want func() string) string {
	if g.pick(4, func() int { return 3 * b2i(want() != "") }) != 3 {
		return ""
	}
	return g.ident(want)
}

// str is a string of printable ASCII.
func (g *gen) str(want func() string) string {
	n := g.pick(genStrLen+1, func() int { return len(want()) })
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(' ' + g.pick(95, func() int {
			w := want()
			if i >= len(w) || w[i] < ' ' || w[i] > '~' {
				return -1
			}
			return int(w[i] - ' ')
		}))
	}
	return string(b)
}

// template is a string for print and set: one of genTemplates or any.
func (g *gen) template(want func() string) string {
	k := g.pick(len(genTemplates)+1, func() int { return index(genTemplates, want()) + 1 })
	if k > 0 {
		return genTemplates[k-1]
	}
	return g.str(want)
}

func (g *gen) value(want func() Value) Value {
	k := Kind(g.pick(4, func() int { return int(want().Kind) }))
	switch k {
	case Int:
		return IntValue(int64(int8(g.pick(256, func() int {
			v := want().Int
			if v < -128 || v > 127 {
				return -1
			}
			return int(uint8(int8(v)))
		}))))
	case Float:
		return FloatValue(genFloats[g.pick(len(genFloats), func() int { return index(genFloats, want().Float) })])
	case Str:
		return StrValue(g.str(func() string { return want().Str }))
	}
	return BoolValue(g.pick(2, func() int { return b2i(want().Bool) }) == 1)
}

func (g *gen) values(want func() []Value) []Value {
	n := g.count(MaxValues, func() int { return len(want()) })
	var vals []Value
	for i := range n {
		vals = append(vals, g.value(func() Value { return want()[i] }))
	}
	return vals
}

func (g *gen) code(want func() string) string {
	k := g.pick(len(genCodes)+1, func() int { return index(genCodes, want()) + 1 })
	if k > 0 {
		return genCodes[k-1]
	}
	return g.ident(want)
}

func (g *gen) errorStmt(want func() *Error) *Error {
	e := &Error{Code: g.code(func() string { return want().Code })}
	if g.pick(2, func() int { return b2i(want().Info != "") }) == 1 {
		e.Info = g.str(func() string { return want().Info })
	}
	return e
}

// Statement kinds, in the order the generator numbers them.
const (
	kStep = iota
	kParallel
	kLoop
	kRepeat
	kForEach
	kSuccessStep
	kSync
	kCopy
	kSet
	kPrint
	kTimeout
	kOnCancel
	kStack
	kindCount
)

func kindOf(s Stmt) int {
	switch s.(type) {
	case *Step:
		return kStep
	case *Parallel:
		return kParallel
	case *Loop:
		return kLoop
	case *Repeat:
		return kRepeat
	case *ForEach:
		return kForEach
	case *SuccessStep:
		return kSuccessStep
	case *Sync:
		return kSync
	case *Copy:
		return kCopy
	case *Set:
		return kSet
	case *Print:
		return kPrint
	case *Timeout:
		return kTimeout
	case *OnCancel:
		return kOnCancel
	case *Stack:
		return kStack
	}
	return -1
}

// kinds lists the non-terminal statements allowed in ctx at depth.
func (g *gen) kinds(ctx context, depth int) []int {
	var ks []int
	adders := ctx != inCancel && depth < genDepth
	for k := range kindCount {
		ok := false
		switch k {
		case kStep, kParallel, kLoop, kRepeat, kForEach, kSuccessStep:
			ok = adders
		case kSync:
			ok = adders && len(g.mutexes) > 0
		case kCopy:
			ok = adders && len(g.models) > 0
		case kSet:
			ok = ctx != inParallel
		case kPrint:
			ok = ctx == inBody || ctx == inHandler || ctx == inCancel
		case kTimeout, kOnCancel:
			ok = ctx == inBody
		case kStack:
			ok = ctx == inBody || ctx == inHandler
		}
		if ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// Terminal statements, in the order the generator numbers them.
const (
	tNone = iota
	tSuccess
	tError
	tPanic
	tWait
	tBreak
	tContinue
	tCancel
)

func terminalOf(s Stmt) int {
	switch s.(type) {
	case *Success:
		return tSuccess
	case *Error:
		return tError
	case *Panic:
		return tPanic
	case *Wait:
		return tWait
	case *Break:
		return tBreak
	case *Continue:
		return tContinue
	case *Cancel:
		return tCancel
	}
	return tNone
}

// block generates the statements of a block: non-terminal statements,
// then possibly a terminal one.
func (g *gen) block(ctx context, labels []string, depth int, want func() []Stmt) []Stmt {
	ks := g.kinds(ctx, depth)
	var stmts []Stmt
	adders := false
	for i := 0; g.budget > 0; i++ {
		k := g.pick(len(ks)+1, func() int {
			w := want()
			if i >= len(w) || IsTerminal(w[i]) {
				return 0
			}
			return index(ks, kindOf(w[i])) + 1
		})
		if k == 0 {
			break
		}
		g.budget--
		s := g.stmt(ks[k-1], ctx, labels, depth, func() Stmt { return want()[i] })
		adders = adders || IsAdder(s)
		stmts = append(stmts, s)
	}
	var ts []int
	switch ctx {
	case inBody, inHandler:
		ts = []int{tNone, tError, tPanic}
		if !adders {
			ts = append(ts, tSuccess)
			if ctx == inBody {
				ts = append(ts, tWait)
			}
		}
		if len(labels) > 0 {
			ts = append(ts, tBreak, tContinue)
		}
		if len(g.roots) > 0 {
			ts = append(ts, tCancel)
		}
	case inCancel:
		if len(g.roots) > 0 {
			// One cancel handler in four cancels a root: in one in two,
			// most roots would end canceled.
			ts = []int{tNone, tNone, tNone, tCancel}
		}
	}
	if len(ts) == 0 {
		if g.enc && len(stmts) != len(want()) {
			g.bad = true
		}
		return stmts
	}
	named := named(labels)
	n := len(stmts)
	t := ts[g.pick(len(ts), func() int {
		w := want()
		switch {
		case len(w) == n:
			return 0
		case len(w) == n+1:
			return index(ts, terminalOf(w[n]))
		}
		return -1
	})]
	tw := func() Stmt { return want()[n] }
	switch t {
	case tSuccess:
		stmts = append(stmts, &Success{Values: g.values(func() []Value { return tw().(*Success).Values })})
	case tError:
		stmts = append(stmts, g.errorStmt(func() *Error { return tw().(*Error) }))
	case tPanic:
		stmts = append(stmts, &Panic{Text: g.str(func() string { return tw().(*Panic).Text })})
	case tWait:
		stmts = append(stmts, g.wait(func() *Wait { return tw().(*Wait) }))
	case tCancel:
		root := g.roots[g.pick(len(g.roots), func() int { return index(g.roots, tw().(*Cancel).Root) })]
		release := g.pick(4, func() int { return 3 * b2i(tw().(*Cancel).Release) }) == 3 // one in four
		stmts = append(stmts, &Cancel{Root: root, Release: release})
	case tBreak, tContinue:
		wl := func() string {
			if b, ok := tw().(*Break); ok {
				return b.Label
			}
			return tw().(*Continue).Label
		}
		k := g.pick(len(named)+1, func() int { return index(named, wl()) + 1 })
		label := ""
		if k > 0 {
			label = named[k-1]
		}
		if t == tBreak {
			stmts = append(stmts, &Break{Label: label})
		} else {
			stmts = append(stmts, &Continue{Label: label})
		}
	}
	return stmts
}

// named returns the distinct non-empty labels.
func named(labels []string) []string {
	var out []string
	for _, l := range labels {
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func (g *gen) wait(want func() *Wait) *Wait {
	mode := g.pick(3, func() int {
		switch want().Then.(type) {
		case *Success:
			return 1
		case *Error:
			return 2
		}
		return 0
	})
	if mode == 0 {
		return &Wait{}
	}
	w := &Wait{}
	when := g.pick(4+len(genWaitMS), func() int {
		if want().MS > 0 {
			return 4 + index(genWaitMS, want().MS)
		}
		return want().Turns - 1
	})
	if when < 4 {
		w.Turns = 1 + when
	} else {
		w.MS = genWaitMS[when-4]
	}
	w.Resumer = g.pick(2, func() int { return b2i(want().Resumer) }) == 1
	if mode == 1 {
		w.Then = &Success{Values: g.values(func() []Value { return want().Then.(*Success).Values })}
	} else {
		w.Then = g.errorStmt(func() *Error { return want().Then.(*Error) })
	}
	return w
}

// catch is an optional error handler.
func (g *gen) catch(labels []string, depth int, want func() *Block) *Block {
	if g.pick(2, func() int { return b2i(want() != nil) }) == 0 {
		return nil
	}
	return &Block{Stmts: g.block(inHandler, labels, depth+1, func() []Stmt { return want().Stmts })}
}

func (g *gen) stmt(k int, ctx context, labels []string, depth int, want func() Stmt) Stmt {
	switch k {
	case kStep:
		w := func() *Step { return want().(*Step) }
		s := &Step{Name: g.optIdent(func() string { return w().Name })}
		s.Body = g.block(inBody, labels, depth+1, func() []Stmt { return w().Body })
		s.Catch = g.catch(labels, depth, func() *Block { return w().Catch })
		return s
	case kParallel:
		w := func() *Parallel { return want().(*Parallel) }
		s := &Parallel{Name: g.optIdent(func() string { return w().Name })}
		s.Branches = g.block(inParallel, labels, depth+1, func() []Stmt { return w().Branches })
		s.Catch = g.catch(labels, depth, func() *Block { return w().Catch })
		return s
	case kLoop:
		w := func() *Loop { return want().(*Loop) }
		s := &Loop{Label: g.optIdent(func() string { return w().Label })}
		s.Body = g.block(inBody, append(slices.Clip(labels), s.Label), depth+1, func() []Stmt { return w().Body })
		return s
	case kRepeat:
		w := func() *Repeat { return want().(*Repeat) }
		s := &Repeat{Count: g.pick(5, func() int { return w().Count })}
		s.Label = g.optIdent(func() string { return w().Label })
		s.Body = g.block(inBody, append(slices.Clip(labels), s.Label), depth+1, func() []Stmt { return w().Body })
		return s
	case kForEach:
		w := func() *ForEach { return want().(*ForEach) }
		s := &ForEach{IsMap: g.pick(2, func() int { return b2i(w().IsMap) }) == 1}
		n := g.count(3, func() int { return len(w().Values) })
		for i := range n {
			if s.IsMap {
				k := g.str(func() string { return w().Keys[i] })
				for slices.Contains(s.Keys, k) {
					k += "'"
				}
				s.Keys = append(s.Keys, k)
			}
			s.Values = append(s.Values, g.value(func() Value { return w().Values[i] }))
		}
		s.Label = g.optIdent(func() string { return w().Label })
		s.Body = g.block(inBody, append(slices.Clip(labels), s.Label), depth+1, func() []Stmt { return w().Body })
		return s
	case kSuccessStep:
		return &SuccessStep{Values: g.values(func() []Value { return want().(*SuccessStep).Values })}
	case kSync:
		w := func() *Sync { return want().(*Sync) }
		s := &Sync{Mutex: g.mutexes[g.pick(len(g.mutexes), func() int { return index(g.mutexes, w().Mutex) })]}
		s.Name = g.optIdent(func() string { return w().Name })
		s.Body = g.block(inBody, labels, depth+1, func() []Stmt { return w().Body })
		s.Catch = g.catch(labels, depth, func() *Block { return w().Catch })
		return s
	case kCopy:
		return &Copy{Model: g.models[g.pick(len(g.models), func() int { return index(g.models, want().(*Copy).Model) })]}
	case kSet:
		w := func() *Set { return want().(*Set) }
		s := &Set{}
		v := g.pick(len(genVars)+1, func() int { return index(genVars, w().Var) + 1 })
		if v > 0 {
			s.Var = genVars[v-1]
		} else {
			s.Var = g.ident(func() string { return w().Var })
		}
		s.Text = g.template(func() string { return w().Text })
		return s
	case kPrint:
		return &Print{Text: g.template(func() string { return want().(*Print).Text })}
	case kTimeout:
		return &Timeout{MS: genDurations[g.pick(len(genDurations), func() int { return index(genDurations, want().(*Timeout).MS) })]}
	case kOnCancel:
		return &OnCancel{Body: &Block{Stmts: g.block(inCancel, nil, depth+1, func() []Stmt { return want().(*OnCancel).Body.Stmts })}}
	case kStack:
		// As often raw bytes as each type of vm.Stack, of every size.
		n := len(StackSizes)
		k := g.pick(3*n, func() int {
			w := want().(*Stack)
			if i := index(StackSizes, w.Size); i >= 0 {
				return int(w.Type)*n + i
			}
			return -1
		})
		return &Stack{Size: StackSizes[k%n], Type: StackType(k / n)}
	}
	panic("prog: unknown statement kind")
}
