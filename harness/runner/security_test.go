package runner

import (
	"context"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/harness/spec"
	wbroker "github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// The target's security settings make clients that reach a SASL_SSL
// listener; bad settings are errors naming the field.
func TestSecurityOpts(t *testing.T) {
	for _, bad := range []spec.Security{{Protocol: "TLS"}, {Protocol: "SASL_PLAINTEXT", SASLMechanism: "GSSAPI"},
		{Protocol: "SSL", SSLCAFile: "/nonexistent"}} {
		if _, err := securityOpts(&bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	ca := tlstest.NewCA(t, "harness CA")
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte(`user_load="load-pass"`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.Start(t, "", func(c *wbroker.Config) {
		c.Security = wbroker.Security{Listeners: "SASL_SSL://127.0.0.1:0", CertFile: srv.CertFile, KeyFile: srv.KeyFile, PlainUsersFile: users}
	})
	opts, err := securityOpts(&spec.Security{Protocol: "sasl_ssl", SASLUser: "load", SASLPassword: "load-pass", SSLCAFile: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.ListenerAddr("SASL_SSL"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping over SASL_SSL: %v", err)
	}
}
