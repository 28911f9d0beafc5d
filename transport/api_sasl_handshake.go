package transport

// SaslHandshake: v0-v1.
//
// It names the mechanism of the SaslAuthenticate requests that follow and
// answers with the mechanisms enabled (SASLConfig.Mechanisms). v0 differs
// in what follows: raw SASL tokens framed by a size only, not
// SaslAuthenticate requests. weir does not speak that mode: a v0 handshake
// on a SASL listener is answered (with the mechanisms) and the connection
// closed, logged as such. v0 is listed because librdkafka requires the
// range to include it before it uses v1; clients of Kafka 1.0 and later use
// v1 (franz-go, librdkafka, the Java client, sarama with
// Net.SASL.Version = 1, its default). On a listener
// without SASL the answer is ILLEGAL_SASL_STATE, as Kafka answers. A second
// handshake, or an unsupported mechanism, is answered (ILLEGAL_SASL_STATE,
// UNSUPPORTED_SASL_MECHANISM with the enabled list) and the connection
// closed, as Kafka's SaslServerAuthenticator does.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

func handleSaslHandshake(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.c
	if !c.listener().Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp.SupportedMechanisms = s.cfg.SASL.mechanisms()
	if req.Version == 0 {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.warns.warn("transport: SaslHandshake v0 (raw SASL tokens) is not served, closing connection; clients must use v1",
			"listener", c.listener().Name, "remote", c.nc.RemoteAddr())
		c.sec.closeAfter = fmt.Errorf("%w: SaslHandshake v0", errIllegalSaslState)
		return resp, nil
	}
	err, closeAfter := c.sec.sasl.handshake(s.cfg.SASL, req.Mechanism)
	resp.ErrorCode = errorCode(err)
	if closeAfter {
		s.warns.warn("transport: SASL handshake refused, closing connection", "listener", c.listener().Name,
			"remote", c.nc.RemoteAddr(), "mechanism", req.Mechanism, "err", err)
		c.sec.closeAfter = fmt.Errorf("SASL handshake for %q: %w", req.Mechanism, err)
	}
	return resp, nil
}
