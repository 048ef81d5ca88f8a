//go:build cgo && !race

package ffi_test

const raceEnabled = false
