//go:build !linux

package pluginrpc

import "syscall"

// sysProcAttr: without Pdeathsig, only Serve's parent watch ends an orphaned
// plugin.
func sysProcAttr() *syscall.SysProcAttr { return nil }
