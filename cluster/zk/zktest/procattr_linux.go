package zktest

import "syscall"

// sysProcAttr asks the kernel to SIGKILL the server if the forking thread
// (and so the test binary) dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
