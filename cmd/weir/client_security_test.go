package main

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// weir produce and consume over SASL_SSL with PLAIN; a wrong password fails.
func TestProduceConsumeSASLSSL(t *testing.T) {
	ca := tlstest.NewCA(t, "cli CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(users, []byte(`user_cli="cli-pass"`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t, "", func(c *broker.Config) {
		c.Security = broker.Security{Listeners: "SASL_SSL://127.0.0.1:0", CertFile: srv.CertFile, KeyFile: srv.KeyFile,
			CAFile: ca.File, PlainUsersFile: users}
	})
	sec := []string{"-b", b.ListenerAddr("SASL_SSL"), "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN",
		"--sasl-user", "cli", "--ssl-ca-file", ca.File, "-t", "cli-sec", "--timeout", "10s"}
	mustCLI(t, "a\nb\n", append([]string{"produce", "--sasl-password", "cli-pass"}, sec...)...)
	out, _ := mustCLI(t, "", append([]string{"consume", "--sasl-password", "cli-pass", "-e"}, sec...)...)
	if out != "a\nb\n" {
		t.Errorf("consumed %q", out)
	}
	_, stderr, err := cli(t, "", append([]string{"consume", "--sasl-password", "wrong", "-e"}, sec...)...)
	if err == nil || !strings.Contains(stderr+err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: %v %s, want SASL_AUTHENTICATION_FAILED", err, stderr)
	}
}

// The security settings come from flags and from the config file, flags
// winning, as every broker setting.
func TestBrokerSecuritySettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(file, []byte("listeners: PLAINTEXT://:9092,SASL_SSL://:9093\nssl-client-auth: required\n"+
		"sasl-enabled-mechanisms: [SCRAM-SHA-512]\nssl-ktls: off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := resolve(t, "--config", file, "--ssl-client-auth", "requested", "--ssl-cert-file", "c.pem")
	if err != nil {
		t.Fatal(err)
	}
	sec := s.securitySettings.config()
	if sec.Listeners != "PLAINTEXT://:9092,SASL_SSL://:9093" || sec.ClientAuth != "requested" || sec.CertFile != "c.pem" ||
		len(sec.SASLMechanisms) != 1 || sec.SASLMechanisms[0] != "SCRAM-SHA-512" || sec.KTLS != "off" {
		t.Errorf("security settings %+v", sec)
	}
}
