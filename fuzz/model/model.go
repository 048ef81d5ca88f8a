// Package model is the reference interpreter of step programs (package
// prog): a deliberately plain implementation of the execution rules of
// FTN12 and of vm/doc.go, written to be obviously right rather than fast.
// Flows are trees of heap objects, unwinding is a loop over a slice of
// frames, the event loop is a slice of tasks and a slice of timers. The
// fuzzer holds the VM to the trace this package produces.
//
// The rules it follows, and where they come from:
//
//   - The loop runs in passes: first the completions Resumers posted
//     since the last pass started, then the tasks queued when the pass
//     starts, in order, then the timers that are due, by deadline and then
//     in the order they were armed, which for a program's timers is the
//     order they were set. When nothing is queued, the clock jumps
//     to the next deadline (vm/doc.go "Scheduling"; vm.Loop.Iterate).
//   - A step's Resumer accepts one completion, while the step waits; an
//     error or cancel that unwinds the step releases it, and a completion
//     accepted before that is dropped (vm.Resumer).
//   - Each step function and each loop iteration runs in a turn of its own.
//     A flow that becomes ready to continue is queued behind the work
//     already queued; the flow whose turn it is decides at the end of its
//     turn, and continues in the same turn when nothing else is queued, up
//     to inlineBudget times (vm/doc.go, vm.Loop's comment); iterations
//     that end on the spot run back to back on the same budget, the first
//     of them as the instruction's own (iterate). A completion that a
//     Resumer posts meanwhile, or a timer due in the pass that set it (a
//     timeout or cancel of 0 ms, which prog.Generate never makes), reaches
//     the flow after the turn.
//   - Completion is synchronous: a step's success ends it and every
//     enclosing step whose sub-steps are done (vm/doc.go). But when that
//     reaches the bottom of a thread (the root, or a branch) from inside
//     a step function or error handler of that thread, the thread ends in
//     its next turn, even when a timer, a Resumer or a branch's error ran
//     the handler outside that turn (vm/doc.go "Scheduling").
//   - Errors unwind from the innermost frame of their thread; each frame on
//     the way stops its timeout, runs its cancel handler, then its error
//     handler if it has one that has not run (FTN12 1.2, 1.2.1; vm/doc.go
//     "Errors").
//   - Break and Continue unwind to the loop, running cancel handlers but
//     no error handlers (vm/doc.go "Loops").
//   - A root's Cancel (the harness's, or a cancel statement's, from a step,
//     error handler or cancel handler of any root) unwinds every frame of
//     the root at once, running cancel handlers only; when it is the
//     caller's own root, nothing of the caller's frame carries on after
//     it: no success, no error handler, no further unwinding. Release
//     cancels a running root the same way and leaves its handle stale: a
//     later Cancel or Release through it is misuse, InternalError of the
//     calling flow from a step or error handler, nothing from a cancel
//     handler (vm's misuse).
//   - A Mutex admits a flow at once (the section runs in the same turn),
//     queues it in FIFO order, or refuses it with DefenseRejected; the
//     section is released when its frame ends and handed to the first
//     waiter (vm.Mutex). A Throttle admits up to max entries a period,
//     holding nothing, and the first waiters as periods end (vm.Throttle).
//     A Limiter is a Mutex whose section is the sync step of a Throttle
//     (vm.Limiter).
package model

import (
	"github.com/stepvm/stepvm/fuzz/prog"
)

// inlineBudget is how many times the flow whose turn it is may continue
// without going through the queue (vm's inlineBudget).
const inlineBudget = 256

// Run interprets p and returns its trace. The error reports a run that did
// not settle within lim.MaxPasses passes.
func Run(p *prog.Program, lim prog.Limits) (prog.Trace, error) {
	m := &machine{
		ids:     prog.IDs(p),
		lim:     lim,
		models:  map[string]*model{},
		mutexes: map[string]*mutex{},
	}
	m.load(p)
	err := m.run()
	return m.out, err
}

type machine struct {
	ids map[prog.Stmt]string
	lim prog.Limits
	out prog.Trace

	now    int64    // milliseconds
	inbox  []func() // Resumer completions, delivered when the next pass starts
	queue  []*task
	timers []*timer
	tseq   int

	flows   []*flow
	models  map[string]*model
	mutexes map[string]*mutex

	// The turn being run: its thread, and whether (and with which values)
	// that thread asked to continue.
	cur      *thread
	cont     bool
	contArgs []prog.Value
	budget   int // what is left of the turn's inlineBudget (runTask, iterate)
	inCancel int // cancel handlers running
}

// task is a turn of a thread, or an Immediate callback of the harness.
type task struct {
	th    *thread
	token int
	args  []prog.Value
	fn    func()
}

type timer struct {
	at   int64
	seq  int
	fn   func()
	dead bool
}

type model struct {
	steps []pending
	state map[string]string
}

type mutex struct {
	max, maxQueue int
	inside        int      // a Throttle's: entries in the current period
	queue         []*frame // queued sync frames

	period  int64 // > 0: a Throttle of this period (ms)
	ticking bool  // a Throttle's period runs

	rate *mutex // a Limiter's Throttle, entered inside this Mutex
}

// flow is a root.
type flow struct {
	name     string
	state    map[string]string
	info     string // error_info
	running  bool
	done     string // the completion event, once completed
	released bool   // by a release statement: its handle is stale
	reported bool
	main     *thread
}

