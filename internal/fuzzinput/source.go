package fuzzinput

import (
	"encoding/binary"
	"hash/fnv"
)

// Source is a random source for model tests run as fuzz targets: it deals
// out its input, eight bytes (zero-padded at the end) per number, and then
// the numbers of a generator seeded from the whole input. A fuzzer's
// mutations of the input change the first choices drawn from it, and a
// short input still makes as long a run as the test asks for. It is both
// a math/rand.Source and a math/rand/v2.Source.
type Source struct {
	in   []byte
	rest uint64 // splitmix64 state
}

// NewSource returns a Source on in.
func NewSource(in []byte) *Source {
	h := fnv.New64a()
	h.Write(in)
	return &Source{in: in, rest: h.Sum64()}
}

// Uint64 returns the next number.
func (s *Source) Uint64() uint64 {
	if len(s.in) > 0 {
		var b [8]byte
		s.in = s.in[copy(b[:], s.in):]
		return binary.LittleEndian.Uint64(b[:])
	}
	s.rest += 0x9e3779b97f4a7c15
	z := s.rest
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Int63 returns the next number without its top bit (math/rand.Source).
func (s *Source) Int63() int64 { return int64(s.Uint64() >> 1) }

// Seed does nothing: the input is the seed (math/rand.Source).
func (s *Source) Seed(int64) {}

// Bytes deals out a fuzz input a byte at a time, for targets whose every
// choice is a small number.
type Bytes struct{ in []byte }

// NewBytes returns Bytes on in.
func NewBytes(in []byte) *Bytes { return &Bytes{in: in} }

// Next returns the next byte, 0 once the input has run out.
func (b *Bytes) Next() int {
	if len(b.in) == 0 {
		return 0
	}
	c := b.in[0]
	b.in = b.in[1:]
	return int(c)
}

// Left reports whether bytes remain.
func (b *Bytes) Left() bool { return len(b.in) > 0 }
