package transport

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/transport/secdial"
)

// BenchmarkSCRAMAuthentications: connections authenticated per second with
// SCRAM-SHA-256 (4096 iterations, the client's PBKDF2 included, as every
// new connection of a client pays it once) on SASL_PLAINTEXT.
func BenchmarkSCRAMAuthentications(b *testing.B) {
	sb := startSecureBroker(b)
	addScramUser(b, sb, "bench", "bench-pass", kadm.ScramSha256)
	addr := sb.addrs["SASL_PLAINTEXT"]
	mech := scram.Auth{User: "bench", Pass: "bench-pass"}.AsSha256Mechanism()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if err := secdial.Authenticate(context.Background(), c, "127.0.0.1", mech); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "auths/s")
}

// BenchmarkConsumeByProtocol: franz-go consuming 64 MiB from the start of a
// topic on each listener, same broker, same run: PLAINTEXT (sendfile), SSL
// (the copy path: its listener has kTLS off) and SSL-ktls (an SSL listener
// with kTLS auto: sendfile through the kernel's TLS where the self-test
// passes; skipped with the self-test's reason where it does not, as on
// kernels without the tls ULP). MB/s is the broker and the client together
// on one machine. SASL_SSL (SCRAM-SHA-512, the login paid once per
// consumer) runs beside them.
func BenchmarkConsumeByProtocol(b *testing.B) {
	var tcfg *tls.Config
	sb := startSecureBroker(b, func(l *Listener) {
		if l.Protocol == SSL {
			l.KTLS, tcfg = KTLSOff, l.TLS
		}
	})
	kl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addScramUser(b, sb, "bench", "bench-pass", kadm.ScramSha512)
	sb.addrs["SSL-ktls"] = kl.Addr().String()
	served := make(chan error, 1)
	go func() {
		served <- sb.s.ServeListener(kl, Listener{Name: "SSL-ktls", Protocol: SSL, TLS: tcfg, Advertised: kl.Addr().String()})
	}()
	b.Cleanup(func() {
		sb.s.Close()
		if err := <-served; err != nil {
			b.Error(err)
		}
	})
	// ServeListener decides (self-test) before it serves.
	if c, err := tls.Dial("tcp", kl.Addr().String(), sb.clientTLS(b, nil)); err != nil {
		b.Fatal(err)
	} else {
		c.Close()
	}
	const total = 64 << 20
	prod := sb.client(b, "PLAINTEXT", kgo.ProducerBatchMaxBytes(1<<20))
	val := make([]byte, 16<<10)
	ctx := context.Background()
	for range total / len(val) {
		prod.Produce(ctx, &kgo.Record{Topic: "bench", Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"PLAINTEXT", "SSL", "SASL_SSL", "SSL-ktls"} {
		b.Run("protocol="+name, func(b *testing.B) {
			if name == "SSL-ktls" {
				if p := sb.s.FetchPaths()[name]; !strings.HasPrefix(p, "kTLS") {
					b.Skipf("kTLS not in use on this machine, not measured: %s", p)
				}
			}
			b.SetBytes(total)
			for b.Loop() {
				opts := []kgo.Opt{kgo.ConsumeTopics("bench"), kgo.FetchMaxBytes(16 << 20)}
				if name != "PLAINTEXT" {
					opts = append(opts, kgo.DialTLSConfig(sb.clientTLS(b, nil)))
				}
				if name == "SASL_SSL" {
					opts = append(opts, kgo.SASL(scram.Auth{User: "bench", Pass: "bench-pass"}.AsSha512Mechanism()))
				}
				cl := sb.client(b, name, opts...)
				n := 0
				for n < total/len(val) {
					fs := cl.PollFetches(ctx)
					for _, e := range fs.Errors() {
						b.Fatal(e.Err)
					}
					n += fs.NumRecords()
				}
				cl.Close()
			}
		})
	}
}
