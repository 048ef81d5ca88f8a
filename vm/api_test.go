package vm_test

import (
	"context"
	"time"
	"unsafe"

	"github.com/stepvm/stepvm/vm"
)

// The public API is a contract: code outside this repository compiles
// against these exact names and signatures. This file fails to compile if
// one of them changes.
var (
	_ func(...vm.LoopOption) *vm.Loop                 = vm.NewLoop
	_ func(vm.Clock) vm.LoopOption                    = vm.WithClock
	_ func(time.Time) *vm.ManualClock                 = vm.NewManualClock
	_ func(*vm.ManualClock, time.Duration)            = (*vm.ManualClock).Advance
	_ vm.Clock                                        = (*vm.ManualClock)(nil)
	_ func(*vm.Loop, func()) vm.Handle                = (*vm.Loop).Immediate
	_ func(*vm.Loop, time.Duration, func()) vm.Handle = (*vm.Loop).Deferred
	_ func(*vm.Loop, vm.Handle)                       = (*vm.Loop).Cancel
	_ func(*vm.Loop, vm.Handle) bool                  = (*vm.Loop).IsValid
	_ func(*vm.Loop) bool                             = (*vm.Loop).IsSameThread
	_ func(*vm.Loop, func()) bool                     = (*vm.Loop).Post
	_ func(*vm.Loop) (bool, time.Duration)            = (*vm.Loop).Iterate
	_ func(*vm.Loop)                                  = (*vm.Loop).RunUntilIdle
	_ func(*vm.Loop, context.Context) error           = (*vm.Loop).Run
	_ func(*vm.Loop)                                  = (*vm.Loop).Close
	_ func(*vm.Loop) vm.AsyncSteps                    = (*vm.Loop).NewSteps
	_ func(*vm.Loop, vm.ExecFunc, ...vm.ErrorFunc)    = (*vm.Loop).Spawn

	_ func(vm.AsyncSteps)                                                                         = vm.AsyncSteps.Release
	_ func(vm.AsyncSteps, vm.ExecFunc, ...vm.ErrorFunc) vm.AsyncSteps                             = vm.AsyncSteps.Add
	_ func(vm.AsyncSteps, ...vm.ErrorFunc) vm.AsyncSteps                                          = vm.AsyncSteps.Parallel
	_ func(vm.AsyncSteps) *vm.State                                                               = vm.AsyncSteps.State
	_ func(vm.AsyncSteps, vm.AsyncSteps) vm.AsyncSteps                                            = vm.AsyncSteps.CopyFrom
	_ func(vm.AsyncSteps) vm.AsyncSteps                                                           = vm.AsyncSteps.Clone
	_ func(vm.AsyncSteps, vm.ISync, vm.ExecFunc, ...vm.ErrorFunc) vm.AsyncSteps                   = vm.AsyncSteps.Sync
	_ func(vm.AsyncSteps, ...vm.Value) vm.AsyncSteps                                              = vm.AsyncSteps.SuccessStep
	_ func(vm.AsyncSteps, func(context.Context) (vm.Value, error), ...vm.ErrorFunc) vm.AsyncSteps = vm.AsyncSteps.Await
	_ func(vm.AsyncSteps) vm.AsyncSteps                                                           = vm.AsyncSteps.NewInstance
	_ func(vm.AsyncSteps) bool                                                                    = vm.AsyncSteps.Valid
	_ func(vm.AsyncSteps) *vm.Loop                                                                = vm.AsyncSteps.Tool
	_ func(vm.AsyncSteps, ...vm.Value)                                                            = vm.AsyncSteps.Success
	_ func(vm.AsyncSteps, string, ...string)                                                      = vm.AsyncSteps.Error
	_ func(vm.AsyncSteps, time.Duration)                                                          = vm.AsyncSteps.SetTimeout
	_ func(vm.AsyncSteps, vm.CancelFunc)                                                          = vm.AsyncSteps.SetCancel
	_ func(vm.AsyncSteps)                                                                         = vm.AsyncSteps.WaitExternal
	_ func(vm.AsyncSteps) vm.Resumer                                                              = vm.AsyncSteps.Resumer
	_ func(vm.Resumer, ...vm.Value) bool                                                          = vm.Resumer.Success
	_ func(vm.Resumer, string, string) bool                                                       = vm.Resumer.Error
	_ func(vm.AsyncSteps, func(vm.AsyncSteps), ...string)                                         = vm.AsyncSteps.Loop
	_ func(vm.AsyncSteps, func(vm.AsyncSteps), ...string)                                         = vm.AsyncSteps.MakeLoop
	_ func(vm.AsyncSteps, int, func(vm.AsyncSteps, int), ...string)                               = vm.AsyncSteps.Repeat
	_ func(vm.AsyncSteps, []int, func(vm.AsyncSteps, int, int), ...string)                        = vm.ForEach[int]
	_ func(vm.AsyncSteps, map[string]int, func(vm.AsyncSteps, string, int), ...string)            = vm.ForEachMap[string, int]
	_ func(vm.AsyncSteps, ...string)                                                              = vm.AsyncSteps.Break
	_ func(vm.AsyncSteps, ...string)                                                              = vm.AsyncSteps.Continue
	_ func(vm.AsyncSteps)                                                                         = vm.AsyncSteps.Execute
	_ func(vm.AsyncSteps)                                                                         = vm.AsyncSteps.Cancel
	_ func(vm.AsyncSteps) *vm.Future                                                              = vm.AsyncSteps.Promise
	_ func(*vm.Future, context.Context) (vm.Args, error)                                          = (*vm.Future).Wait
	_ func(*vm.Future) <-chan struct{}                                                            = (*vm.Future).Done
	_ func(vm.AsyncSteps) *int                                                                    = vm.Stack[int]
	_ func(vm.AsyncSteps, int, func(unsafe.Pointer)) unsafe.Pointer                               = vm.AsyncSteps.StackRaw

	_ func(int64) vm.Value                = vm.Int
	_ func(uint64) vm.Value               = vm.Uint
	_ func(float64) vm.Value              = vm.Float
	_ func(bool) vm.Value                 = vm.Bool
	_ func(string) vm.Value               = vm.Str
	_ func([]byte) vm.Value               = vm.Bytes
	_ func(any) vm.Value                  = vm.Any
	_ func(vm.Args) int                   = vm.Args.Len
	_ func(vm.Args, int) vm.Value         = vm.Args.Get
	_ func(vm.Args, int) int64            = vm.Args.Int
	_ func(vm.Args, int) uint64           = vm.Args.Uint
	_ func(vm.Args, int) float64          = vm.Args.Float
	_ func(vm.Args, int) bool             = vm.Args.Bool
	_ func(vm.Args, int) string           = vm.Args.String
	_ func(vm.Args, int) []byte           = vm.Args.BytesAt
	_ func(vm.Args, int) any              = vm.Args.Any
	_ func(vm.Value) vm.Kind              = vm.Value.Kind
	_ func(vm.Value) int64                = vm.Value.Int
	_ func(vm.Value) uint64               = vm.Value.Uint
	_ func(vm.Value) float64              = vm.Value.Float
	_ func(vm.Value) bool                 = vm.Value.Bool
	_ func(vm.Value) string               = vm.Value.String
	_ func(vm.Value) []byte               = vm.Value.Bytes
	_ func(vm.Value) any                  = vm.Value.Any
	_ func(*vm.State, string) (any, bool) = (*vm.State).Get
	_ func(*vm.State, string, any)        = (*vm.State).Set
	_ func(*vm.State, string) bool        = (*vm.State).Exists
	_ func(*vm.State, string)             = (*vm.State).Unset
	_ func(*vm.State) string              = (*vm.State).ErrorInfo
	_ func(*vm.State) error               = (*vm.State).LastException
	_ func(*vm.State) []uintptr           = (*vm.State).AsyncStack
	_ error                               = &vm.Error{Code: vm.Timeout, Info: ""}
	_                                     = []error{vm.ErrTimeout, vm.ErrInternal, vm.ErrDefenseRejected, vm.ErrCanceled}

	_ vm.ISync                                             = (*vm.Mutex)(nil)
	_ vm.ISync                                             = (*vm.Throttle)(nil)
	_ vm.ISync                                             = (*vm.Limiter)(nil)
	_ func(int, int) *vm.Mutex                             = vm.NewMutex
	_ func(*vm.Loop, int, time.Duration, int) *vm.Throttle = vm.NewThrottle
	_ func(*vm.Loop, vm.LimiterOptions) *vm.Limiter        = vm.NewLimiter
	_                                                      = vm.LimiterOptions{Concurrent: 1, MaxQueue: vm.Unbounded, Rate: 1, Period: time.Second, Burst: 0}
	_                                                      = [...]string{vm.Timeout, vm.InternalError, vm.DefenseRejected}
)
