//go:build linux

package ktls

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux's kTLS constants (include/uapi/linux/tls.h).
const (
	solTLS             = 282
	tlsTX              = 1
	tls13Version       = 0x0304
	cipherAESGCM128    = 51
	cipherAESGCM256    = 52
	cipherChaCha20Poly = 54
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

// cryptoInfo is struct tls12_crypto_info_<cipher>: version, cipher type,
// then iv (the nonce's last 8 bytes), key, salt (its first 4), rec_seq;
// ChaCha20-Poly1305 has a 12-byte iv and no salt.
func cryptoInfo(k Keys, seq uint64) ([]byte, error) {
	var cipher uint16
	switch k.Suite {
	case tls.TLS_AES_128_GCM_SHA256:
		cipher = cipherAESGCM128
	case tls.TLS_AES_256_GCM_SHA384:
		cipher = cipherAESGCM256
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		cipher = cipherChaCha20Poly
	default:
		return nil, fmt.Errorf("%w: cipher suite %s", ErrUnsupported, tls.CipherSuiteName(k.Suite))
	}
	b := binary.LittleEndian.AppendUint16(nil, tls13Version)
	b = binary.LittleEndian.AppendUint16(b, cipher)
	if cipher == cipherChaCha20Poly {
		b = append(b, k.IV...)
		b = append(b, k.Key...)
	} else {
		b = append(b, k.IV[4:]...)
		b = append(b, k.Key...)
		b = append(b, k.IV[:4]...)
	}
	return binary.BigEndian.AppendUint64(b, seq), nil
}

// EnableTX installs k as the socket's transmit keys, the next record
// numbered seq: from then on what is written to the socket (write or
// sendfile) is sent as TLS 1.3 application data records.
func EnableTX(raw syscall.RawConn, k Keys, seq uint64) error {
	info, err := cryptoInfo(k, seq)
	if err != nil {
		return err
	}
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
