//go:build cgo

package ffi_test

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/ffi"
	"github.com/stepvm/stepvm/ffi/internal/ctest"
	"github.com/stepvm/stepvm/vm"
)

// goSide is the Go half of a FuzzFFI run: Go steps, error handlers, loop
// bodies and cancel handlers that read what they do from the same program
// as the C interpreter, around and between its steps, so that values,
// errors, timeouts, cancellation, loop exits and completions cross between
// Go and C frames both ways. (C adds only C steps: Go frames hold C ones,
// and a Go step hands C its record.)
type goSide struct {
	sync     vm.ISync
	tokens   []*token     // the Go values passed on as Any, by id
	stacks   []uint8      // per StackRaw allocation: 1 live, 2 destroyed
	cancels  []uint8      // per cancel handler set: how often it ran
	resumers []vm.Resumer // kept for completion from another goroutine
	problem  string       // the first broken guarantee seen
}

// token is a Go value that crosses C as an opaque custom object. Values
// passed on keep their position (Go's and C's), so a token that arrives
// anywhere else than where it was made came back as another value.
type token struct{ id, pos int }

var goCodes = [...]string{"Fuzz", "Other", vm.Timeout}

var goLabels = [...][]string{nil, {"a"}, {"b"}}

func (g *goSide) fail(format string, args ...any) {
	if g.problem == "" {
		g.problem = fmt.Sprintf(format, args...)
	}
}

// fuzzByte returns the program's next byte, 0 past its end.
func fuzzByte() int { return ctest.FuzzNext() }

// checkArgs reads what a Go step was passed: the Go values in it must be
// the ones Go passed on, whatever C did with them on the way.
func (g *goSide) checkArgs(args vm.Args) {
	for i := range args.Len() {
		v := args.Get(i)
		switch v.Kind() {
		case vm.KindAny:
			switch x := v.Any().(type) {
			case *token:
				if x.id >= len(g.tokens) || g.tokens[x.id] != x || x.pos != i {
					g.fail("a Go value came back as another: %+v at %d", x, i)
				}
			case *ffi.Object:
			default:
				g.fail("an unexpected value reached a Go step: %T", x)
			}
		case vm.KindString:
			_ = v.String()
		case vm.KindBytes:
			_ = v.Bytes()
		}
	}
}

// values returns up to four values: new ones, and ones received passed on
// in their place.
func (g *goSide) values(args vm.Args) []vm.Value {
	vals := make([]vm.Value, fuzzByte()%5)
	for i := range vals {
		switch fuzzByte() % 5 {
		case 0:
			vals[i] = vm.Int(int64(fuzzByte()) - 100)
		case 1:
			vals[i] = vm.Str(goCodes[fuzzByte()%3])
		case 2:
			vals[i] = vm.Bytes([]byte{1, 2, 3}[:fuzzByte()%4])
		case 3:
			t := &token{id: len(g.tokens), pos: i}
			g.tokens = append(g.tokens, t)
			vals[i] = vm.Any(t)
		case 4:
			vals[i] = args.Get(i)
		}
	}
	return vals
}

// cStep adds the C interpreter's step to as.
func cStep(as vm.AsyncSteps) { ctest.FuzzStart(ffi.Binary(as)) }

// handlers returns an error handler, or none, for the step being added.
func (g *goSide) handlers() []vm.ErrorFunc {
	if fuzzByte()&1 == 0 {
		return nil
	}
	return []vm.ErrorFunc{g.handler}
}

// step is a Go step: one to four of the program's operations.
func (g *goSide) step(as vm.AsyncSteps, args vm.Args) {
	g.checkArgs(args)
	if !ctest.FuzzLive(true) {
		return
	}
	for n := 1 + fuzzByte()%4; n > 0 && ctest.FuzzLive(false); n-- {
		if g.op(as, args) {
			return
		}
	}
}

// body is a Go loop body, which breaks its loop once the program ends.
func (g *goSide) body(as vm.AsyncSteps) {
	if !ctest.FuzzLive(true) {
		as.Break()
		return
	}
	for n := fuzzByte() % 3; n > 0 && ctest.FuzzLive(false); n-- {
		if g.op(as, vm.Args{}) {
			return
		}
	}
}

