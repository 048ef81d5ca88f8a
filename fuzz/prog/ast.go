package prog

import "strconv"

// Program is a parsed step program: its declarations in source order. Two
// programs are the same program when reflect.DeepEqual says so; the parser,
// the printer and the generator all build empty lists as nil so that this
// holds for programs that print the same.
type Program struct {
	Decls []Decl
}

// Decl is a top-level declaration: *Root, *Model or *Mutex.
type Decl interface{ decl() }

// Root is a flow the harness executes. Roots start in declaration order, at
// time 0; Cancel >= 0 makes the harness cancel the root at that time (in
// milliseconds), whether or not it is still running.
type Root struct {
	Name   string
	Cancel int64 // -1: never
	Body   []Stmt
}

// Model is a root that is never executed: Copy statements copy its steps
// and state variables (FTN12 1.5).
type Model struct {
	Name string
	Body []Stmt
}

// Mutex is a vm.Mutex shared by every root: at most Max flows inside, at
// most Queue waiting (-1: unbounded); or, with PeriodMS > 0, a vm.Throttle:
// at most Max entries per period of PeriodMS milliseconds; or, with
// Limiter, a vm.Limiter: Max flows inside, Queue waiting for a place,
// Rate entries per period, Burst of those inside waiting for the rate.
type Mutex struct {
	Name        string
	Max, Queue  int
	PeriodMS    int64
	Limiter     bool
	Rate, Burst int
}

func (*Root) decl()  {}
func (*Model) decl() {}
func (*Mutex) decl() {}

// Stmt is a statement. Adders (Step, Parallel, Loop, Repeat, ForEach,
// SuccessStep, Sync, Copy) add steps; the others act within the step that
// runs them; terminal statements (Success, Error, Wait, Break, Continue,
// Panic, Cancel) end the block they are in.
type Stmt interface{ stmt() }

// Block is the body of an error or cancel handler.
type Block struct {
	Stmts []Stmt
}

// Step adds a step (Add). Name, if set, identifies it in the trace.
type Step struct {
	Name  string
	Body  []Stmt
	Catch *Block // error handler; nil: none
}

// Parallel adds a parallel step whose branches are adders.
type Parallel struct {
	Name     string
	Branches []Stmt
	Catch    *Block
}

// Loop adds a loop that runs Body until a Break.
type Loop struct {
	Label string
	Body  []Stmt
}

// Repeat adds a loop that runs Body Count times, binding {i}.
type Repeat struct {
	Count int
	Label string
	Body  []Stmt
}

// ForEach adds a loop over a list (Keys nil) or a map (Keys[i] is the key
// of Values[i]; iterated in sorted key order), binding {key} and {val}.
type ForEach struct {
	Keys   []string
	Values []Value
	IsMap  bool
	Label  string
	Body   []Stmt
}

// SuccessStep adds a step that succeeds with Values (FTN12 1.12).
type SuccessStep struct {
	Values []Value
}

// Sync adds a step that runs Body inside the critical section of Mutex.
type Sync struct {
	Mutex string
	Name  string
	Body  []Stmt
	Catch *Block
}

// Copy copies the steps and missing state variables of Model (CopyFrom).
type Copy struct {
	Model string
}

// Print appends its expanded Text to the trace.
type Print struct {
	Text string
}

// Set sets state variable Var to the expanded Text.
type Set struct {
	Var, Text string
}

// Timeout sets the step's timeout in milliseconds.
type Timeout struct {
	MS int64
}

// OnCancel sets the step's cancel handler.
type OnCancel struct {
	Body *Block
}

// Stack allocates Size bytes that live as long as the step, or the error
// handler's step: raw bytes (StackRaw), or a value of a type of Size
// bytes (vm.Stack), which is one of StackSizes.
type Stack struct {
	Size int
	Type StackType
}

// StackType is how a stack statement allocates.
type StackType uint8

const (
	StackRaw      StackType = iota // StackRaw(Size, destroy)
	StackArray                     // vm.Stack[[Size]byte]: no Go pointers, served from the arena
	StackPointers                  // vm.Stack of a Size-byte array beside Go pointers: served from the Go heap
)

// StackSizes are the sizes vm.Stack allocates (stack array and stack
// pointers): the harness has a type of each size.
var StackSizes = []int{1, 8, 24, 64, 100, 4096}

var stackTypeWords = [...]string{StackArray: "array", StackPointers: "pointers"}

// String returns the word of t in a stack statement: "raw" for StackRaw,
// which has none.
func (t StackType) String() string {
	if t == StackRaw {
		return "raw"
	}
	return stackTypeWords[t]
}

// operand is the text of s after "stack", and of its free event after the
// step's ID: "64", "array 64" or "pointers 64".
func (s *Stack) operand() string {
	n := strconv.Itoa(s.Size)
	if s.Type == StackRaw {
		return n
	}
	return stackTypeWords[s.Type] + " " + n
}

// Success completes the step with Values.
type Success struct {
	Values []Value
}

// Error fails the step with Code and Info.
type Error struct {
	Code, Info string
}

// Wait makes the step wait for an external completion (WaitExternal).
// With Turns > 0 the harness completes it Turns loop turns later, with
// MS > 0 from a timer MS milliseconds later, with Then (a *Success or an
// *Error), through the step's handle or, with Resumer, its vm.Resumer;
// with neither (Then nil) nothing completes it.
type Wait struct {
	Turns   int
	MS      int64
	Resumer bool
	Then    Stmt
}

// Break leaves the innermost loop, or the one labelled Label.
type Break struct {
	Label string
}

// Continue starts the next iteration of the innermost loop, or of the one
// labelled Label.
type Continue struct {
	Label string
}

// Panic panics with Text (a Go panic, which the VM turns into
// InternalError).
type Panic struct {
	Text string
}

// Cancel cancels root Root (its Cancel), or with Release releases it (its
// Release: canceled if it runs, then back to the loop's pool, its handle
// invalid), from inside a step, error handler or cancel handler, then ends
// the block as if it had no terminal statement. Root is the root the
// statement is in or one declared before.
type Cancel struct {
	Root    string
	Release bool
}

func (*Step) stmt()        {}
func (*Parallel) stmt()    {}
func (*Loop) stmt()        {}
func (*Repeat) stmt()      {}
func (*ForEach) stmt()     {}
func (*SuccessStep) stmt() {}
func (*Sync) stmt()        {}
func (*Copy) stmt()        {}
func (*Print) stmt()       {}
func (*Set) stmt()         {}
func (*Timeout) stmt()     {}
func (*OnCancel) stmt()    {}
func (*Stack) stmt()       {}
func (*Success) stmt()     {}
func (*Error) stmt()       {}
func (*Wait) stmt()        {}
func (*Break) stmt()       {}
func (*Continue) stmt()    {}
func (*Panic) stmt()       {}
func (*Cancel) stmt()      {}

// IsAdder reports whether s adds steps.
func IsAdder(s Stmt) bool {
	switch s.(type) {
	case *Step, *Parallel, *Loop, *Repeat, *ForEach, *SuccessStep, *Sync, *Copy:
		return true
	}
	return false
}

// IsTerminal reports whether s ends its block.
func IsTerminal(s Stmt) bool {
	switch s.(type) {
	case *Success, *Error, *Wait, *Break, *Continue, *Panic, *Cancel:
		return true
	}
	return false
}
