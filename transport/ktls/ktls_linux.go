//go:build linux

package ktls

import (
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux's socket option numbers (include/uapi/linux/tls.h).
const (
	solTLS = 282
	tlsTX  = 1
)

var detect struct {
	once sync.Once
	err  error
}

// Available reports whether the kernel accepts kTLS, trying TCP_ULP "tls"
// once on a loopback connection; the error says why not.
func Available() error {
	detect.once.Do(func() { detect.err = probe() })
	return detect.err
}

func probe() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("%w: probe listen: %v", ErrUnsupported, err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return fmt.Errorf("%w: probe dial: %v", ErrUnsupported, err)
	}
	defer c.Close()
	if s, err := l.Accept(); err == nil {
		defer s.Close()
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	return setULP(raw)
}

func setULP(raw syscall.RawConn) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.SOL_TCP, unix.TCP_ULP, "tls")
	}); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if serr != nil {
		return fmt.Errorf("%w: setsockopt(TCP_ULP, \"tls\"): %v (kernel without the tls module)", ErrUnsupported, serr)
	}
	return nil
}

// EnableTX installs k as the socket's transmit keys, the next record
// numbered seq: from then on what is written to the socket (write or
// sendfile) is sent as TLS 1.3 application data records.
func EnableTX(raw syscall.RawConn, k Keys, seq uint64) error {
	info, err := CryptoInfo(k, seq)
	if err != nil {
		return err
	}
	return enableTX(raw, info)
}

// enableTX is setsockopt(TCP_ULP, "tls") then setsockopt(SOL_TLS, TLS_TX,
// info).
func enableTX(raw syscall.RawConn, info []byte) error {
	if err := setULP(raw); err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), solTLS, tlsTX, string(info))
	}); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if serr != nil {
		return fmt.Errorf("%w: setsockopt(SOL_TLS, TLS_TX): %v", ErrUnsupported, serr)
	}
	return nil
}