// handler is a Go error handler.
func (g *goSide) handler(as vm.AsyncSteps, code string) {
	if !ctest.FuzzLive(true) {
		return
	}
	switch fuzzByte() % 6 {
	case 0:
		return // the error goes on
	case 1:
		as.Success(g.values(vm.Args{})...)
	case 2:
		as.Error(goCodes[fuzzByte()%3], "go handler")
	case 3:
		cStep(as)
	case 4:
		as.Add(g.step, g.handlers()...)
	case 5:
		g.op(as, vm.Args{})
	}
}

// op does what the program says next with as, the handle of a Go step
// (or loop body) passed args, and reports whether that ended the step.
func (g *goSide) op(as vm.AsyncSteps, args vm.Args) bool {
	switch fuzzByte() % 20 {
	case 0, 1, 2, 3: // the commonest: a C step
		cStep(as)
	case 4, 5:
		as.Add(g.step, g.handlers()...)
	case 6:
		as.Success(g.values(args)...)
		return true
	case 7:
		as.Error(goCodes[fuzzByte()%3], "go")
	case 8:
		p := as.Parallel(g.handlers()...)
		for n := fuzzByte() % 4; n > 0; n-- {
			if fuzzByte()&1 == 0 {
				p.Add(func(as vm.AsyncSteps, _ vm.Args) { cStep(as) })
			} else {
				p.Add(g.step)
			}
		}
	case 9:
		as.Repeat(fuzzByte()%4, func(as vm.AsyncSteps, _ int) { g.body(as) }, goLabels[fuzzByte()%3]...)
	case 10:
		as.Loop(g.body, goLabels[fuzzByte()%3]...)
	case 11:
		as.Break(goLabels[fuzzByte()%3]...)
	case 12:
		as.Continue(goLabels[fuzzByte()%3]...)
	case 13:
		as.SetTimeout(time.Duration(fuzzByte()%40) * time.Millisecond)
	case 14:
		id := len(g.cancels)
		g.cancels = append(g.cancels, 0)
		as.SetCancel(func(vm.AsyncSteps) {
			if g.cancels[id]++; g.cancels[id] > 1 {
				g.fail("cancel handler %d ran twice", id)
			}
		})
	case 15:
		g.stack(as)
	case 16: // wait for another goroutine, C through the record, or a timeout
		as.WaitExternal()
		g.resumers = append(g.resumers, as.Resumer())
		ctest.FuzzKeep(ffi.Binary(as))
	case 17:
		as.Sync(g.sync, g.step, g.handlers()...)
	case 18:
		g.complete()
	case 19: // a Go step's record handed to C, which may call through it
		ctest.FuzzKeep(ffi.Binary(as))
	}
	return false
}

// stack allocates step memory, filled with its index, which its destroy
// callback checks once.
func (g *goSide) stack(as vm.AsyncSteps) {
	const size = 24
	id := len(g.stacks)
	p := as.StackRaw(size, func(p unsafe.Pointer) {
		for _, b := range unsafe.Slice((*byte)(p), size) {
			if b != byte(id) {
				g.fail("Stack memory of allocation %d overwritten", id)
				break
			}
		}
		if g.stacks[id] != 1 {
			g.fail("Stack destroy callback of allocation %d ran twice", id)
		}
		g.stacks[id] = 2
	})
	if p == nil {
		return
	}
	g.stacks = append(g.stacks, 1)
	for i := range size {
		*(*byte)(unsafe.Add(p, i)) = byte(id)
	}
}

// complete completes a kept Resumer, if the program says so: from the
// loop's goroutine or another one, live or stale.
func (g *goSide) complete() {
	if len(g.resumers) == 0 {
		return
	}
	rs := g.resumers[fuzzByte()%len(g.resumers)]
	if fuzzByte()&1 == 0 {
		rs.Success(g.values(vm.Args{})...)
	} else {
		rs.Error(goCodes[fuzzByte()%3], "resumed")
	}
}

// away is the Go side's turn on the other goroutine between passes.
func (g *goSide) away() {
	if ctest.FuzzLive(false) && fuzzByte()%2 == 1 {
		g.complete()
	}
}

// check returns the first broken guarantee of the run once every step has
// ended; "" when there is none.
func (g *goSide) check() string {
	for id, s := range g.stacks {
		if s != 2 {
			g.fail("Stack destroy callback of allocation %d never ran", id)
		}
	}
	return g.problem
}
