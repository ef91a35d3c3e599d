package checkpoint

import "syscall"

// physicalMemory returns the machine's RAM in bytes (0: unknown).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
