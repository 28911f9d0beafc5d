//go:build !linux

package zkserver

import "syscall"

// sysProcAttr: without Pdeathsig, only Stop ends an attached server; this
// process killed by a signal leaves it running.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return nil
}
