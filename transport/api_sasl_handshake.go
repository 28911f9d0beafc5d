package transport

// SaslHandshake: v1 (v0 is not served).
//
// It names the mechanism of the SaslAuthenticate requests that follow and
// answers with the mechanisms enabled (SASLConfig.Mechanisms). v0 differs
// in what follows: raw SASL tokens framed by a size only, not
// SaslAuthenticate requests; weir does not speak that mode, so v0 is not
// served (clients of Kafka 1.0 and later use v1: franz-go, librdkafka,
// sarama with Net.SASL.Version = 1, the Java client). On a listener
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
	err, closeAfter := c.sec.sasl.handshake(s.cfg.SASL, req.Mechanism)
	resp.ErrorCode = errorCode(err)
	if closeAfter {
		s.warns.warn("transport: SASL handshake refused, closing connection", "listener", c.listener().Name,
			"remote", c.nc.RemoteAddr(), "mechanism", req.Mechanism, "err", err)
		c.sec.closeAfter = fmt.Errorf("SASL handshake for %q: %w", req.Mechanism, err)
	}
	return resp, nil
}
