package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/weir-broker/weir/transport/broker"
)

// securitySettings are the broker's listener, TLS and SASL settings (README:
// Security), inlined into brokerSettings: the yaml keys are the flag names.
type securitySettings struct {
	Listeners                string        `yaml:"listeners"`
	AdvertisedListeners      string        `yaml:"advertised-listeners"`
	ListenerProtocolMap      string        `yaml:"listener-security-protocol-map"`
	InterBrokerListener      string        `yaml:"inter-broker-listener-name"`
	SSLCertFile              string        `yaml:"ssl-cert-file"`
	SSLKeyFile               string        `yaml:"ssl-key-file"`
	SSLCAFile                string        `yaml:"ssl-ca-file"`
	SSLClientAuth            string        `yaml:"ssl-client-auth"`
	SSLHandshakeTimeout      time.Duration `yaml:"ssl-handshake-timeout"`
	SSLKTLS                  string        `yaml:"ssl-ktls"`
	SASLEnabledMechanisms    []string      `yaml:"sasl-enabled-mechanisms"`
	SASLPlainUsersFile       string        `yaml:"sasl-plain-users-file"`
	InterBrokerSASLMechanism string        `yaml:"inter-broker-sasl-mechanism"`
	InterBrokerSASLUser      string        `yaml:"inter-broker-sasl-user"`
	InterBrokerSASLPassword  string        `yaml:"inter-broker-sasl-password"`
}

func addSecurityFlags(f *pflag.FlagSet, s *securitySettings) {
	f.StringVar(&s.Listeners, "listeners", s.Listeners, "Kafka's listeners: `NAME://host:port,...`, each NAME a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or mapped by --listener-security-protocol-map (default: none, one PLAINTEXT listener on --listen)")
	f.StringVar(&s.AdvertisedListeners, "advertised-listeners", s.AdvertisedListeners, "Kafka's advertised.listeners: `NAME://host:port,...` given to each listener's clients (default: each listener's bound address)")
	f.StringVar(&s.ListenerProtocolMap, "listener-security-protocol-map", s.ListenerProtocolMap, "Kafka's listener.security.protocol.map: `NAME:PROTOCOL,...` (default: a listener named as a protocol uses it)")
	f.StringVar(&s.InterBrokerListener, "inter-broker-listener-name", s.InterBrokerListener, "the listener brokers replicate over: every listener is registered, and this broker dials the others' endpoint of this name (default: the first of --listeners)")
	f.StringVar(&s.SSLCertFile, "ssl-cert-file", s.SSLCertFile, "PEM certificate chain of the SSL and SASL_SSL listeners, reloaded when it changes")
	f.StringVar(&s.SSLKeyFile, "ssl-key-file", s.SSLKeyFile, "PEM private key of --ssl-cert-file, reloaded when it changes")
	f.StringVar(&s.SSLCAFile, "ssl-ca-file", s.SSLCAFile, "PEM CA bundle verifying client certificates and, on the inter-broker listener, other brokers")
	f.StringVar(&s.SSLClientAuth, "ssl-client-auth", s.SSLClientAuth, "Kafka's ssl.client.auth: none, requested or required; a verified client certificate's subject is the principal on SSL listeners (default none)")
	f.DurationVar(&s.SSLHandshakeTimeout, "ssl-handshake-timeout", s.SSLHandshakeTimeout, "a TLS handshake not done within this is closed (default 0: 10s)")
	f.StringVar(&s.SSLKTLS, "ssl-ktls", s.SSLKTLS, "kernel TLS offload on SSL and SASL_SSL listeners, keeping sendfile for Fetch: auto (used if a self-test passes when the listener starts; the log and weir_tls_fetch_path say which path and why) or off (the copy path) (default auto)")
	f.StringSliceVar(&s.SASLEnabledMechanisms, "sasl-enabled-mechanisms", s.SASLEnabledMechanisms, "Kafka's sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default: PLAIN if --sasl-plain-users-file is set, and both SCRAM)")
	f.StringVar(&s.SASLPlainUsersFile, "sasl-plain-users-file", s.SASLPlainUsersFile, "`file` of PLAIN users as PlainLoginModule options, user_NAME=\"PASSWORD\" (a Kafka JAAS file works)")
	f.StringVar(&s.InterBrokerSASLMechanism, "inter-broker-sasl-mechanism", s.InterBrokerSASLMechanism, "SASL mechanism this broker authenticates with on a SASL inter-broker listener")
	f.StringVar(&s.InterBrokerSASLUser, "inter-broker-sasl-user", s.InterBrokerSASLUser, "SASL user of --inter-broker-sasl-mechanism")
	f.StringVar(&s.InterBrokerSASLPassword, "inter-broker-sasl-password", s.InterBrokerSASLPassword, "SASL password of --inter-broker-sasl-mechanism")
}

// mergeSecurity applies the config file's security keys not given as flags.
func (s *securitySettings) mergeFile(file brokerFile, set func(name string, apply func())) {
	f := file.securitySettings
	set("listeners", func() { s.Listeners = f.Listeners })
	set("advertised-listeners", func() { s.AdvertisedListeners = f.AdvertisedListeners })
	set("listener-security-protocol-map", func() { s.ListenerProtocolMap = f.ListenerProtocolMap })
	set("inter-broker-listener-name", func() { s.InterBrokerListener = f.InterBrokerListener })
	set("ssl-cert-file", func() { s.SSLCertFile = f.SSLCertFile })
	set("ssl-key-file", func() { s.SSLKeyFile = f.SSLKeyFile })
	set("ssl-ca-file", func() { s.SSLCAFile = f.SSLCAFile })
	set("ssl-client-auth", func() { s.SSLClientAuth = f.SSLClientAuth })
	set("ssl-handshake-timeout", func() { s.SSLHandshakeTimeout = f.SSLHandshakeTimeout })
	set("ssl-ktls", func() { s.SSLKTLS = f.SSLKTLS })
	set("sasl-enabled-mechanisms", func() { s.SASLEnabledMechanisms = f.SASLEnabledMechanisms })
	set("sasl-plain-users-file", func() { s.SASLPlainUsersFile = f.SASLPlainUsersFile })
	set("inter-broker-sasl-mechanism", func() { s.InterBrokerSASLMechanism = f.InterBrokerSASLMechanism })
	set("inter-broker-sasl-user", func() { s.InterBrokerSASLUser = f.InterBrokerSASLUser })
	set("inter-broker-sasl-password", func() { s.InterBrokerSASLPassword = f.InterBrokerSASLPassword })
}

// config is the broker's Security.
func (s securitySettings) config() broker.Security {
	return broker.Security{
		Listeners: s.Listeners, AdvertisedListeners: s.AdvertisedListeners, ProtocolMap: s.ListenerProtocolMap,
		InterBrokerListener: s.InterBrokerListener, CertFile: s.SSLCertFile, KeyFile: s.SSLKeyFile, CAFile: s.SSLCAFile,
		ClientAuth: s.SSLClientAuth, HandshakeTimeout: s.SSLHandshakeTimeout, KTLS: s.SSLKTLS, SASLMechanisms: s.SASLEnabledMechanisms,
		PlainUsersFile: s.SASLPlainUsersFile, InterBrokerSASLMechanism: s.InterBrokerSASLMechanism,
		InterBrokerUser: s.InterBrokerSASLUser, InterBrokerPass: s.InterBrokerSASLPassword,
	}
}
