//go:build purego || (!amd64 && !arm64)

package prefetch

import "unsafe"

// lines does nothing: no prefetch instruction is written for this
// platform, or the build asked for no assembly (the purego tag).
func lines(p unsafe.Pointer, size uintptr) {}
