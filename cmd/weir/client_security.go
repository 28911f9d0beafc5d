package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/transport/tlsfiles"
)

// clientSecurity are the TLS and SASL flags of weir produce and consume,
// named after Kafka's client settings (security.protocol, sasl.mechanism,
// ssl.ca.location in librdkafka's words).
type clientSecurity struct {
	protocol, mechanism, user, password string
	caFile, certFile, keyFile           string
	insecure                            bool
	opts                                []kgo.Opt // built by build
}

func (s *clientSecurity) add(f *pflag.FlagSet) {
	f.StringVar(&s.protocol, "security-protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol)")
	f.StringVar(&s.mechanism, "sasl-mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with a SASL protocol")
	f.StringVar(&s.user, "sasl-user", "", "SASL user")
	f.StringVar(&s.password, "sasl-password", "", "SASL password")
	f.StringVar(&s.caFile, "ssl-ca-file", "", "PEM CA bundle verifying the brokers (default: the system's)")
	f.StringVar(&s.certFile, "ssl-cert-file", "", "PEM client certificate, for brokers that ask for one (mTLS)")
	f.StringVar(&s.keyFile, "ssl-key-file", "", "PEM key of --ssl-cert-file")
	f.BoolVar(&s.insecure, "ssl-insecure", false, "do not verify the brokers' certificates (tests only)")
}

// build checks the flags and makes the client options.
func (s *clientSecurity) build() error {
	p := strings.ToUpper(s.protocol)
	if p != "PLAINTEXT" && p != "SSL" && p != "SASL_PLAINTEXT" && p != "SASL_SSL" {
		return fmt.Errorf("%w --security-protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", errBadFlag, s.protocol)
	}
	s.opts = nil
	if strings.HasSuffix(p, "SSL") {
		cfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: s.caFile, CertFile: s.certFile, KeyFile: s.keyFile, Insecure: s.insecure})
		if err != nil {
			return fmt.Errorf("%w: %w", errBadFlag, err)
		}
		s.opts = append(s.opts, kgo.DialTLSConfig(cfg))
	}
	if strings.HasPrefix(p, "SASL") {
		if s.user == "" {
			return fmt.Errorf("%w --sasl-user: required with %s", errBadFlag, p)
		}
		switch strings.ToUpper(s.mechanism) {
		case "PLAIN":
			s.opts = append(s.opts, kgo.SASL(plain.Auth{User: s.user, Pass: s.password}.AsMechanism()))
		case "SCRAM-SHA-256":
			s.opts = append(s.opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			s.opts = append(s.opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()))
		default:
			return fmt.Errorf("%w --sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", errBadFlag, s.mechanism)
		}
	}
	return nil
}
