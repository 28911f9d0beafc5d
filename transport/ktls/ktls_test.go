package ktls_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// Available answers, and says why not when the kernel refuses.
func TestAvailable(t *testing.T) {
	err := ktls.Available()
	ulp, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp")
	t.Logf("tcp_available_ulp %q: Available() = %v", strings.TrimSpace(string(ulp)), err)
	if err != nil && (!errors.Is(err, ktls.ErrUnsupported) || !strings.Contains(err.Error(), "TCP_ULP")) {
		t.Errorf("Available: %v, want ErrUnsupported naming TCP_ULP", err)
	}
	if err == nil && !strings.Contains(string(ulp), "tls") {
		t.Errorf("Available on a kernel whose tcp_available_ulp is %q", ulp)
	}
}

// recorder keeps what the server writes.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.out.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// The keys TrafficKeys derives from the secret KeyLog caught are the ones
// crypto/tls encrypts with: the first application record the server sends
// (sequence 0, session tickets off) decrypts with them. This is what
// EnableTX would hand the kernel.
func TestTrafficKeysDecryptServerRecord(t *testing.T) {
	ca := tlstest.NewCA(t, "ktls CA")
	pair := ca.Issue("srv", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var klog ktls.KeyLog
	scfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
		SessionTicketsDisabled: true, KeyLogWriter: &klog}
	a, b := net.Pipe()
	rec := &recorder{Conn: a}
	srv := tls.Server(rec, scfg)
	cli := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	done := make(chan error, 1)
	go func() {
		err := srv.Handshake()
		if err == nil {
			rec.mu.Lock()
			rec.out.Reset()
			rec.mu.Unlock()
			_, err = srv.Write([]byte("fetch bytes"))
		}
		done <- err
	}()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 11)
	if _, err := io.ReadFull(cli, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	suite := srv.ConnectionState().CipherSuite
	if klog.Len() != 1 {
		t.Fatalf("key log holds %d connections", klog.Len())
	}
	secrets, ok := klog.TakeAny()
	if !ok {
		t.Fatal("no server traffic secret logged")
	}
	keys, err := ktls.TrafficKeys(suite, secrets.Server)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	wire := rec.out.Bytes()
	rec.mu.Unlock()
	if len(wire) < 5 || wire[0] != 23 {
		t.Fatalf("server wrote %x, want an application data record", wire)
	}
	n := int(binary.BigEndian.Uint16(wire[3:5]))
	header, body := wire[:5], wire[5:5+n]
	nonce := bytes.Clone(keys.IV) // sequence 0: the IV itself
	var aead cipher.AEAD
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384:
		block, err := aes.NewCipher(keys.Key)
		if err != nil {
			t.Fatal(err)
		}
		aead, _ = cipher.NewGCM(block)
	default:
		t.Skipf("suite %s: the test decrypts AES-GCM only", tls.CipherSuiteName(suite))
	}
	plain, err := aead.Open(nil, nonce, body, header)
	if err != nil {
		t.Fatalf("decrypting with the derived keys: %v", err)
	}
	if want := "fetch bytes\x17"; string(plain) != want {
		t.Errorf("decrypted %q, want %q", plain, want)
	}
}
