//go:build !linux

package ktls

import (
	"fmt"
	"runtime"
	"syscall"
)

// Available reports that kTLS is Linux only.
func Available() error {
	return fmt.Errorf("%w: kTLS is Linux only (GOOS %s)", ErrUnsupported, runtime.GOOS)
}

// EnableTX fails: kTLS is Linux only.
func EnableTX(syscall.RawConn, Keys, uint64) error { return Available() }

func enableTX(syscall.RawConn, []byte) error { return Available() }
