package main

import (
	"bytes"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// bootstrapSecuritySpec is one short point against a bootstrap target
// whose listener is SASL_SSL: the broker, the password, the CA.
const bootstrapSecuritySpec = `
name: bootstrap-sasl-ssl
seed: 3
repetitions: 1
target:
  bootstrap: %q
  security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, sasl_user: run, sasl_password: %q, ssl_ca_file: %q}
workload:
  partitions: 2
  message_size: 256
  producers: 1
  consumers: 1
  warmup: 200ms
  duration: 700ms
`

// weir run against an external broker's SASL_SSL listener, as the spec's
// target.security says (weir run has no flags for it: the spec holds the
// target): the load's clients log in and move records both ways; with a
// wrong password the repetition fails with the broker's SASL error.
func TestRunCmdBootstrapSASLSSL(t *testing.T) {
	ca := tlstest.NewCA(t, "run CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(users, []byte(`user_run="run-pass"`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t, "", func(c *broker.Config) {
		c.Security = broker.Security{Listeners: "SASL_SSL://127.0.0.1:0", CertFile: srv.CertFile, KeyFile: srv.KeyFile, PlainUsersFile: users}
	})
	runSpec := func(password string) *result.Rep {
		t.Helper()
		dir := t.TempDir()
		path, out := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "out")
		if err := os.WriteFile(path, fmt.Appendf(nil, bootstrapSecuritySpec, b.ListenerAddr("SASL_SSL"), password, ca.File), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := run([]string{"run", path, "--out", out}, &stdout, &stderr); err != nil {
			t.Fatalf("weir run: %v\n%s", err, stderr.String())
		}
		r, err := result.Read(filepath.Join(out, report.RunFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Sections) != 1 || len(r.Sections[0].Points) != 1 || len(r.Sections[0].Points[0].Reps) != 1 {
			t.Fatalf("sections %+v: want one point of one repetition", r.Sections)
		}
		return &r.Sections[0].Points[0].Reps[0]
	}

	rp := runSpec("run-pass")
	m := rp.Metrics
	if rp.Error != "" || m[result.MsgsProduced] <= 0 || m[result.MsgsConsumed] != m[result.MsgsProduced] {
		t.Errorf("error %q; produced %v records, consumed %v", rp.Error, m[result.MsgsProduced], m[result.MsgsConsumed])
	}
	if rp := runSpec("wrong"); !strings.Contains(rp.Error, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("wrong password: repetition error %q, want SASL_AUTHENTICATION_FAILED", rp.Error)
	}
}
