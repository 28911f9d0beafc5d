// Package tlsfiles builds crypto/tls configurations from PEM files, as
// Kafka's ssl.* settings name them: a certificate and key (ssl.keystore),
// a CA bundle to verify peers (ssl.truststore), and whether clients must
// present a certificate (ssl.client.auth = none, requested, required).
//
// The server's certificate and key are reloaded when either file changes
// (size or modification time, checked at most once a second, on a
// handshake), so a renewed certificate is served without a restart; a
// pair that fails to load keeps the last good one and logs why. Only
// TLS 1.2 and 1.3 are offered, and in TLS 1.2 only ECDHE suites with
// AES-GCM or ChaCha20-Poly1305 (crypto/tls's TLS 1.3 suites are all
// modern). The client CA bundle is read once, at start.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrConfig: a file is missing or does not decode, or a setting is unknown.
var ErrConfig = errors.New("tlsfiles: invalid TLS settings")

// ClientAuth is Kafka's ssl.client.auth.
type ClientAuth string

// Kafka's ssl.client.auth values.
const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// Server are a listener's TLS settings.
type Server struct {
	CertFile, KeyFile string // PEM: the certificate chain and its key
	// ClientCAFile (PEM) verifies client certificates; required unless
	// ClientAuth is none.
	ClientCAFile string
	ClientAuth   ClientAuth // default none
	Logger       *slog.Logger
}

// modernSuites are the TLS 1.2 suites offered (TLS 1.3's are not
// configurable and all modern).
var modernSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// ServerConfig returns the tls.Config of a listener: the certificate is
// loaded now (an error if it does not load) and reloaded as it changes.
func ServerConfig(s Server) (*tls.Config, error) {
	if s.CertFile == "" || s.KeyFile == "" {
		return nil, fmt.Errorf("%w: a TLS listener needs a certificate and a key file", ErrConfig)
	}
	s.Logger = orDiscard(s.Logger)
	r := &reloader{cert: s.CertFile, key: s.KeyFile, log: s.Logger, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   modernSuites,
		GetCertificate: r.get,
	}
	switch ClientAuth(strings.ToLower(string(s.ClientAuth))) {
	case "", ClientAuthNone:
		cfg.ClientAuth = tls.NoClientCert
	case ClientAuthRequested:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("%w: client auth %q: want none, requested or required", ErrConfig, s.ClientAuth)
	}
	if cfg.ClientAuth != tls.NoClientCert {
		if s.ClientCAFile == "" {
			return nil, fmt.Errorf("%w: client auth %s needs a client CA file", ErrConfig, s.ClientAuth)
		}
		pool, err := LoadPool(s.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// LoadPool reads a PEM CA bundle.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %w", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrConfig, file)
	}
	return pool, nil
}

// Client are a client's TLS settings (weir produce/consume, the harness,
// the inter-broker listener).
type Client struct {
	CAFile            string // PEM bundle verifying the broker; empty: the system's
	CertFile, KeyFile string // a client certificate for mTLS; optional
	ServerName        string // default: the host dialled
	Insecure          bool   // skip verifying the broker (tests only)
}

// ClientConfig returns the tls.Config of a client.
func ClientConfig(c Client) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.Insecure}
	if c.CAFile != "" {
		pool, err := LoadPool(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and key files", ErrConfig)
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrConfig, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// orDiscard returns l, or a logger that discards when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// reloader serves a certificate and key pair, reloading them when their
// files change.
type reloader struct {
	cert, key string
	log       *slog.Logger
	now       func() time.Time

	mu      sync.Mutex
	current *tls.Certificate
	stamp   string    // sizes and mtimes of both files when loaded
	checked time.Time // last look at the files
}

// reloadEvery bounds how often the files are looked at.
const reloadEvery = time.Second

func stampOf(files ...string) (string, error) {
	var b strings.Builder
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

func (r *reloader) load() error {
	stamp, err := stampOf(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("%w: certificate: %w", ErrConfig, err)
	}
	cert, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		return fmt.Errorf("%w: certificate %s, key %s: %w", ErrConfig, r.cert, r.key, err)
	}
	r.mu.Lock()
	r.current, r.stamp, r.checked = &cert, stamp, r.now()
	r.mu.Unlock()
	return nil
}

// get is tls.Config.GetCertificate: the current pair, reloaded first if
// the files changed since.
func (r *reloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	due := r.now().Sub(r.checked) >= reloadEvery
	if due {
		r.checked = r.now()
	}
	cur, stamp := r.current, r.stamp
	r.mu.Unlock()
	if due {
		if now, err := stampOf(r.cert, r.key); err == nil && now != stamp {
			if err := r.load(); err != nil {
				r.log.Error("tlsfiles: reloading the certificate failed, serving the previous one", "err", err)
			} else {
				r.log.Info("tlsfiles: certificate reloaded", "cert", r.cert)
				r.mu.Lock()
				cur = r.current
				r.mu.Unlock()
			}
		}
	}
	return cur, nil
}
