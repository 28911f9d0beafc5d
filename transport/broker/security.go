package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/core/credentials"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport"
	"github.com/weir-broker/weir/transport/secdial"
	"github.com/weir-broker/weir/transport/tlsfiles"
)

// Security configures the broker's listeners and how clients authenticate,
// with Kafka's settings and semantics. The zero value is one PLAINTEXT
// listener on Config.Listen, as before.
type Security struct {
	// Listeners is Kafka's listeners: "NAME://host:port,..." (a NAME that is
	// a security protocol needs no map entry: "PLAINTEXT://:9092,
	// SASL_SSL://:9093"). Empty: one PLAINTEXT listener on Config.Listen,
	// advertised as Config.Advertised.
	Listeners string
	// AdvertisedListeners is Kafka's advertised.listeners, the addresses
	// given to clients of each listener: "NAME://host:port,...". A listener
	// left out advertises its bound address (an unspecified host replaced
	// by the hostname).
	AdvertisedListeners string
	// ProtocolMap is Kafka's listener.security.protocol.map:
	// "NAME:PROTOCOL,..."; a listener whose name is a protocol defaults to
	// it.
	ProtocolMap string
	// InterBrokerListener is Kafka's inter.broker.listener.name: the
	// listener brokers reach each other on. Every listener's advertised
	// address is registered; this broker replicates from (and sends
	// transaction markers to) the other brokers at their endpoint of this
	// name, authenticating as InterBrokerUser. Default: the first listener.
	InterBrokerListener string

	// CertFile and KeyFile (PEM) are the TLS listeners' certificate and
	// key, reloaded when they change (Kafka's ssl.keystore.*).
	CertFile, KeyFile string
	// CAFile (PEM) verifies client certificates and, for the inter-broker
	// listener, the other brokers' (Kafka's ssl.truststore.*).
	CAFile string
	// ClientAuth is Kafka's ssl.client.auth: none (default), requested or
	// required.
	ClientAuth string
	// HandshakeTimeout bounds a TLS handshake. Default
	// transport.DefaultHandshakeTimeout (10 s).
	HandshakeTimeout time.Duration
	// KTLS is the TLS listeners' transport.Listener.KTLS: "auto" (default:
	// the kernel's TLS offload, keeping sendfile for Fetch, if the
	// self-test passes when the listener starts) or "off" (the copy path).
	KTLS string

	// SASLMechanisms is Kafka's sasl.enabled.mechanisms. Default: PLAIN
	// when PlainUsersFile is set, plus SCRAM-SHA-256 and SCRAM-SHA-512.
	SASLMechanisms []string
	// PlainUsersFile holds PLAIN's users as Kafka's PlainLoginModule options
	// (a JAAS file, or lines): user_<name>="<password>".
	PlainUsersFile string

	// InterBrokerSASLMechanism, InterBrokerUser and InterBrokerPassword are
	// what this broker authenticates with on the other brokers' inter-broker
	// listener when it is a SASL one (Kafka's
	// sasl.mechanism.inter.broker.protocol and the JAAS username/password).
	InterBrokerSASLMechanism         string
	InterBrokerUser, InterBrokerPass string
}

// listenerSpec is one parsed listener.
type listenerSpec struct {
	name       string
	protocol   transport.SecurityProtocol
	bind       string // host:port
	advertised string // "" until bound
}

var endpointRE = regexp.MustCompile(`^([A-Za-z0-9_]+)://(.*)$`)

// parseEndpoints parses "NAME://host:port,...".
func parseEndpoints(what, s string) ([][2]string, error) {
	var out [][2]string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		m := endpointRE.FindStringSubmatch(e)
		if m == nil {
			return nil, fmt.Errorf("%w: %s %q: want NAME://host:port", ErrInvalidConfig, what, e)
		}
		if _, _, err := net.SplitHostPort(m[2]); err != nil {
			return nil, fmt.Errorf("%w: %s %q: %v", ErrInvalidConfig, what, e, err)
		}
		out = append(out, [2]string{strings.ToUpper(m[1]), m[2]})
	}
	return out, nil
}

