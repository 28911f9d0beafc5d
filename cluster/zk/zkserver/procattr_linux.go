package zkserver

import "syscall"

// sysProcAttr: a detached server gets its own session (no terminal's
// Ctrl-C reaches it, and it outlives this process); otherwise the kernel
// SIGKILLs it if the forking thread (and so this process) dies, and it is
// in a process group of its own, so a terminal's Ctrl-C reaches only this
// process, which then stops its brokers before their ZooKeeper.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
