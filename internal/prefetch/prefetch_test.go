package prefetch

import (
	"testing"
	"unsafe"
)

// TestRange asks for ranges of every alignment and length up to a few
// lines, at the start and the end of an array, and for nothing: Range
// must return (a loop bound off by a line in the assembly would run on
// past the range, over the whole address space) and change nothing.
func TestRange(t *testing.T) {
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := 0; off < 130; off++ {
		for size := 0; off+size <= len(buf) && size < 300; size++ {
			Range(unsafe.Pointer(&buf[off]), uintptr(size))
		}
	}
	Range(nil, 0)
	Range(nil, 64) // a prefetch of an unmapped address does not fault
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
}