// listeners parses the listener settings.
func (s Security) listeners() ([]listenerSpec, error) {
	eps, err := parseEndpoints("listeners", s.Listeners)
	if err != nil {
		return nil, err
	}
	protos := map[string]transport.SecurityProtocol{}
	for _, kv := range strings.Split(s.ProtocolMap, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return nil, fmt.Errorf("%w: listener security protocol map entry %q: want NAME:PROTOCOL", ErrInvalidConfig, kv)
		}
		p, err := transport.ParseSecurityProtocol(v)
		if err != nil {
			return nil, fmt.Errorf("%w: listener security protocol map: %v", ErrInvalidConfig, err)
		}
		protos[strings.ToUpper(strings.TrimSpace(k))] = p
	}
	adv, err := parseEndpoints("advertised listeners", s.AdvertisedListeners)
	if err != nil {
		return nil, err
	}
	var out []listenerSpec
	for _, e := range eps {
		p, ok := protos[e[0]]
		if !ok {
			if p, err = transport.ParseSecurityProtocol(e[0]); err != nil {
				return nil, fmt.Errorf("%w: listener %s has no security protocol (listener security protocol map)", ErrInvalidConfig, e[0])
			}
		}
		if slices.ContainsFunc(out, func(l listenerSpec) bool { return l.name == e[0] }) {
			return nil, fmt.Errorf("%w: listener %s named twice", ErrInvalidConfig, e[0])
		}
		out = append(out, listenerSpec{name: e[0], protocol: p, bind: e[1]})
	}
	for _, a := range adv {
		i := slices.IndexFunc(out, func(l listenerSpec) bool { return l.name == a[0] })
		if i < 0 {
			return nil, fmt.Errorf("%w: advertised listener %s is not a listener", ErrInvalidConfig, a[0])
		}
		out[i].advertised = a[1]
	}
	if s.InterBrokerListener != "" && !slices.ContainsFunc(out, func(l listenerSpec) bool { return l.name == strings.ToUpper(s.InterBrokerListener) }) {
		return nil, fmt.Errorf("%w: inter-broker listener %s is not a listener", ErrInvalidConfig, s.InterBrokerListener)
	}
	return out, nil
}

// interBroker returns the index of the inter-broker listener.
func (s Security) interBroker(ls []listenerSpec) int {
	if s.InterBrokerListener == "" {
		return 0
	}
	return slices.IndexFunc(ls, func(l listenerSpec) bool { return l.name == strings.ToUpper(s.InterBrokerListener) })
}

// validate checks what can be checked before binding.
func (s Security) validate() error {
	ls, err := s.listeners()
	if err != nil {
		return err
	}
	if _, err := transport.ParseKTLSMode(s.KTLS); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	needTLS := slices.ContainsFunc(ls, func(l listenerSpec) bool { return l.protocol.TLS() })
	if needTLS && (s.CertFile == "" || s.KeyFile == "") {
		return fmt.Errorf("%w: an SSL or SASL_SSL listener needs a certificate and key file", ErrInvalidConfig)
	}
	return nil
}

var jaasUser = regexp.MustCompile(`user_([^\s="]+)\s*=\s*"([^"]*)"`)

// ReadPlainUsers reads PLAIN's users from a JAAS-like file:
// user_<name>="<password>" anywhere in it.
func ReadPlainUsers(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: PLAIN users file: %w", ErrInvalidConfig, err)
	}
	users := map[string]string{}
	for _, m := range jaasUser.FindAllStringSubmatch(string(b), -1) {
		users[m[1]] = m[2]
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%w: PLAIN users file %s has no user_<name>=\"<password>\"", ErrInvalidConfig, file)
	}
	return users, nil
}

// serverTLS builds the TLS listeners' config.
func (s Security) serverTLS(b *Broker) (*tls.Config, error) {
	return tlsfiles.ServerConfig(tlsfiles.Server{CertFile: s.CertFile, KeyFile: s.KeyFile, ClientCAFile: s.CAFile,
		ClientAuth: tlsfiles.ClientAuth(s.ClientAuth), Logger: b.cfg.Logger.With("component", "tls")})
}

