package mirror_test

import (
	"context"
	"crypto/x509/pkix"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
	"github.com/weir-broker/weir/transport/tlsfiles"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// TestMirrorForwardSASLSSL: the forwarder's own connections (wire.go)
// dial, encrypt and authenticate as the mirror's clients are configured
// to: source and target are brokers whose only address the mirror is
// given is a SASL_SSL listener (PLAIN users, a test CA), and every record
// is forwarded, in order. With a wrong password on the target, nothing is
// copied and the error says why.
func TestMirrorForwardSASLSSL(t *testing.T) {
	ca := tlstest.NewCA(t, "mirror test CA")
	srv := ca.Issue("server", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte(`user_mirror="mirror-secret"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := func(c *broker.Config) {
		c.Security = broker.Security{Listeners: "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			CertFile: srv.CertFile, KeyFile: srv.KeyFile, PlainUsersFile: users}
	}
	src, dst := brokertest.Start(t, "", secure), brokertest.Start(t, "", secure)
	tcfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(pass string) []kgo.Opt {
		return []kgo.Opt{kgo.DialTLSConfig(tcfg.Clone()), kgo.SASL(plain.Auth{User: "mirror", Pass: pass}.AsMechanism())}
	}
	const topic, parts = "secure", 2
	srcPlain, dstPlain := src.ListenerAddr("PLAINTEXT"), dst.ListenerAddr("PLAINTEXT")
	brokertest.CreateTopic(t, srcPlain, topic, parts, nil)
	produce(t, srcPlain, topic, parts, 0, 500)

	// A wrong password on the target: refused, nothing written.
	logs := &brokertest.LogBuffer{}
	cfg := testConfig(t, src.ListenerAddr("SASL_SSL"), dst.ListenerAddr("SASL_SSL"), topic)
	cfg.Forward, cfg.SourceOpts, cfg.TargetOpts = true, opts("mirror-secret"), opts("wrong")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	_, stop := runMirror(t, cfg)
	waitFor(t, "the mirror logging its target's refusal", func() bool { return logs.Contains("SASL_AUTHENTICATION_FAILED") })
	stop()
	if ends, ok := tryEnds(dstPlain, topic, parts); ok && sum(ends) > 0 {
		t.Fatalf("the target holds %v records with the mirror refused", ends)
	}

	cfg = testConfig(t, src.ListenerAddr("SASL_SSL"), dst.ListenerAddr("SASL_SSL"), topic)
	cfg.Forward, cfg.SourceOpts, cfg.TargetOpts = true, opts("mirror-secret"), opts("mirror-secret")
	_, stop = runMirror(t, cfg)
	waitFor(t, "every record on the target", func() bool { return mirroredAll(t, dstPlain, topic, parts, 500, 500) })
	stop()
	got := readAll(t, dstPlain, topic, parts)
	want := readAll(t, srcPlain, topic, parts)
	for p := range int32(parts) {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("partition %d: %d records on the target, %d on the source", p, len(got[p]), len(want[p]))
		}
		for i := range got[p] {
			if string(got[p][i].Value) != string(want[p][i].Value) || string(got[p][i].Key) != string(want[p][i].Key) {
				t.Fatalf("partition %d record %d: %q, source has %q", p, i, got[p][i].Value, want[p][i].Value)
			}
		}
	}
}

// TestMirrorForwardScribbledBuffers: forwarding with buffers that are
// overwritten the moment they are recycled: while batches are fetched,
// queued, written and acknowledged on the forwarder's own connections
// (many answers, each buffer recycled and read into again), no batch
// reaches the target from a recycled buffer (the target would refuse its
// CRC: no partition counts an error), and the target holds every source
// record, in order.
func TestMirrorForwardScribbledBuffers(t *testing.T) {
	src, dst := brokertest.Start(t, "").Addr(), brokertest.Start(t, "").Addr()
	const topic, parts, rounds, per = "scribbled", 4, 20, 50
	brokertest.CreateTopic(t, src, topic, parts, nil)
	cfg := testConfig(t, src, dst, topic)
	cfg.Forward = true
	m, err := mirror.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mirror.ScribbleBuffers(m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for i := range rounds { // batches produced while earlier ones are forwarded
		produce(t, src, topic, parts, i*per, per)
	}
	waitFor(t, "every record on the target", func() bool { return mirroredAll(t, dst, topic, parts, rounds*per) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.Close()
	for _, s := range m.Status() {
		if s.Errors != 0 || s.FetchErrors != 0 {
			t.Errorf("partition %d: %d errors, %d fetch errors (last: %s)", s.Partition, s.Errors, s.FetchErrors, s.LastError)
		}
	}
	got, want := readAll(t, dst, topic, parts), readAll(t, src, topic, parts)
	for p := range int32(parts) {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("partition %d: %d records on the target, %d on the source", p, len(got[p]), len(want[p]))
		}
		for i := range got[p] {
			if string(got[p][i].Value) != string(want[p][i].Value) {
				t.Fatalf("partition %d record %d: %q, source has %q", p, i, got[p][i].Value, want[p][i].Value)
			}
		}
	}
}
