//go:build !linux

package redistest

import "syscall"

// procAttr returns nil: only Linux can tie a server's life to the test
// process's, so elsewhere a test binary that ends without running its
// cleanups leaves its servers running.
func procAttr() *syscall.SysProcAttr { return nil }
