package layout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
)

// RegisterBroker registers b as live: it ensures /brokers/ids and creates
// the ephemeral /brokers/ids/<b.ID>, then reads it back and returns its
// czxid, the broker epoch (KIP-380).
//
// The registration is Kafka's CheckedEphemeral: a node owned by this
// session is success (a retry after ErrConnectionLoss, or a lost reply);
// one owned by another session is ErrBrokerIDInUse, naming the host:port
// registered there (a previous incarnation of this broker still within its
// session timeout, or another broker configured with the same id). A node
// that vanishes before it can be read (its session expired) is created
// again. Every endpoint (b.Listeners()) must have a listener name of
// [A-Za-z0-9_] used once, one of Kafka's four security protocols, a host
// Kafka's EndPoint parser reads back ([0-9a-zA-Z-%._:]) and a port in
// [1, 65535]: otherwise ErrInvalid.
// ErrConnectionLoss means the outcome is still unknown: call again.
func RegisterBroker(ctx context.Context, s coord.Store, b meta.Broker, nowMs int64) (epoch int64, err error) {
	path := BrokerPath(b.ID)
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("layout: register broker %d: %w", b.ID, err)
	}
	if b.ID < 0 {
		return fail(fmt.Errorf("%w: broker id %d < 0", ErrInvalid, b.ID))
	}
	if err := checkEndpoints(b); err != nil {
		return fail(err)
	}
	if err := coord.EnsurePath(ctx, s, BrokerIDsPath); err != nil {
		return fail(err)
	}
	data := EncodeBroker(b, nowMs)
	for {
		err := s.Create(ctx, path, data, coord.Ephemeral)
		if err != nil && !errors.Is(err, coord.ErrNodeExists) && !errors.Is(err, coord.ErrConnectionLoss) {
			return fail(err)
		}
		got, st, rerr := s.Get(ctx, path)
		switch {
		case errors.Is(rerr, coord.ErrNoNode):
			continue // never created, or its session ended: create it again
		case rerr != nil && err != nil:
			return fail(fmt.Errorf("%w (reading back: %w)", err, rerr))
		case rerr != nil:
			return fail(rerr)
		}
		if st.EphemeralOwner != 0 && st.EphemeralOwner == s.Session().ID {
			return st.Czxid, nil
		}
		holder := "an unreadable registration"
		if other, derr := DecodeBroker(path, got, st); derr == nil {
			holder = net.JoinHostPort(other.Host, strconv.FormatInt(int64(other.Port), 10))
		}
		return fail(fmt.Errorf("%w: %s is registered by %s (session %#x)", ErrBrokerIDInUse, path, holder, st.EphemeralOwner))
	}
}

// ReadBrokers returns the registered brokers, by id, and a watch on
// /brokers/ids's children (created first if missing). A registration that
// vanishes between the listing and its read is skipped (the watch fires
// for it); a malformed one, or a child whose name is not a broker id, is
// ErrMalformed naming it.
func ReadBrokers(ctx context.Context, s coord.Store) (map[int32]meta.Broker, <-chan coord.Event, error) {
	fail := func(err error) (map[int32]meta.Broker, <-chan coord.Event, error) {
		return nil, nil, fmt.Errorf("layout: read brokers: %w", err)
	}
	if err := coord.EnsurePath(ctx, s, BrokerIDsPath); err != nil {
		return fail(err)
	}
	names, _, watch, err := s.ChildrenW(ctx, BrokerIDsPath)
	if err != nil {
		return fail(err)
	}
	brokers := make(map[int32]meta.Broker, len(names))
	for _, name := range names {
		path := coord.Join(BrokerIDsPath, name)
		if _, ok := parseID(name); !ok {
			return fail(malformed(path, "the node's name is not a broker id"))
		}
		data, st, err := s.Get(ctx, path)
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		b, err := DecodeBroker(path, data, st)
		if err != nil {
			return fail(err)
		}
		brokers[b.ID] = b
	}
	return brokers, watch, nil
}

// checkEndpoints checks what RegisterBroker registers of b's endpoints.
func checkEndpoints(b meta.Broker) error {
	seen := map[string]bool{}
	for _, e := range b.Listeners() {
		switch {
		case !validListener(e.Listener):
			return fmt.Errorf("%w: listener name %q: want [A-Za-z0-9_]", ErrInvalid, e.Listener)
		case seen[strings.ToUpper(e.Listener)]:
			return fmt.Errorf("%w: listener %s named twice", ErrInvalid, e.Listener)
		case !slices.Contains(securityProtocols, e.Protocol):
			return fmt.Errorf("%w: listener %s: security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", ErrInvalid, e.Listener, e.Protocol)
		case !validHost(e.Host) || e.Port < 1 || e.Port > math.MaxUint16:
			return fmt.Errorf("%w: listener %s: address %q port %d: want a host of [0-9a-zA-Z-%%._:] (Kafka's) and a port in [1, 65535]",
				ErrInvalid, e.Listener, e.Host, e.Port)
		}
		seen[strings.ToUpper(e.Listener)] = true
	}
	return nil
}
