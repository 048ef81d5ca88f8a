package vm

import (
	"errors"
	"fmt"
)

// Error codes of the FutoIn specifications (the JS reference's FutoInErrors).
const (
	ConnectError        = "ConnectError"
	CommError           = "CommError"
	UnknownInterface    = "UnknownInterface"
	NotSupportedVersion = "NotSupportedVersion"
	NotImplemented      = "NotImplemented"
	Unauthorized        = "Unauthorized"
	InternalError       = "InternalError"
	InvokerError        = "InvokerError"
	InvalidRequest      = "InvalidRequest"
	DefenseRejected     = "DefenseRejected"
	PleaseReauth        = "PleaseReauth"
	SecurityError       = "SecurityError"
	Timeout             = "Timeout"
)

// Error is a FutoIn error: a code and an optional descriptive info.
// errors.Is matches two *Error values on Code alone.
type Error struct{ Code, Info string }

// Error returns the code, and ": " and the info when there is one.
func (e *Error) Error() string {
	if e.Info == "" {
		return e.Code
	}
	return e.Code + ": " + e.Info
}

// Is reports whether target is a non-nil *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// Sentinels for errors.Is, one per code.
var (
	ErrConnect             error = &Error{Code: ConnectError}
	ErrComm                error = &Error{Code: CommError}
	ErrUnknownInterface    error = &Error{Code: UnknownInterface}
	ErrNotSupportedVersion error = &Error{Code: NotSupportedVersion}
	ErrNotImplemented      error = &Error{Code: NotImplemented}
	ErrUnauthorized        error = &Error{Code: Unauthorized}
	ErrInternal            error = &Error{Code: InternalError}
	ErrInvoker             error = &Error{Code: InvokerError}
	ErrInvalidRequest      error = &Error{Code: InvalidRequest}
	ErrDefenseRejected     error = &Error{Code: DefenseRejected}
	ErrPleaseReauth        error = &Error{Code: PleaseReauth}
	ErrSecurity            error = &Error{Code: SecurityError}
	ErrTimeout             error = &Error{Code: Timeout}
)

// ErrCanceled is what Future.Wait returns for a root that was canceled.
// It is not an *Error, so no error code a flow raises can match it.
var ErrCanceled = errors.New("stepvm: the flow was canceled")

// ErrLoopRunning is what Run returns when another goroutine's Run drives
// the loop: a loop has one driver at a time.
var ErrLoopRunning = errors.New("stepvm: the loop is already run by another goroutine")

// PanicError is the LastException of a flow whose user code panicked with
// a value that is not an *Error.
type PanicError struct{ Value any }

// Error returns "panic: " and the panic value as fmt prints it.
func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}
