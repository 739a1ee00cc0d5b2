package redistest

import "syscall"

// procAttr makes the kernel kill a server when the test process ends,
// even when it does not get to run its cleanups (a test binary that times
// out and panics), so that no server outlives the test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
