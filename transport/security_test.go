package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/credentials"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/tlsfiles"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// secureBroker is a broker serving several listeners, with PLAIN users and
// a SCRAM credential store.
type secureBroker struct {
	s     *Server
	node  *node.Node
	addrs map[string]string // listener name -> address
	logs  *logRecorder
	ca    *tlstest.CA
	creds *credentials.Store
}

var plainUsers = map[string]string{"alice": "alice-secret", "admin": "admin-secret"}

// startSecureBroker serves PLAINTEXT, SSL (client certificates requested),
// SASL_PLAINTEXT and SASL_SSL listeners, each named as its protocol.
func startSecureBroker(t testing.TB, tweak ...func(*Listener)) *secureBroker {
	t.Helper()
	ca := tlstest.NewCA(t, "weir test CA")
	srv := ca.Issue("server", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	tcfg, err := tlsfiles.ServerConfig(tlsfiles.Server{CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		ClientCAFile: ca.File, ClientAuth: tlsfiles.ClientAuthRequested})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	store := memstore.NewServer().Connect()
	creds := credentials.Open(store, slog.New(logs))
	t.Cleanup(func() { creds.Close() })
	dir := t.TempDir()
	lns := map[string]net.Listener{}
	addrs := map[string]string{}
	for _, p := range []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[string(p)], addrs[string(p)] = l, l.Addr().String()
	}
	n, err := node.Open(node.Config{FS: vfs.Default, DataDir: dir, Advertised: addrs["PLAINTEXT"], Coord: store,
		Logger: slog.New(logs), AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{Logger: slog.New(logs), Metrics: NewMetrics(n.Metrics()),
		SASL: SASLConfig{PlainUsers: plainUsers, Scram: creds}}, n)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, len(lns))
	for name, l := range lns {
		lc := Listener{Name: name, Protocol: SecurityProtocol(name), Advertised: l.Addr().String()}
		if lc.Protocol.TLS() {
			lc.TLS = tcfg
		}
		for _, f := range tweak {
			f(&lc)
		}
		go func() { served <- s.ServeListener(l, lc) }()
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		for range lns {
			if err := <-served; err != nil {
				t.Errorf("ServeListener returned %v after Close", err)
			}
		}
		for _, m := range logs.find("panic") {
			t.Errorf("server logged: %s", m)
		}
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return &secureBroker{s: s, node: n, addrs: addrs, logs: logs, ca: ca, creds: creds}
}

// client returns a franz-go client of listener name.
func (b *secureBroker) client(t testing.TB, name string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addrs[name]), kgo.RetryTimeout(5 * time.Second),
		kgo.RequestRetries(2), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (b *secureBroker) clientTLS(t testing.TB, cert *tlstest.Pair) *tls.Config {
	t.Helper()
	c := tlsfiles.Client{CAFile: b.ca.File}
	if cert != nil {
		c.CertFile, c.KeyFile = cert.CertFile, cert.KeyFile
	}
	cfg, err := tlsfiles.ClientConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// principals returns the principals of the open connections accepted on
// listener name.
func (b *secureBroker) principals(name string) []string {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var out []string
	for c := range b.s.conns {
		if c.listener().Name == name {
			out = append(out, c.principal())
		}
	}
	slices.Sort(out)
	return out
}

// roundTrip produces a record to topic and consumes it back through cl.
func roundTrip(t testing.TB, cl *kgo.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	val := []byte("secret " + topic)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: val}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	cl.AddConsumeTopics(topic)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume %s: %v", topic, e.Err)
		}
		for _, r := range fs.Records() {
			if string(r.Value) != string(val) {
				t.Fatalf("consumed %q, produced %q", r.Value, val)
			}
			return
		}
	}
}

