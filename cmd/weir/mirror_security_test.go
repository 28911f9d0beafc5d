package main

import (
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// secureBroker starts a broker with a PLAINTEXT listener (for the test's
// own reads and writes) and a SASL_SSL one (PLAIN users from usersFile,
// a certificate of ca): it returns the two addresses.
func secureBroker(t *testing.T, ca *tlstest.CA, usersFile string) (plain, saslSSL string) {
	t.Helper()
	srv := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	b := brokertest.Start(t, "", func(c *broker.Config) {
		c.Security = broker.Security{Listeners: "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			CertFile: srv.CertFile, KeyFile: srv.KeyFile, PlainUsersFile: usersFile}
	})
	return b.ListenerAddr("PLAINTEXT"), b.ListenerAddr("SASL_SSL")
}

// TestMirrorCLISASLSSL runs `weir mirror` (copying, then forwarding)
// between two brokers it reaches only through their SASL_SSL listeners:
// the security settings come from the --source-*/--target-* flags, the
// passwords from the --config file. Every record is copied to the same
// partition; `weir mirror status` and `weir mirror translate --commit`
// work over SASL_SSL too, and with a wrong target password status fails
// and says why.
func TestMirrorCLISASLSSL(t *testing.T) {
	ca := tlstest.NewCA(t, "mirror CLI CA")
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte(`user_mirror="secret"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, forward := range []bool{false, true} {
		t.Run(fmt.Sprintf("forward=%v", forward), func(t *testing.T) {
			const topic, parts, n = "orders", 2, 40
			srcPlain, srcSec := secureBroker(t, ca, users)
			dstPlain, dstSec := secureBroker(t, ca, users)
			produceNumbered(t, srcPlain, topic, parts, n)
			mustCLI(t, "", "consume", "-b", srcPlain, "-t", topic, "-G", "reporting", "-e")

			cfgPath := filepath.Join(t.TempDir(), "mirror.yaml")
			cfg := "source: " + srcSec + "\ntarget: " + dstSec + "\ntopics: " + topic + "\ncommit-interval: 50ms\n" +
				"refresh-interval: 100ms\noffset-sync-interval: 10\nsource-sasl-password: secret\ntarget-sasl-password: secret\n"
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			sec := []string{"--config", cfgPath,
				"--source-security-protocol", "SASL_SSL", "--source-sasl-mechanism", "PLAIN", "--source-sasl-user", "mirror", "--source-ssl-ca-file", ca.File,
				"--target-security-protocol", "sasl_ssl", "--target-sasl-user", "mirror", "--target-ssl-ca-file", ca.File}
			args := append([]string{"mirror", "--progress", "never"}, sec...)
			if forward {
				args = append(args, "--forward")
			}

			runMirrorUntil(t, args, dstPlain, topic, parts, int64(n))

			for p := range parts {
				got, _ := mustCLI(t, "", "consume", "-b", dstPlain, "-t", topic, "-p", fmt.Sprint(p), "-e")
				want, _ := mustCLI(t, "", "consume", "-b", srcPlain, "-t", topic, "-p", fmt.Sprint(p), "-e")
				if strings.Count(want, "\n") != n || got != want {
					t.Errorf("partition %d: the target holds\n%q\nthe source\n%q", p, got, want)
				}
			}

			out, _ := mustCLI(t, "", append([]string{"mirror", "status"}, sec...)...)
			if got, want := strings.Join(strings.Fields(out), " "), fmt.Sprintf("total %d 0", parts); !strings.Contains(got, want) {
				t.Errorf("mirror status over SASL_SSL lacks %q:\n%s", want, out)
			}
			out, _ = mustCLI(t, "", append([]string{"mirror", "translate", "--group", "reporting", "--commit"}, sec...)...)
			if !strings.Contains(out, "committed") {
				t.Errorf("translate --commit over SASL_SSL did not say what it committed:\n%s", out)
			}
			got := brokertest.CommittedOffsets(t, dstPlain, "reporting", topic, parts)
			was := brokertest.CommittedOffsets(t, srcPlain, "reporting", topic, parts)
			for p := range parts {
				// Same offsets on both sides: at most the sync interval behind.
				if was[p] != n {
					t.Fatalf("partition %d: group reporting at %d on the source, want %d", p, was[p], n)
				}
				if got[p] > was[p] || got[p] < was[p]-10 {
					t.Errorf("partition %d: translated %d for source offset %d, want within 10 at or below it", p, got[p], was[p])
				}
			}
			_, _, err := cli(t, "", append([]string{"mirror", "status", "--timeout", "10s", "--target-sasl-password", "wrong"}, sec...)...)
			if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Errorf("mirror status with a wrong target password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

// The security flags of each side are checked before any connection, by
// `weir mirror` and its subcommands, from the command line and from the
// --config file; each error names the prefixed flag at fault.
func TestMirrorSecurityBadFlags(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(cfgPath, []byte("source-security-protocol: TLS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing-ca.pem")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--source", "127.0.0.1:1", "--target", "127.0.0.1:2", "--topics", "a"}
	for _, tc := range []struct {
		cmd  []string
		args []string
		flag string // the error names it
	}{
		{[]string{"mirror"}, []string{"--source-security-protocol", "TLS"}, "--source-security-protocol"},
		{[]string{"mirror"}, []string{"--target-security-protocol", "SASL_SSL"}, "--target-sasl-user"},
		{[]string{"mirror"}, []string{"--source-security-protocol", "SASL_PLAINTEXT", "--source-sasl-user", "u",
			"--source-sasl-mechanism", "GSSAPI"}, "--source-sasl-mechanism"},
		{[]string{"mirror"}, []string{"--target-security-protocol", "SSL", "--target-ssl-ca-file", missing}, "--target-ssl-ca-file"},
		{[]string{"mirror"}, []string{"--source-security-protocol", "SSL", "--source-ssl-ca-file", notPEM}, "--source-ssl-ca-file"},
		{[]string{"mirror"}, []string{"--target-security-protocol", "SSL", "--target-ssl-cert-file", notPEM}, "--target-ssl-cert-file"},
		{[]string{"mirror"}, []string{"--config", cfgPath}, "--source-security-protocol"},
		{[]string{"mirror", "status"}, []string{"--target-security-protocol", "PLAIN"}, "--target-security-protocol"},
		{[]string{"mirror", "status"}, []string{"--config", cfgPath}, "--source-security-protocol"},
		{[]string{"mirror", "translate", "--group", "g"}, []string{"--source-security-protocol", "SASL_SSL"}, "--source-sasl-user"},
		{[]string{"mirror", "translate", "--group", "g"}, []string{"--target-security-protocol", "SSL",
			"--target-ssl-ca-file", missing}, "--target-ssl-ca-file"},
	} {
		args := append(append(append([]string{}, tc.cmd...), base...), tc.args...)
		_, _, err := cli(t, "", args...)
		if !errors.Is(err, errBadFlag) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("weir %s: error %v, want a bad flag naming %s", strings.Join(args, " "), err, tc.flag)
		}
	}
}
