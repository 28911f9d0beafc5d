package runner

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/transport/tlsfiles"
)

// securityOpts turns the target's security settings into client options
// (nil settings: PLAINTEXT, no options).
func securityOpts(s *spec.Security) ([]kgo.Opt, error) {
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
		cfg, err := tlsfiles.ClientConfig(tlsfiles.Client{CAFile: s.SSLCAFile, CertFile: s.SSLCertFile, KeyFile: s.SSLKeyFile})
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
