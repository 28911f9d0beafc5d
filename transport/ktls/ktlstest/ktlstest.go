// Package ktlstest emulates the kernel's TLS ULP for tests, on kernels
// without one: Kernel implements ktls.ULP by parsing the crypto info
// struct exactly as setsockopt(SOL_TLS, TLS_TX) would receive it and
// encrypting every later write into TLS 1.3 application data records with
// it, as the kernel's tls_sw does. It shares no code with package ktls's
// encoding: it reads the bytes back by the kernel's layout
// (include/uapi/linux/tls.h), so a wrong field order, length or byte
// order there shows up as records a crypto/tls client cannot open.
package ktlstest

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
)

// The kernel's constants (include/uapi/linux/tls.h).
const (
	TLS13Version       = 0x0304
	CipherAESGCM128    = 51
	CipherAESGCM256    = 52
	CipherChaCha20Poly = 54
)

// maxPlaintext is a TLS record's largest plaintext (RFC 8446 5.1).
const maxPlaintext = 16384

// Info is a struct tls12_crypto_info_* read back.
type Info struct {
	Version, Cipher uint16
	IV, Key, Salt   []byte
	RecSeq          uint64
}

// ParseInfo reads setsockopt(SOL_TLS, TLS_TX)'s struct: u16 version, u16
// cipher_type (host order: little endian), then per cipher iv[8] key[16]
// salt[4] rec_seq[8] (AES-128-GCM), iv[8] key[32] salt[4] rec_seq[8]
// (AES-256-GCM), iv[12] key[32] rec_seq[8] (ChaCha20-Poly1305). The
// kernel takes exactly sizeof the struct.
func ParseInfo(b []byte) (Info, error) {
	if len(b) < 4 {
		return Info{}, fmt.Errorf("crypto info of %d bytes", len(b))
	}
	in := Info{Version: binary.LittleEndian.Uint16(b), Cipher: binary.LittleEndian.Uint16(b[2:])}
	if in.Version != TLS13Version {
		return Info{}, fmt.Errorf("version %#04x, want TLS 1.3", in.Version)
	}
	var ivLen, keyLen, saltLen int
	switch in.Cipher {
	case CipherAESGCM128:
		ivLen, keyLen, saltLen = 8, 16, 4
	case CipherAESGCM256:
		ivLen, keyLen, saltLen = 8, 32, 4
	case CipherChaCha20Poly:
		ivLen, keyLen, saltLen = 12, 32, 0
	default:
		return Info{}, fmt.Errorf("cipher type %d", in.Cipher)
	}
	b = b[4:]
	if len(b) != ivLen+keyLen+saltLen+8 {
		return Info{}, fmt.Errorf("cipher %d: %d bytes after the header, want %d (EINVAL)", in.Cipher, len(b), ivLen+keyLen+saltLen+8)
	}
	in.IV, b = b[:ivLen], b[ivLen:]
	in.Key, b = b[:keyLen], b[keyLen:]
	in.Salt, b = b[:saltLen], b[saltLen:]
	in.RecSeq = binary.BigEndian.Uint64(b)
	return in, nil
}

// Kernel emulates the tls ULP. The zero value works; its fields change
// what it does, for tests of the fallbacks.
type Kernel struct {
	// ProbeErr, when set, is what Probe says (a kernel without the ULP).
	ProbeErr error
	// EnableErr, when set, makes EnableTX fail (setsockopt refused); see
	// also RefuseFrom.
	EnableErr error
	// SeqSkew is added to the sequence number given (a wrong one, for the
	// self-test's mismatch).
	SeqSkew uint64

	mu     sync.Mutex
	infos  []Info
	refuse error
	sent   int64 // plaintext bytes encrypted, all connections
}

// Encrypted is the count of plaintext bytes the connections sent as
// records.
func (k *Kernel) Encrypted() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent
}

// RefuseFrom makes EnableTX fail with err from now on (a kernel refusing
// a connection's keys after the self-test passed).
func (k *Kernel) RefuseFrom(err error) {
	k.mu.Lock()
	k.refuse = err
	k.mu.Unlock()
}

// Probe is ProbeErr.
func (k *Kernel) Probe() error { return k.ProbeErr }

// Infos are the crypto infos EnableTX received, in order.
func (k *Kernel) Infos() []Info {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Info(nil), k.infos...)
}

// EnableTX parses info and returns c wrapped: its writes leave as TLS 1.3
// records protected with info's keys, numbered from its rec_seq.
func (k *Kernel) EnableTX(c net.Conn, info []byte) (net.Conn, error) {
	if k.EnableErr != nil {
		return nil, k.EnableErr
	}
	k.mu.Lock()
	refuse := k.refuse
	k.mu.Unlock()
	if refuse != nil {
		return nil, refuse
	}
	in, err := ParseInfo(info)
	if err != nil {
		return nil, fmt.Errorf("emulated setsockopt(SOL_TLS, TLS_TX): %w", err)
	}
	k.mu.Lock()
	k.infos = append(k.infos, in)
	k.mu.Unlock()
	var aead cipher.AEAD
	var nonce []byte
	if in.Cipher == CipherChaCha20Poly {
		aead, err = chacha20poly1305.New(in.Key)
		nonce = append(nonce, in.IV...)
	} else {
		var b cipher.Block
		if b, err = aes.NewCipher(in.Key); err == nil {
			aead, err = cipher.NewGCM(b)
		}
		nonce = append(append(nonce, in.Salt...), in.IV...)
	}
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c, k: k, aead: aead, iv: nonce, seq: in.RecSeq + k.SeqSkew}, nil
}

// Conn is a socket with TLS_TX set: plaintext written is sent as records.
// It is not a syscall.Conn: sendfile goes around an emulation, so the
// transport writes through it.
type Conn struct {
	net.Conn
	k    *Kernel
	aead cipher.AEAD
	iv   []byte
	mu   sync.Mutex
	seq  uint64
	buf  []byte
	// Records counts the records sent.
	Records int
}

// ErrClosed: written after Close.
var ErrClosed = errors.New("ktlstest: closed")

// Write sends p as application data records of at most 16 KiB each.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	done := 0
	for done < len(p) {
		chunk := p[done:min(len(p), done+maxPlaintext)]
		nonce := append([]byte(nil), c.iv...)
		for i := range 8 {
			nonce[len(nonce)-8+i] ^= byte(c.seq >> (56 - 8*i))
		}
		n := len(chunk) + 1 + c.aead.Overhead()
		hdr := [5]byte{23, 3, 3, byte(n >> 8), byte(n)}
		inner := append(append(make([]byte, 0, len(chunk)+1), chunk...), 23)
		rec := c.aead.Seal(append(c.buf[:0], hdr[:]...), nonce, inner, hdr[:])
		c.buf = rec
		if _, err := c.Conn.Write(rec); err != nil {
			return done, err
		}
		c.seq++
		c.Records++
		done += len(chunk)
		c.k.mu.Lock()
		c.k.sent += int64(len(chunk))
		c.k.mu.Unlock()
	}
	return done, nil
}
