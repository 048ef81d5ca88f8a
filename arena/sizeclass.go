package arena

import "math/bits"

// Chunk and size-class geometry. Every size here is a power of two or a
// multiple of align (16), so every block handed out is 16-byte aligned.
const (
	align      = 16           // alignment of every block
	firstChunk = 256          // size of an arena's first chunk: a waiting flow costs little
	maxChunk   = 64 << 10     // bump chunks double up to this size
	maxClass   = maxChunk / 4 // largest class size; larger blocks get a dedicated chunk

	// FixedSize is the size of an arena's fixed block; see [Arena.Fixed].
	FixedSize = 64

	// KeepBytes bounds the chunk memory that [Arena.Reset] keeps for reuse.
	KeepBytes = 4 << 10
)

// Size classes: multiples of 16 up to 256 (classes 0-15), then powers of two
// up to maxClass (classes 16-21).
const (
	smallClasses = 256 / align
	numClasses   = smallClasses + 6 // 512, 1 Ki, 2 Ki, 4 Ki, 8 Ki, 16 Ki

	// inlineHeads is the number of classes, from the smallest, whose
	// free-list heads an Arena holds inline: blocks up to 64 bytes.
	inlineHeads = 4
)

// classSize[c] is the size of the blocks of class c.
var classSize = func() (s [numClasses]uintptr) {
	for c := range s {
		if c < smallClasses {
			s[c] = uintptr(c+1) * align
		} else {
			s[c] = 512 << (c - smallClasses)
		}
	}
	return s
}()

// BlockSize returns the size of the block Alloc hands out for size bytes,
// 1 <= size <= 16 KiB (larger ones get a chunk of their own).
func BlockSize(size uintptr) uintptr { return classSize[classOf(size)] }

// classOf returns the class of a block of 1 <= size <= maxClass bytes.
// It is branch-light and table-free because it sits on the hot path.
func classOf(size uintptr) int {
	if size <= 256 {
		return int((size - 1) / align)
	}
	return smallClasses + bits.Len(uint(size-1)) - 9
}

// roundPow2 returns the smallest power of two >= n, for 1 <= n <= 1<<62.
func roundPow2(n uintptr) uintptr {
	return 1 << bits.Len(uint(n-1))
}
