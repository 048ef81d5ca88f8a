package prog

import "strconv"

// IDs names the steps of a program in traces: a step, parallel, loop,
// repeat, forEach or sync statement is called by its name or label, or
// else s<N>, N counting such statements in source order from 1.
func IDs(p *Program) map[Stmt]string {
	ids := map[Stmt]string{}
	n := 0
	var walk func([]Stmt)
	name := func(s Stmt, given string) {
		n++
		if given == "" {
			given = "s" + strconv.Itoa(n)
		}
		ids[s] = given
	}
	walkBlock := func(b *Block) {
		if b != nil {
			walk(b.Stmts)
		}
	}
	walk = func(ss []Stmt) {
		for _, s := range ss {
			switch s := s.(type) {
			case *Step:
				name(s, s.Name)
				walk(s.Body)
				walkBlock(s.Catch)
			case *Parallel:
				name(s, s.Name)
				walk(s.Branches)
				walkBlock(s.Catch)
			case *Sync:
				name(s, s.Name)
				walk(s.Body)
				walkBlock(s.Catch)
			case *Loop:
				name(s, s.Label)
				walk(s.Body)
			case *Repeat:
				name(s, s.Label)
				walk(s.Body)
			case *ForEach:
				name(s, s.Label)
				walk(s.Body)
			}
		}
	}
	for _, d := range p.Decls {
		switch d := d.(type) {
		case *Root:
			walk(d.Body)
		case *Model:
			walk(d.Body)
		}
	}
	return ids
}
