package transport

// SaslAuthenticate: v0-v2.
//
// Carries the SASL exchange's messages after SaslHandshake v1 (PLAIN: one
// message; SCRAM: client-first, client-final). v1 added the session
// lifetime (0 here: no KIP-368 re-authentication, the session lasts as long
// as the connection); v2 made it flexible. A failed authentication is
// answered SASL_AUTHENTICATION_FAILED with a message saying why (the
// mechanism and "invalid credentials"; never whether the user exists),
// logged with the client's address (rate-limited), and the connection is
// closed after the answer. Once authenticated, the principal is
// "User:<name>", and a further SaslAuthenticate is ILLEGAL_SASL_STATE.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSaslAuthenticate(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.c
	if !c.listener().Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code // as Kafka's KafkaApis answers it
		return resp, nil
	}
	out, err := c.sec.sasl.authenticate(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.sec.sasl.mech
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			msg = err.Error()
		}
		resp.ErrorMessage = &msg
		s.warns.warn("transport: SASL authentication failed, closing connection", "listener", c.listener().Name,
			"remote", c.nc.RemoteAddr(), "err", err)
		c.sec.closeAfter = err
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if c.sec.sasl.stage == saslAuthenticated {
		c.setPrincipal("User:" + c.sec.sasl.user)
		s.log.Debug("transport: SASL authenticated", "listener", c.listener().Name, "remote", c.nc.RemoteAddr(),
			"principal", c.principal(), "mechanism", c.sec.sasl.mech)
	}
	return resp, nil
}