func addScramUser(t testing.TB, b *secureBroker, user, pass string, m kadm.ScramMechanism) {
	t.Helper()
	adm := kadm.NewClient(b.client(t, "PLAINTEXT"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: 4096, Password: pass}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %s: %v", r.User, r.Err)
		}
	}
	mech := credentials.SHA256
	if m == kadm.ScramSha512 {
		mech = credentials.SHA512
	}
	pollUntil(t, "the credential reaches the broker's copy", func() bool {
		_, ok := b.creds.Lookup(mech, user)
		return ok
	})
}

func TestSASLPlainAndScramWithFranz(t *testing.T) {
	b := startSecureBroker(t)
	addScramUser(t, b, "bob", "bob-pass", kadm.ScramSha256)
	addScramUser(t, b, "carol", "carol-pass", kadm.ScramSha512)

	cases := []struct {
		listener string
		mech     sasl.Mechanism
		tls      bool
		want     string
	}{
		{"SASL_PLAINTEXT", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), false, "User:alice"},
		{"SASL_PLAINTEXT", scram.Auth{User: "bob", Pass: "bob-pass"}.AsSha256Mechanism(), false, "User:bob"},
		{"SASL_SSL", scram.Auth{User: "bob", Pass: "bob-pass"}.AsSha256Mechanism(), true, "User:bob"},
		{"SASL_SSL", scram.Auth{User: "carol", Pass: "carol-pass"}.AsSha512Mechanism(), true, "User:carol"},
	}
	for i, c := range cases {
		opts := []kgo.Opt{kgo.SASL(c.mech)}
		if c.tls {
			opts = append(opts, kgo.DialTLSConfig(b.clientTLS(t, nil)))
		}
		cl := b.client(t, c.listener, opts...)
		roundTrip(t, cl, "sasl-"+strings.ToLower(c.mech.Name())+"-"+string(rune('a'+i)))
		if got := b.principals(c.listener); !slices.Contains(got, c.want) || slices.Contains(got, AnonymousPrincipal) {
			t.Errorf("%s %s: principals %v, want %s and no anonymous", c.listener, c.mech.Name(), got, c.want)
		}
		cl.Close()
	}
}

// Wrong passwords and unknown users are refused with
// SASL_AUTHENTICATION_FAILED, logged, and the broker serves others.
func TestSASLFailures(t *testing.T) {
	b := startSecureBroker(t)
	addScramUser(t, b, "bob", "bob-pass", kadm.ScramSha256)
	bad := []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		plain.Auth{User: "nobody", Pass: "x"}.AsMechanism(),
		scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
		scram.Auth{User: "nobody", Pass: "x"}.AsSha256Mechanism(),
		scram.Auth{User: "bob", Pass: "bob-pass"}.AsSha512Mechanism(), // no SHA-512 credential
	}
	for _, m := range bad {
		cl := b.client(t, "SASL_PLAINTEXT", kgo.SASL(m))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.Ping(ctx)
		cancel()
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: Ping: %v, want SASL_AUTHENTICATION_FAILED", m.Name(), err)
		}
		cl.Close()
	}
	if got := b.logs.find("SASL authentication failed"); len(got) == 0 || !strings.Contains(got[0], "127.0.0.1") {
		t.Errorf("failed authentications logged as %q, want the client address", got)
	}
	roundTrip(t, b.client(t, "SASL_PLAINTEXT", kgo.SASL(scram.Auth{User: "bob", Pass: "bob-pass"}.AsSha256Mechanism())), "after-failures")
}

