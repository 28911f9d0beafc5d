// Package ktls hands a TLS 1.3 connection's transmit keys to the Linux
// kernel (kTLS, TLS_TX), so that a TLS listener can keep sending Fetch
// record bytes from the page cache with sendfile: the kernel encrypts what
// sendfile passes through the socket. Kafka gives sendfile up on TLS
// connections; this is the way to keep it.
//
// How the keys get here: crypto/tls does not export traffic keys, but its
// Config.KeyLogWriter receives the TLS 1.3 traffic secrets in the NSS key
// log format ("SERVER_TRAFFIC_SECRET_0 <client random> <secret>").
// ServerConfig gives each handshake its own KeyLogWriter (through
// GetConfigForClient, whose ClientHelloInfo carries the connection), and
// Server wraps the accepted socket so that it also keeps what crypto/tls
// writes during the handshake. Conn.EnableTX then derives the record key
// and IV with HKDF-Expand-Label (RFC 8446 7.3, TrafficKeys), finds the
// record sequence number crypto/tls has reached (Go's TLS 1.3 server sends
// its NewSessionTicket messages within the handshake, with the application
// keys, one sequence number each: the handshake's records are opened with
// those keys and counted, so tickets, and resumption, stay on), and hands
// CryptoInfo's struct to the ULP: setsockopt(TCP_ULP, "tls"), then
// setsockopt(SOL_TLS, TLS_TX, tls12_crypto_info_*). From then on Conn's
// writes go as plaintext to the socket (write or sendfile), the kernel
// framing and encrypting them; reads stay in crypto/tls (TLS_RX is not
// used). crypto/tls must never write again: its next record would reuse a
// sequence number. Its writes are refused and the connection closed
// (ErrWriteAfterSwitch): a client KeyUpdate with update_requested (which
// crypto/tls answers) ends the connection and the client reconnects;
// Close sends no close_notify.
//
// The ULP interface is the seam: Kernel is the real one; package ktlstest
// emulates it in user space, parsing the struct back by the kernel's
// layout and encrypting writes into records with it, which is how the
// user-space half is tested on kernels without kTLS. SelfTest runs a
// loopback connection through a ULP (write and sendfile, decrypted by a
// crypto/tls client) before a listener trusts it.
//
// Availability: Available tries TCP_ULP "tls" on a loopback socket once and
// says why not when the kernel refuses (no tls module: ENOENT). The
// machines weir is developed on have no kTLS (their tcp_available_ulp
// lists only mptcp), so there the self-test fails, TLS listeners use the
// copy path and say so; the speed of the kTLS path has not been measured.
package ktls

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net"
	"syscall"
)

// ErrUnsupported: the kernel, the TLS version or the cipher suite does not
// allow kTLS.
var ErrUnsupported = errors.New("ktls: not supported")

// Keys are one direction's record protection keys.
type Keys struct {
	Suite uint16 // tls.TLS_AES_128_GCM_SHA256, ...
	Key   []byte
	IV    []byte // 12 bytes: the static part of the per-record nonce
}

// TrafficKeys derives the record key and IV of a TLS 1.3 traffic secret
// for suite (RFC 8446 7.3): key = HKDF-Expand-Label(secret, "key", "",
// key_length), iv = HKDF-Expand-Label(secret, "iv", "", 12).
func TrafficKeys(suite uint16, secret []byte) (Keys, error) {
	var h func() hash.Hash
	var keyLen int
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		h, keyLen = sha256.New, 16
	case tls.TLS_AES_256_GCM_SHA384:
		h, keyLen = sha512.New384, 32
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		h, keyLen = sha256.New, 32
	default:
		return Keys{}, fmt.Errorf("%w: cipher suite %s", ErrUnsupported, tls.CipherSuiteName(suite))
	}
	key, err := expandLabel(h, secret, "key", keyLen)
	if err != nil {
		return Keys{}, err
	}
	iv, err := expandLabel(h, secret, "iv", 12)
	if err != nil {
		return Keys{}, err
	}
	return Keys{Suite: suite, Key: key, IV: iv}, nil
}

// expandLabel is HKDF-Expand-Label with an empty context:
// struct { uint16 length; opaque label<7..255> = "tls13 " + label;
// opaque context<0..255>; }.
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := []byte{byte(n >> 8), byte(n), byte(len(full))}
	info = append(info, full...)
	info = append(info, 0) // empty context
	out, err := hkdf.Expand(h, secret, string(info), n)
	if err != nil {
		return nil, fmt.Errorf("ktls: HKDF-Expand-Label %q: %w", label, err)
	}
	return out, nil
}

// Linux's kTLS crypto info constants (include/uapi/linux/tls.h).
const (
	tls13Version       = 0x0304
	cipherAESGCM128    = 51
	cipherAESGCM256    = 52
	cipherChaCha20Poly = 54
)

// CryptoInfo is the struct tls12_crypto_info_<cipher> that
// setsockopt(SOL_TLS, TLS_TX) takes, in the machine's byte order (little
// endian on every machine weir runs on): version, cipher type, then iv
// (the nonce's last 8 bytes), key, salt (its first 4), rec_seq (big
// endian: the next record's sequence number); ChaCha20-Poly1305 has a
// 12-byte iv and no salt.
func CryptoInfo(k Keys, seq uint64) ([]byte, error) {
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
	if len(k.IV) != 12 {
		return nil, fmt.Errorf("%w: IV of %d bytes", ErrUnsupported, len(k.IV))
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

// ULP is the kernel's TLS upper layer protocol as a connection uses it:
// the seam between the user-space half (keys, sequence number, the switch
// of a connection's writes) and setsockopt. Kernel is the real one; tests
// use an emulation (package ktlstest) that encrypts in user space what the
// kernel would.
type ULP interface {
	// Probe reports whether the ULP can be used at all, and why not.
	Probe() error
	// EnableTX hands info (CryptoInfo's bytes, as setsockopt(SOL_TLS,
	// TLS_TX) takes them) to the socket under c and returns the
	// connection that plaintext is written to from then on: c itself for
	// the kernel, whose socket then frames and encrypts what write and
	// sendfile pass it.
	EnableTX(c net.Conn, info []byte) (net.Conn, error)
}

// Kernel is the running kernel's kTLS: Probe is Available, EnableTX
// setsockopt(TCP_ULP, "tls") then setsockopt(SOL_TLS, TLS_TX).
var Kernel ULP = kernel{}

type kernel struct{}

func (kernel) Probe() error { return Available() }

func (kernel) EnableTX(c net.Conn, info []byte) (net.Conn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a socket", ErrUnsupported, c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if err := enableTX(raw, info); err != nil {
		return nil, err
	}
	return c, nil
}
