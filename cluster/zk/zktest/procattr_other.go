//go:build !linux

package zktest

import "syscall"

// sysProcAttr: without Pdeathsig, only t.Cleanup stops the server; a test
// binary killed by a signal leaves it running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
