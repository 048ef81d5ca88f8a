package ctest

// #include "ctest.h"
import "C"

// Nop calls an empty C function: what a call into C costs.
func Nop() { C.ctest_nop() }

// Callback calls a C function that calls back into an empty Go function:
// what a call into C and one back into Go cost.
func Callback() { C.ctest_callback() }

//export ctestGoNop
func ctestGoNop() {}
