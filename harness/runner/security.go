package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/transport/ktls"
	"github.com/weir-broker/weir/transport/tlsfiles"
)

// securityOpts turns the target's security settings into client options
// (nil settings: PLAINTEXT, no options).
func securityOpts(s *spec.Security) ([]kgo.Opt, error) { return clientOpts(s, "") }

// clientOpts is securityOpts verifying the brokers' certificates for
// serverName ("": the address dialed).
func clientOpts(s *spec.Security, serverName string) ([]kgo.Opt, error) {
	if s == nil {
		return nil, nil
	}
	p := strings.ToUpper(s.Protocol)
	if p == "" {
		p = "PLAINTEXT"
	}
	var opts []kgo.Opt
	switch p {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		cfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: s.SSLCAFile, CertFile: s.SSLCertFile, KeyFile: s.SSLKeyFile, ServerName: serverName})
		if err != nil {
			return nil, fmt.Errorf("runner: target.security: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	default:
		return nil, fmt.Errorf("runner: target.security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s.Protocol)
	}
	if strings.HasPrefix(p, "SASL") {
		switch m := strings.ToUpper(s.SASLMechanism); m {
		case "", "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("runner: target.security.sasl_mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
		}
	}
	return opts, nil
}

// The user the load's clients log in as on a SASL listener the runner
// sets up, and its mechanism (the password is drawn per point).
const (
	runSASLUser      = "weir-run"
	runSASLMechanism = "SCRAM-SHA-512"
)

// listenerSecurity is what a point's broker and clients need for a
// listener other than PLAINTEXT (Workload.SecurityProtocol): the broker's
// extra flags, and the clients' settings.
type listenerSecurity struct {
	protocol string
	flags    []string      // the broker's: certificate, key, SASL mechanisms
	client   spec.Security // the load's clients'
}

// newListenerSecurity makes, in dir (created), a throwaway CA and a server
// certificate it signs for 127.0.0.1 and localhost, and for SASL a random
// password for the SCRAM user createSASLUser creates once the broker is up.
// PLAINTEXT (or "") returns nil.
func newListenerSecurity(protocol, dir string) (*listenerSecurity, error) {
	if protocol == "" || protocol == "PLAINTEXT" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner: security_protocol %s: %w", protocol, err)
	}
	ls := &listenerSecurity{protocol: protocol, client: spec.Security{Protocol: protocol}}
	if strings.HasSuffix(protocol, "SSL") {
		ca, cert, key, err := writeThrowawayCerts(dir)
		if err != nil {
			return nil, fmt.Errorf("runner: security_protocol %s: certificates: %w", protocol, err)
		}
		ls.flags = append(ls.flags, "--ssl-cert-file", cert, "--ssl-key-file", key)
		ls.client.SSLCAFile = ca
	}
	if strings.HasPrefix(protocol, "SASL") {
		pass := make([]byte, 16)
		if _, err := rand.Read(pass); err != nil {
			return nil, err
		}
		ls.flags = append(ls.flags, "--sasl-enabled-mechanisms", runSASLMechanism)
		ls.client.SASLMechanism, ls.client.SASLUser, ls.client.SASLPassword = runSASLMechanism, runSASLUser, hex.EncodeToString(pass)
	}
	return ls, nil
}

// ready prepares started brokers for the load's clients: for SASL it
// creates the SCRAM user through a broker's PLAINTEXT listener
// (plaintext, an address the runner keeps to itself; in a cluster the
// user is stored in ZooKeeper and every broker watches it), then polls
// each broker's secure listener (secure) until the clients' settings get
// through, with a deadline. It returns the clients' options, which verify
// the brokers' certificates for localhost (the name the throwaway
// certificate has whatever address a broker listens on: a netns cluster's
// brokers are not on loopback).
func (ls *listenerSecurity) ready(ctx context.Context, plaintext string, secure []string) ([]kgo.Opt, error) {
	opts, err := clientOpts(&ls.client, "localhost")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if ls.client.SASLUser != "" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(plaintext))
		if err != nil {
			return nil, err
		}
		res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: ls.client.SASLUser,
			Mechanism: kadm.ScramSha512, Iterations: 4096, Password: ls.client.SASLPassword}})
		cl.Close()
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: create the SCRAM user for %s: %w", ErrBroker, ls.protocol, err)
		}
	}
	// The credentials reach each broker's authenticator through the
	// store's watch: poll each until a client with the load's settings is
	// served.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, addr := range secure {
		for {
			// Seeded with the one address, Ping asks that broker.
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(time.Second)}, opts...)...)
			if err != nil {
				return nil, err
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			err = cl.Ping(pctx)
			pcancel()
			cl.Close()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: the %s listener on %s does not serve the load's settings: %w", ErrBroker, ls.protocol, addr, err)
			case <-tick.C:
			}
		}
	}
	return opts, nil
}

// tlsFetchPath is run.Env.TLSFetch: weir's Fetch sends through crypto/tls
// (the copy path) on TLS listeners, and whether this kernel has kTLS.
func tlsFetchPath() string {
	if err := ktls.Available(); err != nil {
		ulp, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp")
		return fmt.Sprintf("copy (kTLS unavailable: %v; tcp_available_ulp: %q)", err, strings.TrimSpace(string(ulp)))
	}
	return "copy (this kernel has kTLS, but weir's Fetch does not use it yet)"
}

// writeThrowawayCerts writes a CA (ca.pem) and a server certificate and
// key it signs (broker.pem, broker.key) for 127.0.0.1, ::1 and localhost,
// valid for a day, into dir: ECDSA P-256, as crypto/tls's modern defaults
// like. Nothing else trusts the CA; its key is not kept.
func writeThrowawayCerts(dir string) (caFile, certFile, keyFile string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	now := time.Now()
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "weir run throwaway CA", Organization: []string{"weir harness"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "broker.pem"), filepath.Join(dir, "broker.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{caFile, "CERTIFICATE", caDER}, {certFile, "CERTIFICATE", der}, {keyFile, "PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return "", "", "", err
		}
	}
	return caFile, certFile, keyFile, nil
}

// usesTLS reports whether a point of the sections has its clients on a TLS
// listener (security_protocol SSL or SASL_SSL).
func usesTLS(sections []spec.Section) bool {
	for _, sec := range sections {
		for _, p := range sec.Points {
			if strings.HasSuffix(p.Workload.SecurityProtocol, "SSL") {
				return true
			}
		}
	}
	return false
}
