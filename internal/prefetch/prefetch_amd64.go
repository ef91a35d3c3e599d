//go:build !purego

package prefetch

import "unsafe"

// lines issues PREFETCHT0 for each cache line of [p, p+size), size > 0.
//
//go:noescape
func lines(p unsafe.Pointer, size uintptr)
