package ktls_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/ktls/ktlstest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// CryptoInfo's bytes read back by the kernel's layout (the emulation's
// parser, written from include/uapi/linux/tls.h) give the keys, IV split
// into salt and iv, and the sequence number.
func TestCryptoInfoLayout(t *testing.T) {
	for _, tc := range []struct {
		suite         uint16
		cipher        uint16
		keyLen, ivLen int
		salt          bool
	}{
		{tls.TLS_AES_128_GCM_SHA256, ktlstest.CipherAESGCM128, 16, 8, true},
		{tls.TLS_AES_256_GCM_SHA384, ktlstest.CipherAESGCM256, 32, 8, true},
		{tls.TLS_CHACHA20_POLY1305_SHA256, ktlstest.CipherChaCha20Poly, 32, 12, false},
	} {
		secret := make([]byte, 48)
		rand.Read(secret)
		k, err := ktls.TrafficKeys(tc.suite, secret)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ktls.CryptoInfo(k, 0x0102030405060708)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ktlstest.ParseInfo(info)
		if err != nil {
			t.Fatalf("%s: %v", tls.CipherSuiteName(tc.suite), err)
		}
		iv := append(append([]byte(nil), in.Salt...), in.IV...)
		if in.Cipher != tc.cipher || !bytes.Equal(in.Key, k.Key) || len(in.Key) != tc.keyLen ||
			len(in.IV) != tc.ivLen || !bytes.Equal(iv, k.IV) || in.RecSeq != 0x0102030405060708 || (len(in.Salt) == 4) != tc.salt {
			t.Errorf("%s: parsed %+v from keys %+v", tls.CipherSuiteName(tc.suite), in, k)
		}
	}
	if _, err := ktls.CryptoInfo(ktls.Keys{Suite: tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, IV: make([]byte, 12)}, 0); !errors.Is(err, ktls.ErrUnsupported) {
		t.Errorf("TLS 1.2 suite: %v, want ErrUnsupported", err)
	}
}

// The self-test passes on the emulated kernel, and fails with the reason
// when the kernel has no ULP, refuses TLS_TX, or numbers records wrong.
func TestSelfTestEmulated(t *testing.T) {
	if err := ktls.SelfTest(&ktlstest.Kernel{}); err != nil {
		t.Fatalf("emulated kernel: %v", err)
	}
	for _, tc := range []struct {
		k    *ktlstest.Kernel
		want error
	}{
		{&ktlstest.Kernel{ProbeErr: errors.New("ENOENT")}, ktls.ErrNoULP},
		{&ktlstest.Kernel{EnableErr: errors.New("EINVAL")}, ktls.ErrRefused},
		{&ktlstest.Kernel{SeqSkew: 1}, ktls.ErrMismatch},
	} {
		if err := ktls.SelfTest(tc.k); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.k, err, tc.want)
		} else {
			t.Logf("%v", err)
		}
	}
}

// On this machine's kernel: passes where the kernel has kTLS, else fails
// naming the missing ULP (the broker then keeps the copy path).
func TestSelfTestKernel(t *testing.T) {
	err := ktls.SelfTest(ktls.Kernel)
	t.Logf("SelfTest(Kernel) = %v", err)
	if ktls.Available() != nil {
		if !errors.Is(err, ktls.ErrNoULP) {
			t.Errorf("kernel without kTLS: %v, want ErrNoULP", err)
		}
	} else if err != nil {
		t.Errorf("kernel with kTLS: %v", err)
	}
}

// serve runs one connection: the server (scfg from ServerConfig) switches
// to k after the handshake and writes payload; a crypto/tls client reads
// it back.
func serve(t *testing.T, scfg *tls.Config, ccfg *tls.Config, k ktls.ULP, payload []byte) (got []byte, resumed bool, srvErr error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			nc, err := l.Accept()
			if err != nil {
				return err
			}
			c := ktls.Server(nc, scfg)
			defer c.Close()
			if err := c.HandshakeContext(context.Background()); err != nil {
				return err
			}
			if err := c.EnableTX(k); err != nil {
				return err
			}
			if _, err := c.Write(payload); err != nil {
				return err
			}
			_, _ = c.Read(make([]byte, 1))
			return nil
		}()
	}()
	cc, err := tls.Dial("tcp", l.Addr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len(payload))
	_, rerr := io.ReadFull(cc, got)
	resumed = cc.ConnectionState().DidResume
	cc.Close()
	if err := <-done; err != nil {
		return nil, false, err
	}
	if rerr != nil {
		t.Fatalf("client read: %v", rerr)
	}
	return got, resumed, nil
}

// The records crypto/tls sent with the application keys before the
// switch (session tickets) are counted, with client certificates too
// (Go sends the tickets after reading them then); with tickets off the
// kernel starts at 0. A 1 MiB write spans 64 records.
func TestEnableTXSequence(t *testing.T) {
	ca := tlstest.NewCA(t, "ktls CA")
	pair := ca.Issue("srv", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	cli := ca.Issue("cli", pkix.Name{CommonName: "alice"}, tlstest.Options{Client: true})
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ccert, err := tls.LoadX509KeyPair(cli.CertFile, cli.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	for _, tc := range []struct {
		name    string
		scfg    *tls.Config
		ccfg    *tls.Config
		wantSeq func(uint64) bool
	}{
		// Go's client offers resumption (and so gets tickets) only with a
		// session cache; Java's and librdkafka's always do.
		{"tickets", &tls.Config{Certificates: []tls.Certificate{cert}},
			&tls.Config{RootCAs: pool, ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(4)}, func(s uint64) bool { return s >= 1 }},
		{"client without cache", &tls.Config{Certificates: []tls.Certificate{cert}},
			&tls.Config{RootCAs: pool, ServerName: "localhost"}, func(s uint64) bool { return s == 0 }},
		{"tickets disabled", &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true},
			&tls.Config{RootCAs: pool, ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(4)}, func(s uint64) bool { return s == 0 }},
		{"mTLS tickets", &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
			&tls.Config{RootCAs: pool, ServerName: "localhost", Certificates: []tls.Certificate{ccert}, ClientSessionCache: tls.NewLRUClientSessionCache(4)}, func(s uint64) bool { return s >= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &ktlstest.Kernel{}
			scfg := ktls.ServerConfig(tc.scfg) // one per listener
			rounds := 1
			if tc.ccfg.ClientSessionCache != nil {
				rounds = 2 // the second connection resumes with the first's ticket
			}
			for round := range rounds {
				got, resumed, err := serve(t, scfg, tc.ccfg, k, payload)
				if err != nil {
					t.Fatal(err)
				}
				if want := round == 1 && !tc.scfg.SessionTicketsDisabled; resumed != want {
					t.Errorf("round %d: resumed %v", round, resumed)
				}
				if !bytes.Equal(got, payload) {
					t.Fatal("client read other bytes than the server wrote")
				}
			}
			infos := k.Infos()
			if len(infos) != rounds {
				t.Fatalf("%d EnableTX calls", len(infos))
			}
			for _, in := range infos {
				if !tc.wantSeq(in.RecSeq) {
					t.Errorf("rec_seq %d", in.RecSeq)
				}
				t.Logf("cipher %d rec_seq %d", in.Cipher, in.RecSeq)
			}
		})
	}
}
