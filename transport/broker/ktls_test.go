package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/tlsfiles/tlstest"
)

// Security.KTLS reaches the TLS listeners: with auto, on a kernel without
// kTLS, the SSL listener's self-test fails and /metrics says so with the
// reason; off says "kTLS off".
func TestKTLSSettingReachesListeners(t *testing.T) {
	ca := tlstest.NewCA(t, "broker ktls CA")
	pair := ca.Issue("broker", pkix.Name{CommonName: "localhost"}, tlstest.Options{})
	want := map[string]string{"off": `path="copy",reason="kTLS off"`}
	if ktls.Available() != nil {
		want[""] = `path="copy",reason="kernel has no tls ULP"`
	} else {
		want[""] = `path="ktls",reason=""`
	}
	for mode, series := range want {
		t.Run("ktls="+mode, func(t *testing.T) {
			cfg := testConfig(t, vfs.NewMem())
			cfg.MetricsListen = "127.0.0.1:0"
			cfg.Security = Security{Listeners: "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
				CertFile: pair.CertFile, KeyFile: pair.KeyFile, KTLS: mode}
			b := start(t, cfg)
			// ServeListener decides (self-test) before it serves: a
			// handshake answered means the path is decided.
			c, err := tls.Dial("tcp", b.ListenerAddr("SSL"), &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			line := `weir_tls_fetch_path{listener="SSL",` + series + `} 1`
			if !strings.Contains(string(body), line) {
				t.Errorf("/metrics lacks %s; fetch path %q", line, b.server.FetchPaths()["SSL"])
			}
		})
	}
}
