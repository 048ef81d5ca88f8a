package fuzz

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/internal/fuzzinput"
	"github.com/stepvm/stepvm/vm"
)

// FuzzAPI drives package vm's public API as a byte program says, where
// FuzzVMvsModel keeps to well-formed programs: every step, error handler,
// loop body, cancel handler and callback reads what it does next, and that
// includes misuse (Success twice, calls on finished steps, Execute on a
// running root), panics, Release and Cancel of any root from any of them,
// and calls through handles and Resumers kept from earlier steps and runs,
// whose roots the pool may have handed to other flows since. Two loops run
// the flows, in turn on one goroutine, by Iterate or RunUntilIdle, and the
// kept handles may be either's; their panic handlers may panic in turn.
// There is no model to compare with: the
// guarantees are the VM's own. No panic leaves a loop, no step runs after
// its run's Future resolved, every Future resolves once the roots are
// released, each cancel handler and Stack destroy callback runs at most
// once, the latter on memory intact since it was written, and once
// everything is released no arena memory, root, timer or queued task is
// left.
//
//	go test -run '^$' -fuzz '^FuzzAPI$' -fuzztime 10m -parallel 1 ./fuzz
func FuzzAPI(f *testing.F) {
	for _, seed := range []string{
		"",
		"\x00\x00\x02\x02\x01\x05",
		"\x01\x03\x00\x01\x0c\x02\x08\x01\x12\x00\x13\x01\x02",
		"\x02\x11\x03\x00\x00\x00\x15\x01\x16\x00\x09\x10\x04",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(runAPIProgram)
}

// TestAPIRandomPrograms runs FuzzAPI's check on 1,000 inputs drawn from a
// fixed seed; API_PROGRAMS sets another count.
func TestAPIRandomPrograms(t *testing.T) {
	fuzzinput.Run(t, 13, 1000, "API_PROGRAMS", runAPIProgram)
}

const (
	apiSlots  = 8    // kept handles, and kept Resumers
	apiBudget = 1500 // callbacks per run
	apiRoots  = 64   // roots a run may make
)

// apiRun is one run of a program.
type apiRun struct {
	prog    []byte
	pos     int
	budget  int
	loops   [2]*vm.Loop // driven in turn on the test's goroutine
	kept    [apiSlots]vm.AsyncSteps
	res     [apiSlots]vm.Resumer
	handles [apiSlots]vm.Handle // Immediate callbacks, to cancel
	roots   []vm.AsyncSteps     // every root made, to release at the end
	runs    []*vm.Future        // every run started with a Future
	syncs   [2][3]vm.ISync      // by loop
	stacks  []apiStack
	cancel  []int // calls of each cancel handler
	late    int   // steps run after their run's Future resolved
	broken  string
}

// apiPointers is a Stack type with Go pointers, which the garbage
// collector must see.
type apiPointers struct {
	s string
	p *int
}

// apiStack is a StackRaw allocation: its first 4 bytes hold its index, the
// others that index's low byte.
type apiStack struct {
	p     unsafe.Pointer
	size  int
	state uint8 // 1: allocated, 2: destroyed
}

func (r *apiRun) next() int {
	if r.pos >= len(r.prog) {
		return 0
	}
	r.pos++
	return int(r.prog[r.pos-1])
}

// live reports whether the program goes on: when it does not, steps end
// at once and loops break.
func (r *apiRun) live() bool { return r.budget > 0 && r.pos < len(r.prog) }

// enter counts a callback against the budget and reports whether it may
// act.
func (r *apiRun) enter() bool {
	if !r.live() {
		return false
	}
	r.budget--
	return true
}

func (r *apiRun) fail(format string, args ...any) {
	if r.broken == "" {
		r.broken = fmt.Sprintf(format, args...)
	}
}

var apiLabels = []string{"", "a", "b"}

func (r *apiRun) label() []string {
	if l := apiLabels[r.next()%len(apiLabels)]; l != "" {
		return []string{l}
	}
	return nil
}

func (r *apiRun) values() []vm.Value {
	vals := make([]vm.Value, r.next()%5)
	for i := range vals {
		switch r.next() % 5 {
		case 0:
			vals[i] = vm.Int(int64(r.next()))
		case 1:
			vals[i] = vm.Str("s")
		case 2:
			vals[i] = vm.Bytes([]byte{1, 2})
		case 3:
			vals[i] = vm.Any(&r.pos)
		case 4:
			vals[i] = vm.Bool(true)
		}
	}
	return vals
}

// start runs root as a new run with a Future its steps find in its state.
// A run started otherwise (Execute, a clone, a root CopyFrom gave the key)
// must not have the key: its steps would find an earlier run's Future.
func (r *apiRun) start(root vm.AsyncSteps) {
	f := root.Promise()
	select {
	case <-f.Done(): // refused: a misuse, or no steps
	default:
		root.State().Set("future", f)
		r.runs = append(r.runs, f)
	}
}

// forget removes the key start sets from the state of as's root.
func forget(as vm.AsyncSteps) {
	if st := as.State(); st != nil {
		st.Unset("future")
	}
}

// newRoot makes a root with a first step, to run or to keep.
func (r *apiRun) newRoot(mk func() vm.AsyncSteps) (vm.AsyncSteps, bool) {
	if len(r.roots) == apiRoots {
		return vm.AsyncSteps{}, false
	}
	root := mk()
	if !root.Valid() {
		return root, false
	}
	r.roots = append(r.roots, root)
	root.Add(r.step, r.handler())
	return root, true
}

func (r *apiRun) step(as vm.AsyncSteps, _ vm.Args) {
	if st := as.State(); st != nil {
		if f, ok := st.Get("future"); ok {
			select {
			case <-f.(*vm.Future).Done():
				r.late++
			default:
			}
		}
	}
	if !r.enter() {
		return
	}
	for n := 1 + r.next()%4; n > 0 && r.live(); n-- {
		if r.op(as) {
			return
		}
	}
}

// spawned is the step of a spawned root. Nothing can release or cancel
// such a root: its step bounds the program's step, which it runs as a
// sub-step, with a timeout, and the error handlers of the root let every
// error go on (the Timeout reaches the innermost step's handler first,
// which could otherwise go on after it). It has no handler of its own.
func (r *apiRun) spawned(as vm.AsyncSteps, _ vm.Args) {
	as.State().Set("spawned", true)
	as.SetTimeout(200 * time.Millisecond)
	as.Add(r.step, r.handler())
}

func (r *apiRun) body(as vm.AsyncSteps) {
	if !r.enter() {
		as.Break()
	}
	for n := r.next() % 3; n > 0 && r.live(); n-- {
		if r.op(as) {
			return
		}
	}
}

func (r *apiRun) handler() vm.ErrorFunc {
	if r.next()%2 == 0 {
		return nil
	}
	return func(as vm.AsyncSteps, code string) {
		if st := as.State(); st != nil && st.Exists("spawned") || !r.enter() {
			return
		}
		switch r.next() % 7 {
		case 0:
			return // the error goes on
		case 1:
			as.Success(r.values()...)
		case 2:
			as.Error("Handled" + code)
		case 3:
			as.Add(r.step, r.handler())
		case 4:
			panic("handler")
		case 5:
			r.kept[r.next()%apiSlots] = as
		case 6:
			r.op(as)
		}
	}
}

func (r *apiRun) cancelHandler() vm.CancelFunc {
	id := len(r.cancel)
	r.cancel = append(r.cancel, 0)
	return func(as vm.AsyncSteps) {
		r.cancel[id]++
		if r.cancel[id] > 1 {
			r.fail("cancel handler %d ran %d times", id, r.cancel[id])
		}
		if r.enter() && r.next()%3 == 0 {
			r.through() // calls from a cancel handler are recorded, not carried out
		}
	}
}

func (r *apiRun) stackRaw(as vm.AsyncSteps) {
	size := 4 + r.next()%8*8
	p := as.StackRaw(size, r.destroy)
	if p == nil {
		return
	}
	id := len(r.stacks)
	r.stacks = append(r.stacks, apiStack{p: p, size: size, state: 1})
	b := unsafe.Slice((*byte)(p), size)
	*(*uint32)(p) = uint32(id)
	for i := 4; i < size; i++ {
		b[i] = byte(id)
	}
}

func (r *apiRun) destroy(p unsafe.Pointer) {
	id := int(*(*uint32)(p))
	if id >= len(r.stacks) || r.stacks[id].p != p {
		r.fail("Stack memory at %p overwritten: it names allocation %d", p, id)
		return
	}
	s := &r.stacks[id]
	if s.state != 1 {
		r.fail("Stack allocation %d destroyed twice", id)
	}
	s.state = 2
	for i, c := range unsafe.Slice((*byte)(p), s.size)[4:] {
		if c != byte(id) {
			r.fail("Stack allocation %d overwritten at byte %d", id, i+4)
			break
		}
	}
	if r.enter() && r.next()%4 == 0 {
		r.through()
	}
}

// op does what the program says next with as, the handle of a step, loop
// body or error handler, and reports whether as has ended.
func (r *apiRun) op(as vm.AsyncSteps) bool {
	switch r.next() % 41 {
	case 0, 1, 37, 38, 39, 40: // the commonest, so that flows grow
		as.Add(r.step, r.handler())
	case 2:
		as.Success(r.values()...)
		return true
	case 3:
		as.Error([]string{"E", "F", vm.Timeout}[r.next()%3], "fuzz")
	case 4:
		panic("step")
	case 5:
		panic(&vm.Error{Code: "Panicked", Info: "fuzz"})
	case 6:
		as.SetTimeout(time.Duration(1+r.next()%40) * time.Millisecond)
	case 7:
		as.SetCancel(r.cancelHandler())
	case 8:
		as.WaitExternal()
		k := r.next() % apiSlots
		r.res[k] = as.Resumer()
		switch r.next() % 3 {
		case 0:
			res := r.res[k]
			as.Tool().Deferred(time.Duration(r.next()%30)*time.Millisecond, func() { res.Success(vm.Int(1)) })
		case 1:
			res := r.res[k]
			as.Tool().Immediate(func() { res.Error("Ext", "immediate") })
		}
	case 9:
		r.stackRaw(as)
	case 10:
		if p := vm.Stack[[3]uint64](as); p != nil {
			p[0], p[2] = 1, 2
		}
	case 11:
		if st := as.State(); st != nil {
			key := []string{"x", "y", "future"}[r.next()%3]
			switch r.next() % 3 {
			case 0:
				if key != "future" {
					st.Set(key, r.next())
				}
			case 1:
				st.Get(key)
				st.Exists(key)
			case 2:
				if key != "future" {
					st.Unset(key)
				}
			}
		}
	case 12:
		as.Loop(r.body, r.label()...)
	case 13:
		as.Repeat(r.next()%4, func(as vm.AsyncSteps, _ int) { r.body(as) }, r.label()...)
	case 14:
		vm.ForEach(as, []int{1, 2, 3}[:r.next()%4], func(as vm.AsyncSteps, _ int, _ int) { r.body(as) }, r.label()...)
	case 15:
		as.Break(r.label()...)
	case 16:
		as.Continue(r.label()...)
	case 17:
		p := as.Parallel(r.handler())
		for n := r.next() % 4; n > 0; n-- {
			p.Add(r.step, r.handler())
		}
	case 18:
		r.kept[r.next()%apiSlots] = as
	case 19:
		r.through()
	case 20:
		res := r.res[r.next()%apiSlots]
		if r.next()%2 == 0 {
			res.Success(r.values()...)
		} else {
			res.Error("Resumed", "")
		}
	case 21:
		if len(r.roots) > 0 {
			r.roots[r.next()%len(r.roots)].Cancel()
		}
	case 22:
		if len(r.roots) > 0 {
			r.roots[r.next()%len(r.roots)].Release()
		}
	case 23:
		if root, ok := r.newRoot(as.NewInstance); ok && r.next()%2 == 0 {
			r.start(root)
		}
	case 24:
		as.Tool().Spawn(r.spawned)
	case 25:
		syncs := r.syncs[0]
		if as.Tool() == r.loops[1] {
			syncs = r.syncs[1]
		}
		as.Sync(syncs[r.next()%len(syncs)], r.step, r.handler())
	case 26:
		as.SuccessStep(r.values()...)
	case 27:
		fail := r.next()%2 == 0
		as.Await(func(ctx context.Context) (vm.Value, error) {
			if fail {
				return vm.Value{}, errors.New("await")
			}
			return vm.Int(1), nil
		}, r.handler())
	case 28:
		h := as.Tool().Deferred(time.Duration(r.next()%20)*time.Millisecond, r.callback)
		if r.next()%2 == 0 {
			as.Tool().Cancel(h)
		}
	case 29:
		done := make(chan struct{})
		go func() {
			defer close(done)
			as.Tool().Post(r.callback)
		}()
		<-done
	case 30:
		if len(r.roots) > 0 {
			model := r.roots[r.next()%len(r.roots)]
			had := as.State() != nil && as.State().Exists("future")
			as.CopyFrom(model)
			if !had {
				forget(as)
			}
		}
	case 31:
		r.handles[r.next()%apiSlots] = as.Tool().Immediate(r.callback)
	case 32:
		if p := vm.Stack[apiPointers](as); p != nil {
			p.s, p.p = "kept", &r.pos
		}
	case 33:
		vm.ForEachMap(as, map[string]int{"a": 1, "b": 2}, func(as vm.AsyncSteps, _ string, _ int) { r.body(as) }, r.label()...)
	case 34:
		as.Tool().RunUntilIdle() // forbidden: a pass inside a pass
	case 35:
		h := r.handles[r.next()%apiSlots]
		if as.Tool().IsValid(h) && r.next()%2 == 0 {
			as.Tool().Cancel(h)
		}
	case 36:
		if st := as.State(); st != nil {
			_ = st.ErrorInfo()
			_ = st.LastException()
			_ = st.AsyncStack()
		}
		as.Tool().IsSameThread()
	}
	return false
}

// callback is an Immediate, Deferred or Post callback.
func (r *apiRun) callback() {
	if r.enter() {
		r.through()
	}
}

// through calls a kept handle, stale or not, the way the program says.
func (r *apiRun) through() {
	k := r.kept[r.next()%apiSlots]
	switch r.next() % 12 {
	case 0:
		k.Success(r.values()...)
	case 1:
		k.Error("Through", "kept")
	case 2:
		k.Add(r.step, r.handler())
	case 3:
		k.Cancel()
	case 4:
		k.Release()
	case 5:
		r.start(k)
	case 6:
		forget(k)
		k.Execute()
	case 7:
		k.SetTimeout(time.Duration(r.next()%20) * time.Millisecond)
	case 8:
		r.stackRaw(k)
	case 9:
		if st := k.State(); st != nil {
			st.Set("x", 1)
		}
		k.Valid()
	case 10:
		if len(r.roots) < apiRoots {
			if c := k.Clone(); c.Valid() {
				forget(c)
				r.roots = append(r.roots, c)
			}
		}
	case 11:
		k.WaitExternal()
	}
}

// handlerPanic is what the panic handler of FuzzAPI's loops panics with.
type handlerPanic struct{}

// pass runs l until it is idle or only waits for timers, by Iterate or by
// RunUntilIdle, and recovers a panic of its panic handler, which leaves
// the pass.
func pass(l *vm.Loop, iterate bool) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(handlerPanic); !ok {
				panic(p)
			}
		}
	}()
	if !iterate {
		l.RunUntilIdle()
		return
	}
	for range 1000 {
		if work, delay := l.Iterate(); !work || delay > 0 {
			return
		}
	}
}

