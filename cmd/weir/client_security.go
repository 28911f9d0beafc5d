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
// ssl.ca.location in librdkafka's words). weir mirror has one per cluster,
// its flags named with a prefix ("source-", "target-").
type clientSecurity struct {
	prefix                              string // of every flag name; "" for produce and consume
	protocol, mechanism, user, password string
	caFile, certFile, keyFile           string
	insecure                            bool
	opts                                []kgo.Opt // built by build
}

// flag is the command-line name of setting name, with its dashes.
func (s *clientSecurity) flag(name string) string { return "--" + s.prefix + name }

func (s *clientSecurity) add(f *pflag.FlagSet) {
	p := s.prefix
	f.StringVar(&s.protocol, p+"security-protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol)")
	f.StringVar(&s.mechanism, p+"sasl-mechanism", "PLAIN", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with a SASL protocol")
	f.StringVar(&s.user, p+"sasl-user", "", "SASL user")
	f.StringVar(&s.password, p+"sasl-password", "", "SASL password")
	f.StringVar(&s.caFile, p+"ssl-ca-file", "", "PEM CA bundle verifying the brokers (default: the system's)")
	f.StringVar(&s.certFile, p+"ssl-cert-file", "", "PEM client certificate, for brokers that ask for one (mTLS)")
	f.StringVar(&s.keyFile, p+"ssl-key-file", "", "PEM key of "+s.flag("ssl-cert-file"))
	f.BoolVar(&s.insecure, p+"ssl-insecure", false, "do not verify the brokers' certificates (tests only)")
}

// build checks the flags and makes the client options. Its errors name
// the flag at fault and wrap errBadFlag.
func (s *clientSecurity) build() error {
	p := strings.ToUpper(s.protocol)
	if p != "PLAINTEXT" && p != "SSL" && p != "SASL_PLAINTEXT" && p != "SASL_SSL" {
		return fmt.Errorf("%w %s %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", errBadFlag, s.flag("security-protocol"), s.protocol)
	}
	s.opts = nil
	if strings.HasSuffix(p, "SSL") {
		// The CA file is loaded here rather than by ClientConfig, so that
		// its error names its flag.
		cfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CertFile: s.certFile, KeyFile: s.keyFile, Insecure: s.insecure})
		if err != nil {
			return fmt.Errorf("%w %s/%s: %w", errBadFlag, s.flag("ssl-cert-file"), s.flag("ssl-key-file"), err)
		}
		if s.caFile != "" {
			if cfg.RootCAs, err = tlsfiles.LoadPool(s.caFile); err != nil {
				return fmt.Errorf("%w %s: %w", errBadFlag, s.flag("ssl-ca-file"), err)
			}
		}
		s.opts = append(s.opts, kgo.DialTLSConfig(cfg))
	}
	if strings.HasPrefix(p, "SASL") {
		if s.user == "" {
			return fmt.Errorf("%w %s: required with %s %s", errBadFlag, s.flag("sasl-user"), s.flag("security-protocol"), p)
		}
		switch strings.ToUpper(s.mechanism) {
		case "PLAIN":
			s.opts = append(s.opts, kgo.SASL(plain.Auth{User: s.user, Pass: s.password}.AsMechanism()))
		case "SCRAM-SHA-256":
			s.opts = append(s.opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			s.opts = append(s.opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()))
		default:
			return fmt.Errorf("%w %s %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", errBadFlag, s.flag("sasl-mechanism"), s.mechanism)
		}
	}
	return nil
}
