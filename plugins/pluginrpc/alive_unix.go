//go:build unix

package pluginrpc

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process pid exists (signal 0 checks
// without sending; EPERM means it exists but is not ours).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
