//go:build !linux

package s3test

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: a test process
// that dies without running its cleanups leaves its server running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
