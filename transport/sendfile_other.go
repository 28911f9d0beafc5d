//go:build !linux

package transport

import (
	"errors"
	"os"
	"syscall"
)

// sendfileSupported: elsewhere than Linux, Fetch always takes the copy path.
const sendfileSupported = false

func sendfile(syscall.RawConn, *os.File, int64, int64) error {
	return errors.New("transport: sendfile is only used on Linux")
}

func setCork(syscall.RawConn, bool) {}