// On a SASL listener nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate is served before authentication; an unknown mechanism
// is answered with the enabled ones and the connection closed.
func TestSASLGate(t *testing.T) {
	b := startSecureBroker(t)
	tb := &testBroker{s: b.s, node: b.node, addr: b.addrs["SASL_PLAINTEXT"], logs: b.logs}

	rc := tb.dial(t)
	rc.do(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"})
	rc.send(&kmsg.MetadataRequest{Version: 9})
	rc.expectClosed()

	rc = tb.dial(t)
	hs := rc.do(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: "GSSAPI"}).(*kmsg.SASLHandshakeResponse)
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code ||
		!slices.Equal(hs.SupportedMechanisms, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
		t.Errorf("handshake GSSAPI: error %d, mechanisms %v", hs.ErrorCode, hs.SupportedMechanisms)
	}
	rc.expectClosed()

	rc = tb.dial(t)
	if hs := rc.do(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: "PLAIN"}).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatalf("handshake PLAIN: error %d", hs.ErrorCode)
	}
	au := rc.do(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("\x00alice\x00alice-secret")}).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", au.ErrorCode)
	}
	md := rc.do(&kmsg.MetadataRequest{Version: 9}).(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || md.Brokers[0].Port == 0 {
		t.Fatalf("metadata after authentication: %+v", md.Brokers)
	}
	if again := rc.do(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("x")}).(*kmsg.SASLAuthenticateResponse); again.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("second authenticate: error %d, want ILLEGAL_SASL_STATE", again.ErrorCode)
	}
	rc.expectClosed()
}

// Metadata answers each listener with that listener's advertised address.
func TestListenerAdvertised(t *testing.T) {
	b := startSecureBroker(t, func(l *Listener) {
		if l.Name == "SASL_SSL" {
			l.Advertised = "sasl-ssl.example:19093"
		}
	})
	for _, name := range []string{"PLAINTEXT", "SASL_PLAINTEXT"} {
		tb := &testBroker{s: b.s, node: b.node, addr: b.addrs[name], logs: b.logs}
		rc := tb.dial(t)
		if name == "SASL_PLAINTEXT" {
			rc.do(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: "PLAIN"})
			rc.do(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("\x00alice\x00alice-secret")})
		}
		md := rc.do(&kmsg.MetadataRequest{Version: 9}).(*kmsg.MetadataResponse)
		if got := net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)); got != b.addrs[name] {
			t.Errorf("%s: metadata advertises %s, want %s", name, got, b.addrs[name])
		}
	}
	cl := b.client(t, "SASL_SSL", kgo.DialTLSConfig(b.clientTLS(t, nil)),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if h := resp.Brokers[0].Host; h != "sasl-ssl.example" || resp.Brokers[0].Port != 19093 {
		t.Errorf("SASL_SSL: metadata advertises %s:%d", h, resp.Brokers[0].Port)
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// mTLS: a verified client certificate's subject is the principal; no
// certificate is ANONYMOUS; an untrusted or expired certificate, and a
// plaintext client on the SSL port, fail the handshake cleanly.
func TestMutualTLS(t *testing.T) {
	b := startSecureBroker(t)
	good := b.ca.Issue("alice", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}},
		tlstest.Options{Client: true})
	cl := b.client(t, "SSL", kgo.DialTLSConfig(b.clientTLS(t, &good)))
	roundTrip(t, cl, "mtls")
	if got, want := b.principals("SSL"), "User:CN=alice,OU=eng,O=acme"; !slices.Contains(got, want) {
		t.Errorf("principals %v, want %s", got, want)
	}
	cl.Close()

	anon := b.client(t, "SSL", kgo.DialTLSConfig(b.clientTLS(t, nil)))
	roundTrip(t, anon, "mtls-anon")
	if got := b.principals("SSL"); len(got) == 0 || slices.ContainsFunc(got, func(p string) bool { return p != AnonymousPrincipal }) {
		t.Errorf("principals without a client certificate %v, want only %s", got, AnonymousPrincipal)
	}
	anon.Close()

	other := tlstest.NewCA(t, "someone else")
	untrusted := other.Issue("mallory", pkix.Name{CommonName: "mallory"}, tlstest.Options{Client: true})
	expired := b.ca.Issue("old", pkix.Name{CommonName: "old"}, tlstest.Options{Client: true, Expired: true})
	for _, p := range []*tlstest.Pair{&untrusted, &expired} {
		cfg := b.clientTLS(t, p)
		// Go's client sends no certificate the server's CA list does not
		// cover; other clients do.
		cert := cfg.Certificates[0]
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		c, err := tls.Dial("tcp", b.addrs["SSL"], cfg)
		if err == nil {
			// TLS 1.3: the client learns of the refusal on its first read.
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("client certificate %s: %v, want a certificate alert; log %q", p.Cert.Subject, err, b.logs.find("TLS"))
		}
	}
	if got := b.logs.find("TLS handshake failed"); len(got) == 0 {
		t.Error("refused handshakes not logged")
	}

	// A plaintext Kafka client on the SSL port: the broker closes the
	// connection (its bytes are no TLS record); it never hangs.
	tb := &testBroker{s: b.s, node: b.node, addr: b.addrs["SSL"], logs: b.logs}
	rc := tb.dial(t)
	rc.send(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"})
	rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf, err := io.ReadAll(rc.r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("plaintext client on the SSL port: not closed")
	}
	if len(buf) > 0 && buf[0] != 0x15 { // at most a TLS alert record
		t.Errorf("plaintext client on the SSL port got %x, want nothing or a TLS alert", buf)
	}
	roundTrip(t, b.client(t, "SSL", kgo.DialTLSConfig(b.clientTLS(t, &good))), "mtls-after")
}

// A client that stops in the middle of the TLS handshake is closed after
// the listener's HandshakeTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	b := startSecureBroker(t, func(l *Listener) { l.HandshakeTimeout = 50 * time.Millisecond })
	c, err := net.Dial("tcp", b.addrs["SSL"])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Half a ClientHello record header.
	if _, err := c.Write([]byte{0x16, 0x03, 0x01}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("stalled handshake not closed")
	}
	pollUntil(t, "the stalled handshake logged", func() bool { return len(b.logs.find("TLS handshake failed")) > 0 })
}

