package ktls_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/ktls/ktlstest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// A client KeyUpdate asking for the server's (update_requested) would make
// crypto/tls write a record numbered as if the kernel had sent nothing:
// the write is refused and the connection closed, so the client sees the
// end of the stream, never a record that does not decrypt.
func TestKeyUpdateClosesConnection(t *testing.T) {
	ca := tlstest.NewCA(t, "ktls CA")
	pair := ca.Issue("srv", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		readErr error
		refused bool
	}
	done := make(chan result, 1)
	switched := make(chan error, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			switched <- err
			return
		}
		c := ktls.Server(nc, ktls.ServerConfig(&tls.Config{Certificates: []tls.Certificate{cert}}))
		defer c.Close()
		if err := c.HandshakeContext(context.Background()); err != nil {
			switched <- err
			return
		}
		if err := c.EnableTX(&ktlstest.Kernel{}); err != nil {
			switched <- err
			return
		}
		_, err = c.Write([]byte("hello"))
		switched <- err
		_, err = c.Read(make([]byte, 1))
		done <- result{err, c.Refused()}
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var klog ktls.KeyLog
	cc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, KeyLogWriter: &klog, MinVersion: tls.VersionTLS13})
	defer cc.Close()
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-switched; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(cc, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	st := cc.ConnectionState()
	if st.CipherSuite != tls.TLS_AES_128_GCM_SHA256 && st.CipherSuite != tls.TLS_AES_256_GCM_SHA384 {
		t.Skipf("suite %s: the test encrypts with AES-GCM only", tls.CipherSuiteName(st.CipherSuite))
	}
	secrets, ok := klog.TakeAny()
	if !ok || secrets.Client == nil {
		t.Fatal("no client traffic secret logged")
	}
	keys, err := ktls.TrafficKeys(st.CipherSuite, secrets.Client)
	if err != nil {
		t.Fatal(err)
	}
	// KeyUpdate (type 24, length 1, update_requested), then the inner
	// content type (handshake), as the client's first application record.
	inner := []byte{24, 0, 0, 1, 1, 22}
	block, _ := aes.NewCipher(keys.Key)
	aead, _ := cipher.NewGCM(block)
	n := len(inner) + aead.Overhead()
	hdr := []byte{23, 3, 3, byte(n >> 8), byte(n)}
	rec := aead.Seal(append([]byte(nil), hdr...), ktls.Nonce(keys.IV, 0), inner, hdr)
	if _, err := raw.Write(rec); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !r.refused || r.readErr == nil {
		t.Fatalf("server: refused %v, read error %v", r.refused, r.readErr)
	}
	_, err = cc.Read(make([]byte, 1))
	if err == nil || (!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset")) {
		t.Fatalf("client read after the KeyUpdate: %v, want the end of the stream", err)
	}
	t.Logf("server read: %v; client read: %v", r.readErr, err)
}