// thread is the main thread of a flow or one branch of a parallel step.
// Its frames are linked from top (innermost) down to base through parent.
type thread struct {
	flow  *flow
	base  *frame
	top   *frame
	token int // bumped by every schedule and stop: older tasks are stale
	done  bool
}

type frameKind uint8

const (
	fBase     frameKind = iota // bottom of a thread: the root, or a branch
	fStep                      // a step function (also a sync section)
	fSuccess                   // a successStep
	fParallel                  // a parallel step
	fLoop                      // loop, repeat, forEach
	fIter                      // one iteration of a loop
	fSync                      // a sync step, around its section
)

// resumerState is that of the vm.Resumer of a waiting step: live from the
// wait until the step ends or an error or cancel unwinds it (vm:
// cancelFrame releases it), claimed once a completion was accepted.
type resumerState uint8

const (
	resumerNone resumerState = iota
	resumerLive
	resumerClaimed
)

type syncState uint8

const (
	syncIdle syncState = iota
	syncQueued
	syncHeld
	syncPassed // re-entered: nothing to give back
)

// pending is a step waiting in a queue, with the loop variables it
// captured and, for a parallel step, its branches.
type pending struct {
	stmt     prog.Stmt
	loop     prog.LoopVars
	branches []pending
	section  bool // the critical section of a sync step
	inner    bool // the sync step of a Limiter's Throttle, inside its Mutex's
}

type frame struct {
	kind   frameKind
	th     *thread
	parent *frame // a branch's base: the parallel frame; the root's base: nil
	id     string
	loop   prog.LoopVars
	queue  []pending
	alive  bool

	// Step and iteration frames.
	args     []prog.Value
	catch    *prog.Block
	handled  bool // the error handler ran, or runs
	timer    *timer
	onCancel *prog.Block
	allocs   []*prog.Stack // of the step, or of its (or a parallel step's) error handler
	waitExt  bool          // WaitExternal: no implicit success
	waiting  bool          // the harness will complete it
	resumer  resumerState

	// Parallel frames.
	branches []*thread
	running  int

	// Loop frames.
	label  string
	body   []prog.Stmt
	next   int
	count  int // -1: until Break
	keys   []prog.Value
	values []prog.Value
	loopOf prog.LoopKind

	// Sync frames.
	mutex    *mutex
	sync     syncState
	waitArgs []prog.Value
}

// load builds the declared mutexes, models and roots, executes the roots
// in order and sets the cancel timers, as the harness does.
func (m *machine) load(p *prog.Program) {
	for _, d := range p.Decls {
		switch d := d.(type) {
		case *prog.Mutex:
			if d.Limiter { // a Mutex around a Throttle (vm.Limiter)
				m.mutexes[d.Name] = &mutex{max: d.Max, maxQueue: d.Queue,
					rate: &mutex{max: d.Rate, maxQueue: d.Burst, period: d.PeriodMS}}
				break
			}
			m.mutexes[d.Name] = &mutex{max: d.Max, maxQueue: d.Queue, period: d.PeriodMS}
		case *prog.Model:
			md := &model{state: map[string]string{}}
			for _, s := range d.Body {
				if set, ok := s.(*prog.Set); ok {
					sc := prog.Scope{State: lookup(md.state)}
					md.state[set.Var] = sc.Expand(set.Text)
					continue
				}
				m.add(&md.steps, s, prog.LoopVars{}, md.state)
			}
			m.models[d.Name] = md
		case *prog.Root:
			fl := &flow{name: d.Name, state: map[string]string{}, running: true}
			th := &thread{flow: fl}
			th.base = &frame{kind: fBase, th: th, alive: true}
			th.top = th.base
			fl.main = th
			for _, s := range d.Body {
				if set, ok := s.(*prog.Set); ok {
					sc := prog.Scope{State: lookup(fl.state)}
					fl.state[set.Var] = sc.Expand(set.Text)
					continue
				}
				m.add(&th.base.queue, s, prog.LoopVars{}, fl.state)
			}
			m.flows = append(m.flows, fl)
			m.push(th, nil)
		}
	}
	i := 0
	for _, d := range p.Decls {
		if r, ok := d.(*prog.Root); ok {
			fl := m.flows[i]
			i++
			if r.Cancel >= 0 {
				m.addTimer(r.Cancel, func() { m.cancelFlow(fl) })
			}
		}
	}
}

// flowNamed returns the flow of the root called name.
func (m *machine) flowNamed(name string) *flow {
	for _, fl := range m.flows {
		if fl.name == name {
			return fl
		}
	}
	panic("model: cancel of an unknown root " + name) // Parse rejects such programs
}

func lookup(state map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := state[k]
		return v, ok
	}
}

// add queues the steps adder s adds on list; a copy also copies the
// model's missing state variables into state.
func (m *machine) add(list *[]pending, s prog.Stmt, lv prog.LoopVars, state map[string]string) {
	switch s := s.(type) {
	case *prog.Copy:
		md := m.models[s.Model]
		*list = append(*list, md.steps...)
		for k, v := range md.state {
			if _, ok := state[k]; !ok {
				state[k] = v
			}
		}
	case *prog.Parallel:
		pd := pending{stmt: s, loop: lv}
		for _, b := range s.Branches {
			m.add(&pd.branches, b, lv, state)
		}
		*list = append(*list, pd)
	default:
		*list = append(*list, pending{stmt: s, loop: lv})
	}
}