func runAPIProgram(t *testing.T, prog []byte) {
	clk := vm.NewManualClock(time.Unix(1_700_000_000, 0))
	r := &apiRun{prog: prog, budget: apiBudget}
	for i := range r.loops {
		// The panic handler may panic in turn: that panic leaves the pass
		// (drive recovers it and goes on), and the loop must stay whole.
		l := vm.NewLoop(vm.WithClock(clk), vm.WithPanicHandler(func(any) {
			if r.live() && r.next()%4 == 0 {
				panic(handlerPanic{})
			}
		}))
		defer l.Close()
		r.loops[i] = l
		r.syncs[i] = [3]vm.ISync{
			vm.NewMutex(1, 1),
			vm.NewThrottle(l, 1, 10*time.Millisecond, 2),
			vm.NewLimiter(l, vm.LimiterOptions{Concurrent: 1, MaxQueue: 2, Rate: 2, Period: 10 * time.Millisecond, Burst: 1}),
		}
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("a panic left the loop: %v", p)
		}
	}()
	for range 1 + r.next()%3 {
		if root, ok := r.newRoot(r.loops[r.next()%2].NewSteps); ok {
			r.start(root)
		}
	}
	iterate := r.next()%2 == 0 // drive the loops by Iterate, or by RunUntilIdle
	drive := func() {
		for range 300 {
			idle := true
			for _, l := range r.loops {
				pass(l, iterate)
				if s := l.Stats(); s.Timers != 0 || s.Queued != 0 {
					idle = false
				}
			}
			if idle {
				return
			}
			clk.Advance(5 * time.Millisecond)
		}
	}
	drive()
	r.budget = 0 // what runs from now on ends at once
	for _, root := range r.roots {
		root.Release() // cancels what still runs
	}
	drive()
	if r.broken != "" {
		t.Fatal(r.broken)
	}
	if r.late != 0 {
		t.Fatalf("%d steps ran after their run's Future resolved", r.late)
	}
	for i, f := range r.runs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("run %d: its Future never resolved", i)
		}
	}
	for i, s := range r.stacks {
		if s.state != 2 {
			t.Fatalf("Stack allocation %d never destroyed", i)
		}
	}
	for i, l := range r.loops {
		if s := l.Stats(); s.ArenaInUse != 0 || s.LiveRoots != 0 || s.RunningRoots != 0 || s.Timers != 0 || s.Queued != 0 {
			t.Fatalf("loop %d, once everything was released: %+v", i, s)
		}
	}
}
