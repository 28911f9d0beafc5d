package tlsfiles

import (
	"bytes"
	"crypto/x509/pkix"
	"os"
	"testing"
	"time"

	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// A renewed certificate is served once its files change (checked at most
// once per reloadEvery); a broken pair keeps the last good one.
func TestCertificateReload(t *testing.T) {
	ca := tlstest.NewCA(t, "reload CA")
	a := ca.Issue("a", pkix.Name{CommonName: "a"}, tlstest.Options{})
	b := ca.Issue("b", pkix.Name{CommonName: "b"}, tlstest.Options{})
	now := time.Unix(1_700_000_000, 0)
	r := &reloader{cert: a.CertFile, key: a.KeyFile, now: func() time.Time { return now }}
	r.log = orDiscard(nil)
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	leaf := func() []byte {
		c, err := r.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	if !bytes.Equal(leaf(), a.Cert.Raw) {
		t.Fatal("not serving the first certificate")
	}
	copyFile(t, b.CertFile, a.CertFile)
	copyFile(t, b.KeyFile, a.KeyFile)
	if !bytes.Equal(leaf(), a.Cert.Raw) {
		t.Error("reloaded before reloadEvery passed")
	}
	now = now.Add(reloadEvery)
	if !bytes.Equal(leaf(), b.Cert.Raw) {
		t.Error("the renewed certificate is not served")
	}
	if err := os.WriteFile(a.CertFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(reloadEvery)
	if !bytes.Equal(leaf(), b.Cert.Raw) {
		t.Error("a broken certificate file replaced the last good one")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// A distinct modification time even on coarse clocks.
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(time.Hour)
	if err := os.Chtimes(to, mt, mt); err != nil {
		t.Fatal(err)
	}
}
