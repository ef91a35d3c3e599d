//go:build !amd64 && !arm64

package prefetch

import "unsafe"

// lines does nothing: no prefetch instruction is written for this
// platform.
func lines(p unsafe.Pointer, size uintptr) {}
