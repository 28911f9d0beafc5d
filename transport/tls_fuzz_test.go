package transport

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The phases of FuzzTLSListener: where the fuzzed bytes go.
const (
	tlsFuzzBeforeHandshake = iota // raw bytes instead of a ClientHello
	tlsFuzzMidHandshake           // a real ClientHello, then raw bytes
	tlsFuzzInsideRecords          // a finished handshake, then raw bytes on the TCP stream (not valid TLS records)
	tlsFuzzAfterHandshake         // a finished handshake, then the bytes as application data (Kafka frames)
	tlsFuzzPhases
)

// tlsFuzzWait bounds how long one fuzzed connection may stay open after the
// client has sent everything and half-closed: the broker must close it
// (or answer and close) well within it.
const tlsFuzzWait = 10 * time.Second

// clientHello returns the first TLS record a Go client sends (its
// ClientHello) for cfg.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	cfg = cfg.Clone()
	cfg.ServerName = "localhost"
	go func() {
		_ = tls.Client(client, cfg).Handshake()
		client.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 5+int(binary.BigEndian.Uint16(hdr[3:])))
	copy(rec, hdr)
	if _, err := io.ReadFull(server, rec[5:]); err != nil {
		t.Fatal(err)
	}
	return rec
}

// tlsRecord wraps body in a TLS record header of type typ (a length that
// may lie).
func tlsRecord(typ byte, length uint16, body []byte) []byte {
	return append([]byte{typ, 3, 3, byte(length >> 8), byte(length)}, body...)
}

// FuzzTLSListener feeds the TLS listeners (SSL and SASL_SSL) truncated,
// oversized and garbage bytes before the handshake, in the middle of it,
// inside the record stream after it, and as Kafka frames after it. Each
// time the client half-closes after its bytes and the broker must close the
// connection within tlsFuzzWait (after a TLS alert, or answers to whatever
// frames were valid), never panic, and still serve a good TLS client.
func FuzzTLSListener(f *testing.F) {
	b := startSecureBroker(f, func(l *Listener) { l.HandshakeTimeout, l.AuthTimeout = time.Second, time.Second })
	cfg := b.clientTLS(f, nil)
	cfg.ServerName = "127.0.0.1" // as tls.Dial would set it
	hello := clientHello(f, cfg)
	apiVersions := frame(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "f", ClientSoftwareVersion: "1"}, 1, nil)
	metadata := frame(&kmsg.MetadataRequest{Version: 9}, 2, nil)

	for phase := range byte(tlsFuzzPhases) {
		for _, lst := range []byte{0, tlsFuzzPhases} { // SSL, SASL_SSL
			f.Add(phase+lst, []byte{})
			f.Add(phase+lst, []byte("GET / HTTP/1.1\r\n\r\n"))
			f.Add(phase+lst, hello[:len(hello)/2])                                  // truncated ClientHello
			f.Add(phase+lst, hello)                                                 // a second one
			f.Add(phase+lst, tlsRecord(0x16, 0xffff, hello[5:]))                    // oversized length, short body
			f.Add(phase+lst, tlsRecord(0x17, 0x4001, make([]byte, 64)))             // record over TLS's 16 KiB + 1
			f.Add(phase+lst, tlsRecord(0x17, 32, make([]byte, 32)))                 // application data, bad MAC
			f.Add(phase+lst, tlsRecord(0x15, 2, []byte{2, 40}))                     // a fatal alert
			f.Add(phase+lst, []byte{0x7f, 0xff, 0xff, 0xff, 0, 18})                 // Kafka frame of 2 GiB
			f.Add(phase+lst, []byte{0, 0, 0, 1, 0})                                 // Kafka frame below the minimum
			f.Add(phase+lst, apiVersions[:len(apiVersions)-3])                      // truncated Kafka frame
			f.Add(phase+lst, append(append([]byte{}, apiVersions...), metadata...)) // valid frames
		}
	}
	f.Fuzz(func(t *testing.T, sel byte, data []byte) {
		phase := sel % tlsFuzzPhases
		name := "SSL"
		if sel/tlsFuzzPhases%2 == 1 {
			name = "SASL_SSL"
		}
		tcp, err := net.Dial("tcp", b.addrs[name])
		if err != nil {
			t.Fatal(err)
		}
		defer tcp.Close()
		_ = tcp.SetDeadline(time.Now().Add(tlsFuzzWait))
		var rd io.Reader = tcp
		switch phase {
		case tlsFuzzBeforeHandshake:
			_, _ = tcp.Write(data)
			_ = tcp.(*net.TCPConn).CloseWrite()
		case tlsFuzzMidHandshake:
			_, _ = tcp.Write(hello)
			_, _ = tcp.Write(data)
			_ = tcp.(*net.TCPConn).CloseWrite()
		case tlsFuzzInsideRecords, tlsFuzzAfterHandshake:
			tc := tls.Client(tcp, cfg)
			if err := tc.Handshake(); err != nil {
				t.Fatalf("%s: handshake of a good client: %v", name, err)
			}
			rd = tc
			if phase == tlsFuzzInsideRecords {
				_, _ = tcp.Write(data)
				_ = tcp.(*net.TCPConn).CloseWrite()
			} else {
				_, _ = tc.Write(data)
				_ = tc.CloseWrite() // close_notify, then the TCP half-close
			}
		}
		// Whatever comes back (alerts, answers to valid frames), then the
		// close: a TLS error reading is the broker's alert, also fine.
		_, err = io.Copy(io.Discard, rd)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s phase %d: connection still open %s after the client half-closed (%d bytes %x)",
				name, phase, tlsFuzzWait, len(data), data[:min(len(data), 64)])
		}
		if p := b.logs.find("panic"); len(p) > 0 {
			t.Fatalf("broker logged a panic: %s", p[0])
		}
		tlsGoodClient(t, b, cfg, "SSL")
	})
}

// tlsGoodClient checks that listener name serves a well-behaved TLS client:
// ApiVersions is answered.
func tlsGoodClient(t testing.TB, b *secureBroker, cfg *tls.Config, name string) {
	t.Helper()
	c, err := tls.Dial("tcp", b.addrs[name], cfg)
	if err != nil {
		t.Fatalf("%s: good client: %v", name, err)
	}
	defer c.Close()
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
	if resp := rc.do(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"}).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("%s: good client: ApiVersions error %d, %d keys", name, resp.ErrorCode, len(resp.ApiKeys))
	}
}