// saslConfig builds the transport's SASL settings.
func (s Security) saslConfig(st *credentials.Store) (transport.SASLConfig, error) {
	c := transport.SASLConfig{Scram: st, Mechanisms: s.SASLMechanisms}
	if s.PlainUsersFile != "" {
		users, err := ReadPlainUsers(s.PlainUsersFile)
		if err != nil {
			return c, err
		}
		c.PlainUsers = users
	}
	return c, nil
}

// interBrokerMechanism is this broker's SASL mechanism on the other
// brokers' inter-broker listener.
func (s Security) interBrokerMechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.InterBrokerSASLMechanism) {
	case "":
		return nil, fmt.Errorf("%w: the inter-broker listener uses SASL: an inter-broker SASL mechanism, user and password are needed", ErrInvalidConfig)
	case transport.MechanismPlain:
		return plain.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPass}.AsMechanism(), nil
	case transport.MechanismScramSHA256:
		return scram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPass}.AsSha256Mechanism(), nil
	case transport.MechanismScramSHA512:
		return scram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: inter-broker SASL mechanism %q", ErrInvalidConfig, s.InterBrokerSASLMechanism)
}

// interBrokerDialer wraps base with what the inter-broker listener's
// protocol needs: TLS (trusting CAFile, presenting the broker's own
// certificate) and SASL.
func (s Security) interBrokerDialer(p transport.SecurityProtocol, base secdial.Dialer) (secdial.Dialer, error) {
	var tcfg *tls.Config
	if p.TLS() {
		var err error
		if tcfg, err = tlsfiles.ClientConfig(tlsfiles.Client{CAFile: s.CAFile, CertFile: s.CertFile, KeyFile: s.KeyFile}); err != nil {
			return nil, err
		}
	}
	var mech sasl.Mechanism
	if p.SASL() {
		var err error
		if mech, err = s.interBrokerMechanism(); err != nil {
			return nil, err
		}
	}
	return secdial.Wrap(base, tcfg, mech), nil
}

// extraListener is a listener served besides Broker.listener.
type extraListener struct {
	l    net.Listener
	spec listenerSpec
}

// listenerSet is what the broker serves beyond its first listener.
type listenerSet struct {
	all     []extraListener      // every listener, the first included
	configs []transport.Listener // all's settings, in order
	wg      sync.WaitGroup
	creds   *credentials.Store
}

// ListenerAddr returns the bound host:port of the listener named name
// (Security.Listeners), "" if there is none; with no listeners configured,
// "PLAINTEXT" is Addr.
func (b *Broker) ListenerAddr(name string) string {
	if len(b.sec.all) == 0 {
		if strings.EqualFold(name, string(transport.Plaintext)) {
			return b.Addr()
		}
		return ""
	}
	for _, x := range b.sec.all {
		if x.spec.name == strings.ToUpper(name) {
			return x.l.Addr().String()
		}
	}
	return ""
}

// endpoints are the advertised listeners the node registers, and the name
// of the inter-broker one; none without Security.Listeners (the node
// registers one PLAINTEXT listener).
func (b *Broker) endpoints(s Security) ([]node.Endpoint, string, error) {
	if len(b.sec.all) == 0 {
		return nil, "", nil
	}
	var out []node.Endpoint
	for _, x := range b.sec.all {
		host, port, err := node.SplitHostPort(x.spec.advertised)
		if err != nil {
			return nil, "", fmt.Errorf("%w: listener %s: advertised %q: %v", ErrInvalidConfig, x.spec.name, x.spec.advertised, err)
		}
		out = append(out, node.Endpoint{Listener: x.spec.name, Protocol: string(x.spec.protocol), Host: host, Port: port})
	}
	return out, b.sec.all[s.interBroker(b.listenerSpecs())].spec.name, nil
}

