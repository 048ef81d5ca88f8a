//go:build cgo

package ffi

// ForeignLive returns how many Go objects the table of ids foreign engines
// refer to holds.
func ForeignLive() int { return fxLive() }
