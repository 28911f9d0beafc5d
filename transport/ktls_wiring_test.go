package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/ktls/ktlstest"
)

// withULP makes the TLS listeners use k as the kernel's TLS ULP.
func withULP(k ktls.ULP) func(*Listener) {
	return func(l *Listener) {
		if l.Protocol.TLS() {
			l.ulp = k
		}
	}
}

// fetchPaths returns the Fetch paths of sb's TLS listeners once decided:
// ServeListener runs the self-test before it serves, so a handshake
// answered on each means its path is decided.
func fetchPaths(t *testing.T, sb *secureBroker) map[string]string {
	t.Helper()
	for _, name := range []string{"SSL", "SASL_SSL"} {
		c, err := tls.Dial("tcp", sb.addrs[name], sb.clientTLS(t, nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c.Close()
	}
	return sb.s.FetchPaths()
}

// produceValues writes n records of size bytes, each filled with its index,
// through PLAINTEXT.
func produceValues(t *testing.T, sb *secureBroker, topic string, n, size int) {
	t.Helper()
	cl := sb.client(t, "PLAINTEXT", kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{byte(i)}, size)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// consumeValues reads the n records back through cl and checks every byte.
func consumeValues(t *testing.T, cl *kgo.Client, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("consume: %v", e.Err)
		}
		for _, r := range fs.Records() {
			if want := bytes.Repeat([]byte{byte(r.Offset)}, size); !bytes.Equal(r.Value, want) {
				t.Fatalf("record %d: %d bytes, not the ones produced", r.Offset, len(r.Value))
			}
			got++
		}
	}
}

// On the emulated kernel (the crypto info parsed back from the bytes
// setsockopt would get, writes encrypted with it into TLS 1.3 records),
// the TLS listeners pass the self-test and use kTLS: every response,
// after the session tickets crypto/tls sent, including Fetch responses of
// many records, is decrypted by franz-go's crypto/tls client.
func TestKTLSEmulatedKernel(t *testing.T) {
	k := &ktlstest.Kernel{}
	sb := startSecureBroker(t, withULP(k))
	paths := fetchPaths(t, sb)
	for _, name := range []string{"SSL", "SASL_SSL"} {
		if p := paths[name]; !strings.HasPrefix(p, "kTLS") {
			t.Fatalf("listener %s: fetch path %q, want kTLS", name, p)
		}
	}
	if got := sb.logs.find("fetch_path=kTLS"); len(got) != 2 {
		t.Errorf("logged %q", got)
	}
	const n, size = 256, 16 << 10 // 4 MiB: Fetch responses of hundreds of records
	produceValues(t, sb, "ktls", n, size)
	before := len(k.Infos()) // the self-tests'
	sent := k.Encrypted()
	ccfg := sb.clientTLS(t, nil)
	ccfg.ClientSessionCache = tls.NewLRUClientSessionCache(8) // so that the broker sends tickets
	for round := range 2 {                                    // the second resumes the session
		cl := sb.client(t, "SSL", kgo.DialTLSConfig(ccfg), kgo.ConsumeTopics("ktls"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(2<<20))
		consumeValues(t, cl, n, size)
		cl.Close()
		infos := k.Infos()[before:]
		if len(infos) == 0 {
			t.Fatalf("round %d: no connection enabled TLS_TX", round)
		}
		ticketed := 0
		for _, in := range infos {
			if in.RecSeq > 0 {
				ticketed++
			}
		}
		if ticketed == 0 {
			t.Errorf("round %d: no connection started past session tickets: %+v", round, infos)
		}
		before = len(k.Infos())
		// The record bytes went through the emulated kernel, not crypto/tls.
		if now := k.Encrypted(); now-sent < n*size {
			t.Errorf("round %d: %d bytes through the kernel, want at least %d", round, now-sent, n*size)
		} else {
			sent = now
		}
	}
}

// A connection whose keys the kernel refuses keeps the copy path
// (through crypto/tls) and works; it is counted and logged.
func TestKTLSConnectionFallback(t *testing.T) {
	k := &ktlstest.Kernel{}
	sb := startSecureBroker(t, withULP(k))
	if p := fetchPaths(t, sb)["SSL"]; !strings.HasPrefix(p, "kTLS") {
		t.Fatalf("fetch path %q", p)
	}
	k.RefuseFrom(errors.New("EINVAL"))
	produceValues(t, sb, "fallback", 64, 16<<10)
	cl := sb.client(t, "SSL", kgo.DialTLSConfig(sb.clientTLS(t, nil)), kgo.ConsumeTopics("fallback"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeValues(t, cl, 64, 16<<10)
	if got := sb.logs.find("kTLS refused for a connection"); len(got) == 0 {
		t.Error("the refusal was not logged")
	}
	sb.s.mu.Lock()
	for c := range sb.s.conns {
		if c.listener().Name == "SSL" && (c.ktls != nil || c.raw != nil) {
			t.Errorf("an SSL connection with kTLS %v, sendfile %v", c.ktls != nil, c.raw != nil)
		}
	}
	sb.s.mu.Unlock()
}

// The fallback on this machine's kernel, for real: the self-test fails
// (no tls ULP here), so the TLS listeners use the copy path, say why in
// the log and FetchPaths, and serve; off forces the copy path.
func TestKTLSKernelFallback(t *testing.T) {
	sb := startSecureBroker(t)
	avail := ktls.Available()
	p := fetchPaths(t, sb)["SSL"]
	t.Logf("kernel: %v; SSL fetch path: %s", avail, p)
	if avail != nil {
		if !strings.HasPrefix(p, "copy (kTLS unavailable: kernel has no tls ULP") {
			t.Errorf("fetch path %q", p)
		}
		if got := sb.logs.find("fetch_path=copy (kTLS unavailable: kernel has no tls ULP"); len(got) != 2 {
			t.Errorf("logged %q", got)
		}
	} else if !strings.HasPrefix(p, "kTLS") {
		t.Errorf("kernel with kTLS: fetch path %q", p)
	}
	produceValues(t, sb, "kernel", 16, 16<<10)
	consumeValues(t, sb.client(t, "SSL", kgo.DialTLSConfig(sb.clientTLS(t, nil)), kgo.ConsumeTopics("kernel"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 16, 16<<10)

	off := startSecureBroker(t, func(l *Listener) { l.KTLS = KTLSOff; l.ulp = &ktlstest.Kernel{} })
	if p := fetchPaths(t, off)["SSL"]; p != "copy (kTLS off)" {
		t.Errorf("off: fetch path %q", p)
	}
	if _, err := ParseKTLSMode("sometimes"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseKTLSMode: %v", err)
	}
}

// OpenSSL (kcat, librdkafka) reads what the emulated kernel encrypts: an
// independent TLS 1.3 implementation, which asks for session tickets, so
// the switch starts past them. Skipped without kcat, except under CI=true.
func TestKTLSEmulatedKernelKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kcat not found (%v), and CI=true: .ci/run must install the Debian package kcat", err)
		}
		t.Skip("kcat not found: install the Debian package kcat (make deps) to run this test")
	}
	k := &ktlstest.Kernel{}
	sb := startSecureBroker(t, withULP(k))
	if p := fetchPaths(t, sb)["SSL"]; !strings.HasPrefix(p, "kTLS") {
		t.Fatalf("fetch path %q", p)
	}
	const n = 2000 // 2 MB of 1000-byte values
	cl := sb.client(t, "PLAINTEXT", kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var want []string
	for i := range n {
		v := fmt.Sprintf("%05d", i) + strings.Repeat(string(rune('a'+i%26)), 995)
		want = append(want, v)
		cl.Produce(ctx, &kgo.Record{Topic: "kcat-ktls", Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := len(k.Infos())
	cmd := exec.CommandContext(ctx, kcat, "-b", sb.addrs["SSL"], "-X", "security.protocol=SSL",
		"-X", "ssl.ca.location="+sb.ca.File, "-C", "-t", "kcat-ktls", "-o", "beginning", "-c", fmt.Sprint(n), "-e", "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s", err, stderr.String())
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != n {
		t.Fatalf("kcat read %d records, want %d: %s", len(got), n, stderr.String())
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d: %.20q..., want %.20q...", i, got[i], want[i])
		}
	}
	infos := k.Infos()[before:]
	if len(infos) == 0 {
		t.Fatal("kcat's connections did not switch to the kernel")
	}
	for _, in := range infos {
		if in.RecSeq == 0 {
			t.Errorf("a kcat connection switched at rec_seq 0: no session ticket counted")
		}
	}
	t.Logf("%d kcat connections switched, rec_seq %d", len(infos), infos[0].RecSeq)
}
