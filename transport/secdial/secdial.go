// Package secdial dials a broker's secured listener for the clients that
// speak the Kafka protocol on a connection of their own (a follower's
// replica fetcher, package peer): it wraps the connection in TLS and runs
// the SASL exchange (SaslHandshake v1, then SaslAuthenticate v2 until the
// mechanism is done) before handing the connection over, so the client
// then sends its requests as on a PLAINTEXT listener. The SASL mechanisms
// are franz-go's (pkg/sasl/plain, pkg/sasl/scram). The exchange uses
// correlation ids the client never sees, and reads exactly its answers, so
// nothing of the client's stream is consumed.
package secdial

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Dialer is the signature of net.Dialer.DialContext.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// ErrAuth: the broker refused the SASL exchange.
var ErrAuth = errors.New("secdial: SASL authentication failed")

// Wrap returns a dialer that dials with base (nil: net.Dialer), then does
// the TLS handshake when tlsCfg is set (its ServerName defaults to the
// host dialled) and the SASL exchange when mech is set.
func Wrap(base Dialer, tlsCfg *tls.Config, mech sasl.Mechanism) Dialer {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	if tlsCfg == nil && mech == nil {
		return base
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		nc, err := base(ctx, network, address)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(address)
		if tlsCfg != nil {
			cfg := tlsCfg.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
			tc := tls.Client(nc, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, fmt.Errorf("secdial: TLS handshake with %s: %w", address, err)
			}
			nc = tc
		}
		if mech != nil {
			if err := Authenticate(ctx, nc, host, mech); err != nil {
				nc.Close()
				return nil, fmt.Errorf("secdial: %s: %w", address, err)
			}
		}
		return nc, nil
	}
}

// Authenticate runs the SASL exchange of mech on nc (a fresh connection to
// a SASL listener), within ctx's deadline (or a minute).
func Authenticate(ctx context.Context, nc net.Conn, host string, mech sasl.Mechanism) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(time.Minute)
	}
	_ = nc.SetDeadline(dl)
	defer nc.SetDeadline(time.Time{})
	corr := int32(-1000)
	hs := &kmsg.SASLHandshakeRequest{Version: 1, Mechanism: mech.Name()}
	hresp := &kmsg.SASLHandshakeResponse{Version: 1}
	if err := roundTrip(nc, corr, hs, hresp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hresp.ErrorCode); err != nil {
		return fmt.Errorf("%w: handshake %s (broker offers %v): %w", ErrAuth, mech.Name(), hresp.SupportedMechanisms, err)
	}
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrAuth, mech.Name(), err)
	}
	for {
		corr++
		req := &kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: msg}
		resp := &kmsg.SASLAuthenticateResponse{Version: 2}
		if err := roundTrip(nc, corr, req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			m := ""
			if resp.ErrorMessage != nil {
				m = *resp.ErrorMessage
			}
			return fmt.Errorf("%w: %w: %s", ErrAuth, err, m)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrAuth, mech.Name(), err)
		}
		if done {
			return nil
		}
		msg = next
	}
}

// roundTrip writes req (request header v1, or v2 when flexible) and reads
// its response into resp.
func roundTrip(nc net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	id := "weir-secdial"
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := nc.Write(b); err != nil {
		return fmt.Errorf("secdial: write %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return fmt.Errorf("secdial: read %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("secdial: %s answer of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(nc, body); err != nil {
		return fmt.Errorf("secdial: read %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("secdial: %s answered with correlation id %d, want %d", kmsg.NameForKey(req.Key()), got, corr)
	}
	body = body[4:]
	if resp.IsFlexible() {
		if len(body) < 1 || body[0] != 0 {
			return fmt.Errorf("secdial: %s: response header tags not supported", kmsg.NameForKey(req.Key()))
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("secdial: decode %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}
