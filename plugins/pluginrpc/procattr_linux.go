package pluginrpc

import "syscall"

// sysProcAttr asks the kernel to SIGKILL the plugin when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
