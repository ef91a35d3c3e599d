package s3test

import "syscall"

// sysProcAttr makes the kernel kill the server when the test process dies
// without running its cleanups (a panic, or go test's -timeout), so no
// server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
