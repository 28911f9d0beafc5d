package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/transport/ktls"
)

// AnonymousPrincipal is the principal of a client that did not authenticate
// (PLAINTEXT, or SSL without a client certificate), as in Kafka.
const AnonymousPrincipal = "User:ANONYMOUS"

// connSecurity is what a connection knows about who its client is. The
// principal is written by the connection's goroutine (the TLS handshake,
// then the SASL handlers) and may be read from any goroutine.
type connSecurity struct {
	who  atomic.Pointer[string] // nil: AnonymousPrincipal
	sasl saslState              // serving goroutine only
	// closeAfter (serving goroutine only): the response being written is
	// the last; the connection closes after it (a failed authentication).
	closeAfter error
}

// principal is the connection's authenticated identity in Kafka's
// "User:<name>" form: AnonymousPrincipal on PLAINTEXT and on SSL without a
// client certificate, "User:<name>" after SASL, and on SSL with a verified
// client certificate "User:" plus the certificate's subject as Kafka's
// default principal builder gives it ("User:CN=alice,OU=eng,O=acme").
func (c *conn) principal() string {
	if p := c.sec.who.Load(); p != nil {
		return *p
	}
	return AnonymousPrincipal
}

func (c *conn) setPrincipal(p string) { c.sec.who.Store(&p) }

// listener returns the settings of the listener that accepted c.
func (c *conn) listener() *Listener {
	if c.lst == nil {
		return &plaintextListener
	}
	return c.lst
}

// principalFromCert is Kafka's default principal for a client certificate
// (DefaultKafkaPrincipalBuilder with ssl.principal.mapping.rules=DEFAULT):
// "User:" plus the subject's distinguished name as
// X500Principal.getName() writes it (RFC 2253: most specific first,
// "CN=alice,OU=eng,O=acme,C=US"). Go's pkix.Name.String writes the same
// order and escaping for the usual attributes.
func principalFromCert(cert *x509.Certificate) string {
	return "User:" + cert.Subject.String()
}

// wrapTLS wraps an accepted connection in crypto/tls for TLS listeners
// (in a ktls.Conn where the listener uses kTLS); the handshake is done by
// handshake, on the connection's goroutine.
func wrapTLS(nc net.Conn, l *Listener) net.Conn {
	if l == nil || !l.Protocol.TLS() {
		return nc
	}
	if l.path.ktls {
		return ktls.Server(nc, l.ktlsCfg)
	}
	return tls.Server(nc, l.TLS)
}

// tlsConn is what a TLS connection's handshake and state need, from
// crypto/tls or ktls.
type tlsConn interface {
	HandshakeContext(context.Context) error
	ConnectionState() tls.ConnectionState
	SetDeadline(time.Time) error
}

// handshake completes the TLS handshake of a TLS connection within the
// listener's HandshakeTimeout, and on an SSL listener takes the principal
// from a verified client certificate. False: the handshake failed (a
// plaintext client on a TLS port, an untrusted or expired certificate, a
// client that stopped halfway), it was logged (rate-limited) and the
// connection closed.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(tlsConn)
	if !ok {
		return true
	}
	l := c.listener()
	if t := l.HandshakeTimeout; t > 0 {
		_ = tc.SetDeadline(time.Now().Add(t))
	}
	err := tc.HandshakeContext(c.ctx)
	_ = tc.SetDeadline(time.Time{})
	if err != nil {
		c.s.warns.warn("transport: TLS handshake failed, closing connection",
			"listener", l.Name, "remote", c.nc.RemoteAddr(), "err", err)
		c.cancel()
		c.nc.Close()
		return false
	}
	st := tc.ConnectionState()
	if l.Protocol == SSL && len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		c.setPrincipal(principalFromCert(st.PeerCertificates[0]))
	}
	if kc, ok := c.nc.(*ktls.Conn); ok {
		c.enableKTLS(kc, l)
	}
	return true
}

// armAuthTimeout closes the connection, on a SASL listener, if its client
// has not authenticated within the listener's AuthTimeout (a client that
// stopped halfway through the exchange, or never began it). It returns what
// stops the timer, for when the connection ends.
func (c *conn) armAuthTimeout() (stop func() bool) {
	l := c.listener()
	if !l.Protocol.SASL() || l.AuthTimeout <= 0 {
		return func() bool { return false }
	}
	return time.AfterFunc(l.AuthTimeout, func() {
		if c.sec.who.Load() != nil { // authenticated
			return
		}
		c.s.warns.warn("transport: SASL authentication not done in time, closing connection",
			"listener", l.Name, "remote", c.nc.RemoteAddr(), "timeout", l.AuthTimeout)
		c.cancel()
		c.nc.Close()
	}).Stop
}

// enableKTLS hands the connection's writes to the kernel (ktls.Conn's
// EnableTX) on a listener whose self-test passed, and sends Fetch record
// bytes with sendfile from then on (unless sendfile is disabled). Where the
// kernel refuses this connection's keys (TLS 1.2, a cipher it lacks), the
// connection keeps the copy path, writing through crypto/tls.
func (c *conn) enableKTLS(kc *ktls.Conn, l *Listener) {
	ulp := l.ulp
	if ulp == nil {
		ulp = ktls.Kernel
	}
	if err := kc.EnableTX(ulp); err != nil {
		c.s.m.ktlsConn(false)
		c.s.warns.info("transport: kTLS refused for a connection, using the copy path",
			"listener", l.Name, "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.s.m.ktlsConn(true)
	c.ktls = kc
	if sendfileSupported && !c.s.cfg.DisableSendfile {
		if raw, ok := kc.SendfileConn(); ok {
			c.raw = raw
		}
	}
}

// preAuthKeys are the APIs a SASL listener serves before authentication,
// as Kafka's SaslServerAuthenticator: ApiVersions, SaslHandshake and
// SaslAuthenticate.
func preAuthKey(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

// gate refuses, on a SASL listener, every request but preAuthKey's until
// the client has authenticated: the connection is closed, as Kafka closes
// it (an IllegalSaslStateException).
func (c *conn) gate(key int16) error {
	if !c.listener().Protocol.SASL() || c.sec.sasl.stage == saslAuthenticated || preAuthKey(key) {
		return nil
	}
	c.s.warns.warn("transport: request before SASL authentication, closing connection",
		"listener", c.listener().Name, "remote", c.nc.RemoteAddr(), "api_key", key)
	return fmt.Errorf("%w: API key %d before SASL authentication", errClose, key)
}

// afterResponse closes the connection once a response that ends it (a
// failed authentication) has been written.
func (c *conn) afterResponse() error {
	if err := c.sec.closeAfter; err != nil {
		return fmt.Errorf("%w: %w", errClose, err)
	}
	return nil
}
