//go:build !linux

package checkpoint

// physicalMemory returns the machine's RAM in bytes (0: unknown).
func physicalMemory() int64 { return 0 }