// listenerSpecs are the specs of the bound listeners.
func (b *Broker) listenerSpecs() []listenerSpec {
	out := make([]listenerSpec, len(b.sec.all))
	for i, x := range b.sec.all {
		out[i] = x.spec
	}
	return out
}

// listen binds every listener of cfg.Security; the inter-broker one is
// b.listener, and its advertised address is returned (the node's own;
// every listener is registered: endpoints). cfg.ReplicaDialer is wrapped
// to speak the inter-broker listener's protocol.
func (b *Broker) listen(cfg *Config) (string, error) {
	specs, err := cfg.Security.listeners()
	if err != nil {
		return "", err
	}
	for i := range specs {
		l, err := net.Listen("tcp", specs[i].bind)
		if err != nil {
			return "", fmt.Errorf("broker: listener %s: listen: %w", specs[i].name, err)
		}
		if specs[i].advertised == "" {
			specs[i].advertised = advertise(l.Addr().String())
		}
		b.sec.all = append(b.sec.all, extraListener{l: l, spec: specs[i]})
	}
	ib := b.sec.all[cfg.Security.interBroker(specs)]
	b.listener = ib.l
	single := cfg.ZooKeeper == "" && cfg.Coord == nil // no other broker to replicate from
	if ib.spec.protocol != transport.Plaintext && !(single && cfg.Security.InterBrokerSASLMechanism == "") {
		d, err := cfg.Security.interBrokerDialer(ib.spec.protocol, secdial.Dialer(cfg.ReplicaDialer))
		if err != nil {
			return "", err
		}
		cfg.ReplicaDialer = d
	}
	return ib.spec.advertised, nil
}

// openCredentials opens the SCRAM credential store on the node's
// coordination store (every broker serves DescribeUserScramCredentials and
// AlterUserScramCredentials) and returns the transport's SASL settings.
func (b *Broker) openCredentials() (transport.SASLConfig, error) {
	if err := b.listenerConfigs(); err != nil {
		return transport.SASLConfig{}, err
	}
	b.sec.creds = credentials.Open(b.node.CoordStore(), b.cfg.Logger.With("component", "credentials"))
	return b.cfg.Security.saslConfig(b.sec.creds)
}

// serveListeners serves every listener until Close, returning what the
// inter-broker (or only) listener's Serve returns; the others' errors are
// logged.
func (b *Broker) serveListeners() error {
	if len(b.sec.all) == 0 {
		return b.server.Serve(b.listener)
	}
	var main transport.Listener
	for i, x := range b.sec.all {
		if x.l == b.listener {
			main = b.sec.configs[i]
			continue
		}
		b.sec.wg.Add(1)
		go func() {
			defer b.sec.wg.Done()
			if err := b.server.ServeListener(x.l, b.sec.configs[i]); err != nil {
				b.cfg.Logger.Error("listener stopped", "listener", x.spec.name, "err", err)
			}
		}()
	}
	return b.server.ServeListener(b.listener, main)
}

// listenerConfigs builds each listener's transport settings (loading the
// certificate once for all TLS listeners).
func (b *Broker) listenerConfigs() error {
	var tcfg *tls.Config
	for _, x := range b.sec.all {
		out := transport.Listener{Name: x.spec.name, Protocol: x.spec.protocol, Advertised: x.spec.advertised,
			HandshakeTimeout: b.cfg.Security.HandshakeTimeout, KTLS: transport.KTLSMode(b.cfg.Security.KTLS)}
		if x.spec.protocol.TLS() {
			if tcfg == nil {
				var err error
				if tcfg, err = b.cfg.Security.serverTLS(b); err != nil {
					return fmt.Errorf("broker: %w", err)
				}
			}
			out.TLS = tcfg
		}
		b.sec.configs = append(b.sec.configs, out)
	}
	return nil
}

// closeListeners closes the listeners not served (start failed) and waits
// for the others' Serve to return.
func (b *Broker) closeListeners() {
	if !b.serving {
		for _, x := range b.sec.all {
			x.l.Close()
		}
	}
	b.sec.wg.Wait()
}
