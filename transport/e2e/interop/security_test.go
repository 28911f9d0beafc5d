package interop_test

import (
	"context"
	"crypto/x509/pkix"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// scramBroker starts a broker with a PLAINTEXT listener (for the checks)
// and a SASL_SSL one, whose certificate a test CA signs, and SCRAM users
// sha256 (SCRAM-SHA-256) and sha512 (SCRAM-SHA-512), each with password
// "<name>-pass". It returns the broker and the CA's PEM file.
func scramBroker(t *testing.T) (*broker.Broker, string) {
	t.Helper()
	ca := tlstest.NewCA(t, "weir interop CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	b := brokertest.Start(t, t.TempDir(), func(c *broker.Config) {
		c.Security = broker.Security{
			Listeners: "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			CertFile:  srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.File,
		}
	})
	adm := kadm.NewClient(newClient(t, b.ListenerAddr("PLAINTEXT")))
	res, err := adm.AlterUserSCRAMs(context.Background(), nil, []kadm.UpsertSCRAM{
		{User: "sha256", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "sha256-pass"},
		{User: "sha512", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "sha512-pass"},
	})
	if err != nil || res["sha256"].Err != nil || res["sha512"].Err != nil {
		t.Fatalf("alter SCRAM credentials: %v %+v", err, res)
	}
	return b, ca.File
}

// scramCase is one SCRAM login: a mechanism (KafkaJS's spelling is its
// lower case), a user and a password.
type scramCase struct{ mech, user, pass string }

var scramCases = []scramCase{
	{"SCRAM-SHA-256", "sha256", "sha256-pass"},
	{"SCRAM-SHA-512", "sha512", "sha512-pass"},
}

// testSCRAM runs a client's scram operation over SASL_SSL for each
// mechanism (produce five records to partition 0, read them back as a
// group), checks the broker's side, then scram-refused with a wrong
// password (the client's SASL authentication error), then scram again: the
// broker still serves the right password.
func testSCRAM(t *testing.T, b *broker.Broker, op func(t *testing.T, c scramCase, op, topic string)) {
	plain := b.ListenerAddr("PLAINTEXT")
	for i, c := range append(scramCases, scramCase{"SCRAM-SHA-512", "sha512", "wrong"}, scramCases[0]) {
		name := c.mech
		switch {
		case c.pass == "wrong":
			name = "wrong-password"
		case i >= len(scramCases):
			name = "after-refusal-" + c.mech
		}
		t.Run(name, func(t *testing.T) {
			topic := "scram-" + strings.ToLower(name)
			if c.pass == "wrong" {
				op(t, c, "scram-refused", topic)
				return
			}
			op(t, c, "scram", topic)
			if _, ends := offsets(t, plain, topic); len(ends) != 1 || ends[0] != 5 {
				t.Errorf("%s: log ends at %v, want 5 records in partition 0", topic, ends)
			}
			if got := committed(t, plain, topic+"-g", topic, 1); got[0] != 5 {
				t.Errorf("group %s-g committed %v, want 5", topic, got)
			}
		})
	}
}

// TestKafkaJSSCRAM: KafkaJS 2.2.4 over SASL_SSL (the test CA passed as
// ssl.ca) with SCRAM-SHA-256 and SCRAM-SHA-512 produces and consumes; a
// wrong password fails with KafkaJSSASLAuthenticationError and the broker
// serves the next client.
func TestKafkaJSSCRAM(t *testing.T) {
	node := kafkajs(t)
	b, caFile := scramBroker(t)
	addr := b.ListenerAddr("SASL_SSL")
	ca, err := filepath.Abs(caFile)
	if err != nil {
		t.Fatal(err)
	}
	testSCRAM(t, b, func(t *testing.T, c scramCase, op, topic string) {
		runEnv(t, kafkajsDir, []string{"WEIR_SSL_CA=" + ca, "WEIR_SASL_MECHANISM=" + strings.ToLower(c.mech),
			"WEIR_SASL_USER=" + c.user, "WEIR_SASL_PASSWORD=" + c.pass}, node, "ops.js", addr, op, topic)
	})
}

// TestConfluentKafkaSCRAM: confluent-kafka 1.7.0 (librdkafka 2.0.2) over
// SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512 produces and consumes; a
// wrong password fails with librdkafka's authentication error and the broker
// serves the next client.
func TestConfluentKafkaSCRAM(t *testing.T) {
	py := pythonWith(t, "confluent_kafka", "python3-confluent-kafka")
	b, ca := scramBroker(t)
	addr := b.ListenerAddr("SASL_SSL")
	script := filepath.Join("testdata", "python", "confluent_scram.py")
	testSCRAM(t, b, func(t *testing.T, c scramCase, op, topic string) {
		runEnv(t, "", []string{"WEIR_SSL_CA=" + ca, "WEIR_SASL_MECHANISM=" + c.mech,
			"WEIR_SASL_USER=" + c.user, "WEIR_SASL_PASSWORD=" + c.pass}, py, script, addr, op, topic)
	})
}
