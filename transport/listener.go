package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/weir-broker/weir/transport/ktls"
)

// SecurityProtocol is a listener's security protocol, Kafka's names.
type SecurityProtocol string

// The four security protocols of Kafka (security.protocol,
// listener.security.protocol.map).
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// ParseSecurityProtocol accepts Kafka's names, in any case.
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	switch p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(s))); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, nil
	}
	return "", fmt.Errorf("%w: security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", ErrConfig, s)
}

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol authenticates clients with SASL.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// DefaultHandshakeTimeout bounds a TLS handshake: a client that stops in the
// middle of one is closed after it.
const DefaultHandshakeTimeout = 10 * time.Second

// DefaultAuthTimeout bounds SASL authentication on a SASL listener: a client
// that has not authenticated this long after its connection was set up (the
// TLS handshake done) is closed, so one that stops halfway through the
// exchange does not hold its connection until MaxIdle.
const DefaultAuthTimeout = 10 * time.Second

// Listener describes how connections accepted on one listening socket are
// secured (Server.ServeListener). The zero value is Kafka's default
// listener: PLAINTEXT, named "PLAINTEXT".
type Listener struct {
	// Name is the listener's name (Kafka's listener name, such as
	// "INTERNAL"); it appears in logs. Default: the protocol's name.
	Name string
	// Protocol is the listener's security protocol. Default Plaintext.
	Protocol SecurityProtocol
	// TLS configures the server side of TLS; required for SSL and
	// SASL_SSL. Its ClientAuth decides mTLS: a verified client
	// certificate's subject becomes the connection's principal on SSL
	// listeners (see principalFromCert).
	TLS *tls.Config
	// HandshakeTimeout bounds the TLS handshake. Default
	// DefaultHandshakeTimeout; negative: none.
	HandshakeTimeout time.Duration
	// AuthTimeout bounds, on SASL listeners, the time from the end of the
	// TLS handshake (or the accept) to the end of SASL authentication.
	// Default DefaultAuthTimeout; negative: none.
	AuthTimeout time.Duration
	// Advertised is the host:port Metadata, FindCoordinator and
	// DescribeCluster give clients of this listener for this broker
	// (Kafka answers each listener with its own advertised address).
	// Empty: the address the node advertises.
	Advertised string
	// KTLS decides, on TLS listeners, whether connections hand their
	// writes to the kernel's TLS (kTLS, package ktls) after the handshake,
	// so that Fetch keeps sendfile: KTLSAuto (the default) runs a
	// loopback self-test when the listener starts and uses kTLS only if
	// it passes; KTLSOff keeps the copy path.
	KTLS KTLSMode

	// ulp is the kernel's TLS ULP (nil: ktls.Kernel); tests put an
	// emulation there.
	ulp ktls.ULP
	// Decided by ServeListener: the Fetch path, and for kTLS the
	// tls.Config of ktls.Server.
	path    fetchPath
	ktlsCfg *tls.Config
}

// KTLSMode is Listener.KTLS: "auto" (or empty) or "off".
type KTLSMode string

// The kTLS modes.
const (
	KTLSAuto KTLSMode = "auto"
	KTLSOff  KTLSMode = "off"
)

// ParseKTLSMode accepts auto (or empty) and off.
func ParseKTLSMode(s string) (KTLSMode, error) {
	switch m := KTLSMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "", KTLSAuto:
		return KTLSAuto, nil
	case KTLSOff:
		return KTLSOff, nil
	}
	return "", fmt.Errorf("%w: ssl ktls %q: want auto or off", ErrConfig, s)
}

// fetchPath is how a listener's Fetch responses leave.
type fetchPath struct {
	ktls   bool   // kTLS: writes (and sendfile) through the kernel's TLS
	reason string // why not kTLS (copy path), "" with kTLS
	detail string // the self-test's whole error
}

func (p fetchPath) String() string {
	if p.ktls {
		return "kTLS (sendfile through the kernel's TLS; self-test passed)"
	}
	if p.detail != "" {
		return "copy (kTLS unavailable: " + p.detail + ")"
	}
	return "copy (" + p.reason + ")"
}

