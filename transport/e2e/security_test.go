package e2e_test

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// secureBroker starts a broker with PLAINTEXT, SASL_SSL and SASL_PLAINTEXT
// listeners, PLAIN users alice and admin, and a SCRAM-SHA-512 user carol.
func secureBroker(t *testing.T) (*broker.Broker, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t, "weir e2e CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := writeFile(t, "jaas.conf", []byte(`KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  user_alice="alice-secret"
  user_admin="admin-secret";
};`))
	b := brokertest.Start(t, "", func(c *broker.Config) {
		c.Security = broker.Security{
			Listeners:      "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			CertFile:       srv.CertFile,
			KeyFile:        srv.KeyFile,
			CAFile:         ca.File,
			PlainUsersFile: users,
		}
	})
	adm := kadm.NewClient(secClient(t, b.ListenerAddr("PLAINTEXT")))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-pass"}})
	if err != nil || res["carol"].Err != nil {
		t.Fatalf("alter SCRAM credentials: %v %v", err, res)
	}
	waitFor(t, "carol's credential described", func() bool {
		d, err := adm.DescribeUserSCRAMs(ctx, "carol")
		return err == nil && d["carol"].Err == nil && len(d["carol"].CredInfos) == 1 && d["carol"].CredInfos[0].Iterations == 8192
	})
	return b, ca
}

func secClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kcat (librdkafka) over SASL_SSL with SCRAM-SHA-512: produce and consume;
// a wrong password fails with an authentication error.
func TestSecurityKcatSASLSSLScram512(t *testing.T) {
	kcatPath(t)
	b, ca := secureBroker(t)
	addr := b.ListenerAddr("SASL_SSL")
	sec := func(pass string) []string {
		return []string{"-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=carol", "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + ca.File}
	}
	createTopic(t, b.ListenerAddr("PLAINTEXT"), "kcat-scram", 1, nil)
	runKcat(t, []byte("one\ntwo\nthree\n"), append(sec("carol-pass"), "-P", "-t", "kcat-scram")...)
	out := runKcat(t, nil, append(sec("carol-pass"), "-C", "-t", "kcat-scram", "-o", "beginning", "-e", "-q")...)
	if got := strings.Fields(string(out)); strings.Join(got, ",") != "one,two,three" {
		t.Errorf("kcat consumed %q", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), append(sec("wrong"), "-L", "-m", "5")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("kcat with a wrong password listed metadata")
	}
	if !strings.Contains(stderr.String(), "Authentication failed") && !strings.Contains(stderr.String(), "SASL authentication error") {
		t.Errorf("kcat with a wrong password: %s, want an authentication failure", stderr.String())
	}
	// The broker still serves the right password.
	runKcat(t, nil, append(sec("carol-pass"), "-L")...)
}

// sarama with PLAIN over TLS (SASL_SSL): produce and consume.
func TestSecuritySaramaPlainTLS(t *testing.T) {
	b, ca := secureBroker(t)
	tcfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tcfg
	cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	cfg.Producer.Return.Successes = true
	cfg.Metadata.AllowAutoTopicCreation = true
	addr := b.ListenerAddr("SASL_SSL")
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-tls", Value: sarama.StringEncoder("hello over TLS")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition("sarama-tls", part, off)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Value) != "hello over TLS" {
			t.Errorf("consumed %q", m.Value)
		}
	case err := <-pc.Errors():
		t.Fatal(err)
	case <-time.After(waitTimeout):
		t.Fatal("nothing consumed")
	}

	bad := sarama.NewConfig()
	*bad = *cfg
	bad.Net.SASL.Password = "wrong"
	if _, err := sarama.NewClient([]string{addr}, bad); err == nil || !strings.Contains(err.Error(), "SASL") {
		t.Errorf("sarama with a wrong password: %v, want a SASL failure", err)
	}
}

// Three brokers whose inter-broker listener is SASL_SSL: followers
// replicate over TLS with PLAIN credentials, so acks=all with
// min.insync.replicas=3 succeeds; clients use that listener too.
func TestSecurityInterBrokerSASLSSL(t *testing.T) {
	ca := tlstest.NewCA(t, "weir cluster CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := writeFile(t, "jaas.conf", []byte(`user_broker="broker-pass" user_app="app-pass"`))
	c := brokertest.StartMemCluster(t, 3, func(cfg *broker.Config) {
		cfg.Security = broker.Security{
			Listeners:   "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
			ProtocolMap: "INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT", InterBrokerListener: "INTERNAL",
			CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.File, PlainUsersFile: users,
			InterBrokerSASLMechanism: "PLAIN", InterBrokerUser: "broker", InterBrokerPass: "broker-pass",
		}
	})
	tcfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	cl := secClient(t, c.Addrs()[0], kgo.DialTLSConfig(tcfg), kgo.SASL(plainAuth("app", "app-pass")),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	min3 := "3"
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &min3}, "replicated"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "acks=all with three in-sync replicas", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "replicated", Value: []byte("x")}).FirstErr() == nil
	})
}

func plainAuth(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}
