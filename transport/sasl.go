package transport

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"

	"github.com/weir-broker/weir/core/credentials"
)

// SASL mechanism names.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig configures SASL authentication on the SASL listeners.
type SASLConfig struct {
	// PlainUsers are the users (name to password) PLAIN accepts, like the
	// user_<name>="<password>" options of Kafka's PlainLoginModule. Empty:
	// PLAIN is not offered.
	PlainUsers map[string]string
	// Scram holds the SCRAM credentials (and serves
	// DescribeUserScramCredentials and AlterUserScramCredentials); nil:
	// SCRAM is not offered and those APIs answer errors.
	Scram *credentials.Store
	// Mechanisms are the mechanisms offered, Kafka's
	// sasl.enabled.mechanisms. Default: PLAIN when PlainUsers is set, and
	// both SCRAM mechanisms when Scram is.
	Mechanisms []string
}

// mechanisms returns the mechanisms offered: nil when none.
func (c SASLConfig) mechanisms() []string {
	if len(c.Mechanisms) > 0 {
		return c.Mechanisms
	}
	var ms []string
	if len(c.PlainUsers) > 0 {
		ms = append(ms, MechanismPlain)
	}
	if c.Scram != nil {
		ms = append(ms, MechanismScramSHA256, MechanismScramSHA512)
	}
	return ms
}

func (c SASLConfig) validate() error {
	for _, m := range c.Mechanisms {
		switch m {
		case MechanismPlain:
			if len(c.PlainUsers) == 0 {
				return fmt.Errorf("%w: SASL mechanism PLAIN enabled without PLAIN users", ErrConfig)
			}
		case MechanismScramSHA256, MechanismScramSHA512:
			if c.Scram == nil {
				return fmt.Errorf("%w: SASL mechanism %s enabled without a credential store", ErrConfig, m)
			}
		default:
			return fmt.Errorf("%w: SASL mechanism %q: weir offers PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", ErrConfig, m)
		}
	}
	return nil
}

// The stages of a connection's SASL exchange (Kafka's
// SaslServerAuthenticator states, without the v0 raw-token mode).
const (
	saslAwaitHandshake    = iota // ApiVersions or SaslHandshake expected
	saslAwaitAuthenticate        // SaslAuthenticate expected
	saslAuthenticated            // done: every API is served
)

// errAuthFailed: the client's credentials were refused.
var errAuthFailed = errors.New("transport: SASL authentication failed")

// saslState is one connection's SASL exchange: a value driven by the
// handshake and authenticate messages, which does no I/O.
type saslState struct {
	stage int
	mech  string
	conv  saslConversation
	user  string // set once authenticated
}

// saslConversation is one mechanism's server side.
type saslConversation interface {
	// step takes the client's next message and returns the server's
	// answer, whether the exchange is done, and the user once done. An
	// error ends the exchange (authentication failed).
	step(msg []byte) (resp []byte, done bool, user string, err error)
}

// handshake moves the state on a SaslHandshake naming mech; it returns the
// Kafka error to answer with (nil: accepted) and whether the connection
// closes after the answer.
func (st *saslState) handshake(cfg SASLConfig, mech string) (err error, close bool) {
	if st.stage != saslAwaitHandshake {
		return errIllegalSaslState, true
	}
	if !slices.Contains(cfg.mechanisms(), mech) {
		return errUnsupportedMechanism, true
	}
	conv, err := newConversation(cfg, mech)
	if err != nil {
		return errUnsupportedMechanism, true
	}
	st.stage, st.mech, st.conv = saslAwaitAuthenticate, mech, conv
	return nil, false
}

// authenticate moves the state on a SaslAuthenticate's bytes; it returns
// the answer's bytes, and an error that ends the connection after the
// answer (errAuthFailed or errIllegalSaslState).
func (st *saslState) authenticate(msg []byte) ([]byte, error) {
	if st.stage != saslAwaitAuthenticate {
		return nil, errIllegalSaslState
	}
	resp, done, user, err := st.conv.step(msg)
	if err != nil {
		st.stage, st.conv = saslAwaitHandshake, nil
		return resp, fmt.Errorf("%w: %s: %w", errAuthFailed, st.mech, err)
	}
	if done {
		st.stage, st.user, st.conv = saslAuthenticated, user, nil
	}
	return resp, nil
}

var (
	errIllegalSaslState     = errors.New("transport: request not valid in the current SASL state")
	errUnsupportedMechanism = errors.New("transport: SASL mechanism not enabled")
)

func newConversation(cfg SASLConfig, mech string) (saslConversation, error) {
	switch mech {
	case MechanismPlain:
		return &plainConv{users: cfg.PlainUsers}, nil
	case MechanismScramSHA256, MechanismScramSHA512:
		m, err := credentials.ParseMechanism(mech)
		if err != nil || cfg.Scram == nil {
			return nil, errUnsupportedMechanism
		}
		return &scramConv{m: m, store: cfg.Scram}, nil
	}
	return nil, errUnsupportedMechanism
}

// scramNonce is the server's part of the SCRAM nonce: 32 random letters and
// digits, as Kafka's ScramFormatter makes it.
func scramNonce() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// plainConv is PLAIN (RFC 4616): one message, authzid NUL user NUL
// password; the authzid must be empty or the user (as Kafka requires).
type plainConv struct{ users map[string]string }

func (p *plainConv) step(msg []byte) ([]byte, bool, string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, "", errors.New("PLAIN message is not authzid NUL user NUL password")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, "", errors.New("PLAIN: empty user name")
	}
	if authz != "" && authz != user {
		return nil, false, "", fmt.Errorf("PLAIN: authorization id %q is not the user %q", authz, user)
	}
	want, ok := p.users[user]
	// Compare even for unknown users, so timing tells nothing.
	if subtle.ConstantTimeCompare([]byte(want), pass) != 1 || !ok {
		return nil, false, "", fmt.Errorf("invalid credentials for user %q", user)
	}
	return nil, true, user, nil
}
