package transport

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// sendfileSupported: connections use sendfile(2) for Fetch record bytes.
const sendfileSupported = true

// sendfile sends n bytes of f from off to the connection with sendfile(2),
// passing the offset explicitly so the file's shared offset never moves, and
// letting the runtime poller wait whenever the socket buffer is full.
func sendfile(raw syscall.RawConn, f *os.File, off, n int64) error {
	fraw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: sendfile: %w", errClose, err)
	}
	var serr error
	cerr := fraw.Control(func(ffd uintptr) {
		werr := raw.Write(func(cfd uintptr) bool {
			for n > 0 {
				m, err := syscall.Sendfile(int(cfd), int(ffd), &off, int(min(n, 1<<30)))
				if m > 0 {
					n -= int64(m)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until writable
				case err == syscall.EINTR:
				case err != nil:
					serr = err
					return true
				case m == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the Slice
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil {
		return fmt.Errorf("%w: sendfile: %w", errClose, serr)
	}
	return nil
}

// setCork sets TCP_CORK, so the small writes between sendfiles leave as full
// packets; clearing it pushes out what is held. Errors (not TCP) are ignored:
// corking only saves packets.
func setCork(raw syscall.RawConn, on bool) {
	v := 0
	if on {
		v = 1
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	})
}
