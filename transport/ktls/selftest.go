package ktls

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"time"
)

// The reasons SelfTest gives, for errors.Is.
var (
	// ErrNoULP: the kernel has no tls ULP (TCP_ULP "tls" refused).
	ErrNoULP = errors.New("kernel has no tls ULP")
	// ErrRefused: the kernel refused TLS_TX for the cipher the self-test
	// negotiated, or the TLS version.
	ErrRefused = errors.New("cipher not supported")
	// ErrMismatch: a crypto/tls client did not read back what was sent.
	ErrMismatch = errors.New("self-test mismatch")
)

// selfTestTimeout bounds the self-test.
const selfTestTimeout = 5 * time.Second

// SelfTest checks that ulp really carries a connection's writes: a TLS
// 1.3 connection to itself on loopback (a throwaway self-signed
// certificate, session tickets on, so their sequence numbers are counted
// as on a listener's connections), the server side switched to ulp with
// EnableTX, a known payload sent with write and then from a file with
// io.Copy (sendfile(2) when the connection is a socket), read back by a
// crypto/tls client and compared. Nil means kTLS can be used; else the
// error says why not (ErrNoULP, ErrRefused, ErrMismatch).
func SelfTest(ulp ULP) error {
	if err := ulp.Probe(); err != nil {
		return fmt.Errorf("%w: %v", ErrNoULP, err)
	}
	cert, err := selfSigned()
	if err != nil {
		return fmt.Errorf("%w: certificate: %v", ErrMismatch, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("%w: listen: %v", ErrMismatch, err)
	}
	defer l.Close()
	written := make([]byte, 40<<10)
	filed := make([]byte, 70<<10)
	rand.Read(written)
	rand.Read(filed)
	f, err := os.CreateTemp("", "weir-ktls-selftest-")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(filed); err != nil {
		return fmt.Errorf("%w: %v", ErrMismatch, err)
	}

	deadline := time.Now().Add(selfTestTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- func() error {
			nc, err := l.Accept()
			if err != nil {
				return fmt.Errorf("%w: accept: %v", ErrMismatch, err)
			}
			_ = nc.SetDeadline(deadline)
			c := Server(nc, ServerConfig(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}))
			defer c.Close()
			if err := c.HandshakeContext(ctx); err != nil {
				return fmt.Errorf("%w: handshake: %v", ErrMismatch, err)
			}
			suite := tls.CipherSuiteName(c.ConnectionState().CipherSuite)
			if err := c.EnableTX(ulp); err != nil {
				return fmt.Errorf("%w: TLS_TX with %s: %v", ErrRefused, suite, err)
			}
			if _, err := c.Write(written); err != nil {
				return fmt.Errorf("%w: write with %s: %v", ErrMismatch, suite, err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("%w: %v", ErrMismatch, err)
			}
			// io.Copy to a *net.TCPConn from an *os.File is sendfile(2).
			if _, err := io.Copy(c.Kernel(), f); err != nil {
				return fmt.Errorf("%w: sendfile with %s: %v", ErrMismatch, suite, err)
			}
			// Wait for the client to have read everything before closing.
			_, _ = c.Read(make([]byte, 1))
			return nil
		}()
	}()

	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}}
	cc, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		l.Close()
		if serr := <-srvErr; serr != nil {
			return serr
		}
		return fmt.Errorf("%w: dial: %v", ErrMismatch, err)
	}
	_ = cc.SetDeadline(deadline)
	got := make([]byte, len(written)+len(filed))
	_, rerr := io.ReadFull(cc, got)
	cc.Close()
	if serr := <-srvErr; serr != nil {
		return serr
	}
	if rerr != nil {
		return fmt.Errorf("%w: the client read: %v", ErrMismatch, rerr)
	}
	if !bytes.Equal(got[:len(written)], written) || !bytes.Equal(got[len(written):], filed) {
		return fmt.Errorf("%w: the client read other bytes than were sent", ErrMismatch)
	}
	return nil
}

// selfSigned is a throwaway ECDSA certificate for the self-test.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir ktls self-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
