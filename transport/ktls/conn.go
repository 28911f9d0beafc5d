package ktls

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// ErrWriteAfterSwitch: crypto/tls tried to write on a connection whose
// writes the kernel has taken over (a KeyUpdate the client asked to be
// answered, an alert). Its record would reuse a sequence number the kernel
// numbers, so it is refused and the connection closed instead.
var ErrWriteAfterSwitch = errors.New("ktls: crypto/tls wrote after the kernel took over the connection's writes (a KeyUpdate asking for an update, or an alert); closing")

// ServerConfig returns a copy of base for the server side of connections
// that may switch to kTLS (Server): each handshake's TLS 1.3 traffic
// secrets go to its own connection through KeyLogWriter (set on the
// config GetConfigForClient returns, base's own GetConfigForClient, such
// as a certificate reloader's, still deciding the rest). Session tickets
// stay on: the records they take are counted (see Conn.EnableTX).
func ServerConfig(base *tls.Config) *tls.Config {
	cfg := base.Clone()
	inner := base.GetConfigForClient
	cfg.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		c := base
		if inner != nil {
			got, err := inner(hi)
			if err != nil {
				return nil, err
			}
			if got != nil {
				c = got
			}
		}
		rec, ok := hi.Conn.(*recorder)
		if !ok {
			return c, nil
		}
		c = c.Clone()
		c.GetConfigForClient = nil
		if prev := c.KeyLogWriter; prev != nil {
			c.KeyLogWriter = teeWriter{keyLogWriter{rec}, prev}
		} else {
			c.KeyLogWriter = keyLogWriter{rec}
		}
		return c, nil
	}
	return cfg
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	return t.b.Write(p)
}