func (l *Listener) validate() error {
	if l.Protocol == "" {
		l.Protocol = Plaintext
	}
	if _, err := ParseSecurityProtocol(string(l.Protocol)); err != nil {
		return err
	}
	if l.Name == "" {
		l.Name = string(l.Protocol)
	}
	if l.Protocol.TLS() && l.TLS == nil {
		return fmt.Errorf("%w: listener %s (%s) needs a TLS config", ErrConfig, l.Name, l.Protocol)
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if l.AuthTimeout == 0 {
		l.AuthTimeout = DefaultAuthTimeout
	}
	mode, err := ParseKTLSMode(string(l.KTLS))
	if err != nil {
		return err
	}
	l.KTLS = mode
	if l.Advertised != "" {
		if _, _, err := net.SplitHostPort(l.Advertised); err != nil {
			return fmt.Errorf("%w: listener %s: advertised %q: %v", ErrConfig, l.Name, l.Advertised, err)
		}
	}
	return nil
}

// ServeListener is Serve for a listener secured as lc says: TLS listeners
// wrap each accepted connection in crypto/tls (the handshake runs on the
// connection's goroutine, bounded by lc.HandshakeTimeout), and SASL
// listeners serve nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate until the client has authenticated. Serve(l) is
// ServeListener(l, Listener{}).
func (s *Server) ServeListener(l net.Listener, lc Listener) error {
	if err := lc.validate(); err != nil {
		l.Close()
		return err
	}
	if lc.Protocol.SASL() && s.cfg.SASL.mechanisms() == nil {
		l.Close()
		return fmt.Errorf("%w: listener %s (%s) has no SASL mechanism (Config.SASL)", ErrConfig, lc.Name, lc.Protocol)
	}
	if lc.Protocol.TLS() {
		lc.path = decideFetchPath(&lc)
		if lc.path.ktls {
			lc.ktlsCfg = ktls.ServerConfig(lc.TLS)
		}
		s.log.Info("transport: TLS listener", "listener", lc.Name, "addr", l.Addr(), "fetch_path", lc.path.String())
		s.m.tlsFetchPath(lc.Name, lc.path)
		s.mu.Lock()
		s.paths[lc.Name] = lc.path.String()
		s.mu.Unlock()
	}
	return s.Serve(&securedListener{Listener: l, lc: lc})
}

// securedListener carries a listener's settings to the connections it
// accepts.
type securedListener struct {
	net.Listener
	lc Listener
}

// listenerOf returns the settings of the listener l (Serve's plain
// listeners are PLAINTEXT).
func listenerOf(l net.Listener) *Listener {
	if sl, ok := l.(*securedListener); ok {
		return &sl.lc
	}
	return &plaintextListener
}

var plaintextListener = Listener{Name: string(Plaintext), Protocol: Plaintext}

// decideFetchPath decides a TLS listener's Fetch path: kTLS if it is not
// off and the self-test passes on the listener's ULP (ktls.SelfTest: a
// loopback TLS 1.3 connection switched to the kernel, a payload written
// and sendfile'd, decrypted by a crypto/tls client and compared), else
// the copy path (records read into a buffer and written through
// crypto/tls) with the reason.
func decideFetchPath(l *Listener) fetchPath {
	if l.KTLS == KTLSOff {
		return fetchPath{reason: "kTLS off"}
	}
	ulp := l.ulp
	if ulp == nil {
		ulp = ktls.Kernel
	}
	err := ktls.SelfTest(ulp)
	switch {
	case err == nil:
		return fetchPath{ktls: true}
	case errors.Is(err, ktls.ErrNoULP):
		return fetchPath{reason: ktls.ErrNoULP.Error(), detail: err.Error()}
	case errors.Is(err, ktls.ErrRefused):
		return fetchPath{reason: ktls.ErrRefused.Error(), detail: err.Error()}
	default:
		return fetchPath{reason: ktls.ErrMismatch.Error(), detail: err.Error()}
	}
}

// FetchPaths says, per TLS listener served, how Fetch sends record bytes
// and why: "kTLS (...)" or "copy (...)", as logged when it started.
func (s *Server) FetchPaths() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.paths))
	for k, v := range s.paths {
		out[k] = v
	}
	return out
}