// A client that stops halfway through a SASL exchange (SCRAM's first
// message sent, the final never), or never starts one, is closed after the
// listener's AuthTimeout and logged; an authenticated connection older
// than that is still served.
func TestSASLAuthTimeout(t *testing.T) {
	b := startSecureBroker(t, func(l *Listener) { l.AuthTimeout = time.Second })
	addScramUser(t, b, "bob", "bob-pass", kadm.ScramSha256)
	tb := &testBroker{s: b.s, node: b.node, addr: b.addrs["SASL_PLAINTEXT"], logs: b.logs}

	authed := tb.dial(t)
	authed.do(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: "PLAIN"})
	if au := authed.do(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("\x00alice\x00alice-secret")}).(*kmsg.SASLAuthenticateResponse); au.ErrorCode != 0 {
		t.Fatalf("authenticate: error %d", au.ErrorCode)
	}

	halfway := tb.dial(t)
	if hs := halfway.do(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: "SCRAM-SHA-256"}).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatalf("handshake: error %d", hs.ErrorCode)
	}
	first := halfway.do(&kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("n,,n=bob,r=clientnonce")}).(*kmsg.SASLAuthenticateResponse)
	if first.ErrorCode != 0 || !strings.HasPrefix(string(first.SASLAuthBytes), "r=clientnonce") {
		t.Fatalf("client-first: error %d, server-first %q", first.ErrorCode, first.SASLAuthBytes)
	}
	silent := tb.dial(t) // ApiVersions only, then nothing
	silent.do(&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"})

	start := time.Now()
	halfway.expectClosed()
	silent.expectClosed()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stalled exchanges closed after %s, want about the 1s AuthTimeout", d)
	}
	if got := b.logs.find("SASL authentication not done in time"); len(got) == 0 || !strings.Contains(got[0], "127.0.0.1") {
		t.Errorf("logged %q, want the stalled client's address (warnings are rate-limited: one is enough)", got)
	}
	// Opened before both, authenticated: still served.
	if md := authed.do(&kmsg.MetadataRequest{Version: 9}).(*kmsg.MetadataResponse); len(md.Brokers) != 1 {
		t.Errorf("authenticated connection after the timeout: metadata %+v", md.Brokers)
	}
}