// recorder sits between crypto/tls and the socket: during the handshake
// it keeps what the server writes (to count the records sent with the
// application keys) and the traffic secrets (KeyLogWriter); once sealed it
// refuses every write of crypto/tls and closes the socket.
type recorder struct {
	net.Conn
	mu      sync.Mutex
	out     []byte // server bytes written during the handshake
	stopped bool   // the handshake returned: out is complete
	keylog  KeyLog
	sealed  bool
	refused atomic.Bool
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	if r.sealed {
		r.mu.Unlock()
		r.refused.Store(true)
		r.Conn.Close()
		return 0, ErrWriteAfterSwitch
	}
	if !r.stopped {
		r.out = append(r.out, p...)
	}
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// keyLogWriter: the KeyLogWriter of the connection (a distinct type, so
// that Write above stays the socket's).
type keyLogWriter struct{ r *recorder }

func (k keyLogWriter) Write(p []byte) (int, error) { return k.r.keylog.Write(p) }

// Conn is the server side of a TLS connection that can hand its writes to
// the kernel: it reads through crypto/tls always, and writes through
// crypto/tls until EnableTX succeeds, then as plaintext to the socket,
// which the kernel frames and encrypts. Its tls.Config must come from
// ServerConfig.
type Conn struct {
	tc  *tls.Conn
	rec *recorder
	raw net.Conn

	mu     sync.Mutex
	kernel net.Conn // set once by EnableTX; nil: crypto/tls writes
	closed bool
}

// Server wraps raw, an accepted connection, as crypto/tls's server side
// with cfg (from ServerConfig).
func Server(raw net.Conn, cfg *tls.Config) *Conn {
	rec := &recorder{Conn: raw}
	c := &Conn{rec: rec, raw: raw}
	c.tc = tls.Server(rec, cfg)
	return c
}

// TLS is the crypto/tls connection (state, handshake).
func (c *Conn) TLS() *tls.Conn { return c.tc }

// HandshakeContext runs the TLS handshake. Go's TLS 1.3 server sends its
// session tickets within the handshake, so what it wrote until then is
// all EnableTX needs to count.
func (c *Conn) HandshakeContext(ctx context.Context) error {
	err := c.tc.HandshakeContext(ctx)
	c.rec.mu.Lock()
	c.rec.stopped = true
	c.rec.mu.Unlock()
	return err
}

// ConnectionState is crypto/tls's.
func (c *Conn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// Read reads through crypto/tls (TLS_RX is not used).
func (c *Conn) Read(p []byte) (int, error) { return c.tc.Read(p) }

// Write writes through the kernel once EnableTX succeeded, else through
// crypto/tls. One goroutine at a time writes (the connection's serving
// goroutine), as for any net.Conn the transport writes responses to.
func (c *Conn) Write(p []byte) (int, error) {
	if k := c.kernelConn(); k != nil {
		return k.Write(p)
	}
	return c.tc.Write(p)
}

func (c *Conn) kernelConn() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kernel
}

// Kernel is the connection plaintext goes to once EnableTX succeeded
// (nil before): a socket (sendfile works on it) with the real kernel.
func (c *Conn) Kernel() net.Conn { return c.kernelConn() }

// Refused reports whether crypto/tls tried to write after the switch,
// which closed the connection (ErrWriteAfterSwitch).
func (c *Conn) Refused() bool { return c.rec.refused.Load() }

// Close closes the connection: through crypto/tls (close_notify) before
// the switch, the socket alone after it (close_notify would need a
// record that crypto/tls cannot number any more).
func (c *Conn) Close() error {
	c.mu.Lock()
	switched, closed := c.kernel != nil, c.closed
	c.closed = true
	c.mu.Unlock()
	if switched {
		if closed {
			return nil
		}
		return c.raw.Close()
	}
	return c.tc.Close()
}

func (c *Conn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.tc.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.tc.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// EnableTX switches the connection's writes to the kernel, after the
// handshake and before anything else is written: it derives the server's
// write key and IV from the TLS 1.3 traffic secret, counts the records
// crypto/tls has already sent with them (the session tickets TLS 1.3
// servers send with the handshake: each takes a sequence number; they are
// found by decrypting the handshake's records with the application keys,
// the first that opens being number 0), seals crypto/tls's writes, and
// hands key, IV and the next sequence number to ulp. On error nothing has
// changed (the connection keeps writing through crypto/tls), unless the
// error says the socket was left half set up (ErrUnsupported then too:
// the caller falls back or closes, as it must for any error).
func (c *Conn) EnableTX(ulp ULP) error {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	out, stopped := c.rec.out, c.rec.stopped
	c.rec.out = nil // whatever happens: the connection keeps no copy of its handshake
	st := c.tc.ConnectionState()
	if !st.HandshakeComplete || !stopped {
		return errors.New("ktls: EnableTX before the handshake returned")
	}
	if st.Version != tls.VersionTLS13 {
		return fmt.Errorf("%w: %s (kTLS is wired for TLS 1.3 only)", ErrUnsupported, tls.VersionName(st.Version))
	}
	secrets, ok := c.rec.keylog.TakeAny()
	if !ok {
		return errors.New("ktls: no traffic secret logged for the connection (tls.Config not from ServerConfig?)")
	}
	keys, err := TrafficKeys(st.CipherSuite, secrets.Server)
	if err != nil {
		return err
	}
	seq, err := countAppRecords(keys, out)
	if err != nil {
		return err
	}
	info, err := CryptoInfo(keys, seq)
	if err != nil {
		return err
	}
	k, err := ulp.EnableTX(c.raw, info)
	if err != nil {
		return err
	}
	c.rec.sealed = true
	c.mu.Lock()
	c.kernel = k
	c.mu.Unlock()
	return nil
}

// newAEAD is the suite's record cipher.
func newAEAD(k Keys) (cipher.AEAD, error) {
	switch k.Suite {
	case tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384:
		b, err := aes.NewCipher(k.Key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return chacha20poly1305.New(k.Key)
	}
	return nil, fmt.Errorf("%w: cipher suite %s", ErrUnsupported, tls.CipherSuiteName(k.Suite))
}

// Nonce is a TLS 1.3 record's nonce: the IV with the sequence number
// XORed into its last 8 bytes (RFC 8446 5.3).
func Nonce(iv []byte, seq uint64) []byte {
	n := append([]byte(nil), iv...)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		n[len(n)-8+i] ^= s[i]
	}
	return n
}

// countAppRecords counts the records of out (what the server wrote during
// the handshake) protected with k: they follow the handshake's, numbered
// from 0. A record after them that does not open means the count is wrong.
func countAppRecords(k Keys, out []byte) (uint64, error) {
	aead, err := newAEAD(k)
	if err != nil {
		return 0, err
	}
	var seq uint64
	found := false
	for len(out) >= 5 {
		n := int(binary.BigEndian.Uint16(out[3:5]))
		if len(out) < 5+n {
			return 0, fmt.Errorf("ktls: handshake output ends in the middle of a record")
		}
		hdr, body := out[:5], out[5:5+n]
		out = out[5+n:]
		if hdr[0] != 23 { // ServerHello, ChangeCipherSpec: in the clear
			continue
		}
		_, err := aead.Open(nil, Nonce(k.IV, seq), body, hdr)
		switch {
		case err == nil:
			found = true
			seq++
		case found:
			return 0, fmt.Errorf("ktls: record %d after the session tickets does not open with the application keys", seq)
		}
	}
	if len(out) != 0 {
		return 0, fmt.Errorf("ktls: handshake output ends in the middle of a record header")
	}
	return seq, nil
}

// SendfileConn is the socket of a connection whose writes the kernel
// encrypts, for sendfile(2): ok is false when the ULP is not the kernel's
// (an emulation) or there is no socket.
func (c *Conn) SendfileConn() (syscall.RawConn, bool) {
	sc, ok := c.kernelConn().(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}
