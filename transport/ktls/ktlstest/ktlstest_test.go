package ktlstest_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/ktls/ktlstest"
)

// For every cipher the kernel takes, what the emulation sends with a
// crypto info struct opens as TLS 1.3 records (RFC 8446 5.2: header as
// additional data, nonce the IV XOR the sequence number, inner content
// type 23) with the keys the struct was made from, numbered from its
// rec_seq; a write larger than a record spans several.
func TestEmulatedRecords(t *testing.T) {
	for _, suite := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		secret := make([]byte, 48)
		rand.Read(secret)
		keys, err := ktls.TrafficKeys(suite, secret)
		if err != nil {
			t.Fatal(err)
		}
		const seq = 7
		info, err := ktls.CryptoInfo(keys, seq)
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		k := &ktlstest.Kernel{}
		c, err := k.EnableTX(a, info)
		if err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 40000) // 3 records
		rand.Read(payload)
		go func() {
			c.Write(payload)
			a.Close()
		}()
		wire, err := io.ReadAll(b)
		if err != nil {
			t.Fatal(err)
		}
		var aead cipher.AEAD
		if suite == tls.TLS_CHACHA20_POLY1305_SHA256 {
			aead, _ = chacha20poly1305.New(keys.Key)
		} else {
			blk, _ := aes.NewCipher(keys.Key)
			aead, _ = cipher.NewGCM(blk)
		}
		var got []byte
		records := 0
		for len(wire) > 0 {
			n := int(binary.BigEndian.Uint16(wire[3:5]))
			hdr, body := wire[:5], wire[5:5+n]
			wire = wire[5+n:]
			plain, err := aead.Open(nil, ktls.Nonce(keys.IV, uint64(seq+records)), body, hdr)
			if err != nil {
				t.Fatalf("%s: record %d: %v", tls.CipherSuiteName(suite), records, err)
			}
			if plain[len(plain)-1] != 23 {
				t.Fatalf("%s: inner content type %d", tls.CipherSuiteName(suite), plain[len(plain)-1])
			}
			got = append(got, plain[:len(plain)-1]...)
			records++
		}
		if !bytes.Equal(got, payload) || records != 3 {
			t.Errorf("%s: %d records, payload equal %v", tls.CipherSuiteName(suite), records, bytes.Equal(got, payload))
		}
	}
}
