package prog

import "strconv"

// Limits bound a run, so that no program can run forever: a run stops once
// its trace has MaxTrace lines (it is then Truncated), and a run that takes
// more than MaxPasses passes of the loop without reaching that many lines
// is an error of the interpreter, since every pass of a correct one makes
// progress.
type Limits struct {
	MaxTrace  int
	MaxPasses int
}

// DefaultLimits suit fuzzing: small programs, quick runs.
var DefaultLimits = Limits{MaxTrace: 2000, MaxPasses: 200_000}

// Trace is what a run of a program produced: one line per event, each
// "ROOT: EVENT". Truncated reports that the run stopped at MaxTrace lines.
type Trace struct {
	Lines     []string
	Truncated bool
}

// DoneOK, DoneError and DoneCanceled are the events of a root's
// completion.
func DoneOK(vals []Value) string { return "done ok" + FormatValues(vals) }

func DoneError(code, info string) string {
	if info != "" {
		return "done error " + code + " " + strconv.Quote(info)
	}
	return "done error " + code
}

const DoneCanceled = "done canceled"

// FreeEvent is the event of the destruction of the memory stack statement
// s allocated in the step (or handler of the step) id.
func FreeEvent(id string, s *Stack) string { return "free " + id + " " + s.operand() }
