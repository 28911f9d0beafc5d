package transport

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/credentials"
)

// scramConv is the server side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677),
// without channel binding (gs2 "n" or "y"), as Kafka's ScramSaslServer:
//
//	client-first  n,[a=authzid],n=user,r=cnonce[,extensions]
//	server-first  r=cnonce+snonce,s=base64(salt),i=iterations
//	client-final  c=base64(gs2 header),r=cnonce+snonce,p=base64(proof)
//	server-final  v=base64(ServerSignature)
//
// The proof is checked against the stored key: ClientKey = proof XOR
// HMAC(StoredKey, AuthMessage), and H(ClientKey) must be StoredKey.
// librdkafka before 2.6.1 sends r=cnonce+cnonce+snonce in client-final (its
// bug 4895); Kafka 3.8.1 to 3.9 accept a nonce that ends with the server's
// (so librdkafka 2.0, Debian 12's, authenticates), and weir does the same.
// Unknown users get the same failure as a wrong password.
type scramConv struct {
	m     credentials.Mechanism
	store interface {
		Lookup(credentials.Mechanism, string) (credentials.Credential, bool)
	}

	stage       int // 0: client-first expected, 1: client-final, 2: done
	gs2, user   string
	nonce       string // cnonce+snonce
	first, sent string // client-first-bare, server-first
	cred        credentials.Credential
	known       bool
}

func (s *scramConv) step(msg []byte) ([]byte, bool, string, error) {
	switch s.stage {
	case 0:
		s.stage = 1
		return s.clientFirst(string(msg))
	case 1:
		s.stage = 2
		return s.clientFinal(string(msg))
	}
	return nil, false, "", errors.New("SCRAM exchange already complete")
}

func (s *scramConv) clientFirst(m string) ([]byte, bool, string, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(m, ",")
	if !ok || (flag != "n" && flag != "y") {
		return nil, false, "", fmt.Errorf("client-first: channel binding %q not supported", flag)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, "", errors.New("client-first: no gs2 header")
	}
	s.gs2 = flag + "," + authz + ","
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, "", errors.New("client-first: want n=user,r=nonce")
	}
	user, err := scramName(attrs[0][2:])
	if err != nil {
		return nil, false, "", err
	}
	if authz != "" {
		if !strings.HasPrefix(authz, "a=") {
			return nil, false, "", errors.New("client-first: bad authzid")
		}
		if a, err := scramName(authz[2:]); err != nil || a != user {
			return nil, false, "", fmt.Errorf("client-first: authorization id %q is not the user %q", authz[2:], user)
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return nil, false, "", errors.New("client-first: empty nonce")
	}
	s.user, s.first = user, bare
	s.cred, s.known = s.store.Lookup(s.m, user)
	if !s.known {
		// Carry on with a made-up salt, so the answer does not tell
		// whether the user exists; the proof fails at client-final.
		s.cred = credentials.Credential{Salt: []byte(scramNonce()[:16]), Iterations: credentials.MinIterations}
	}
	s.nonce = cnonce + scramNonce()
	s.sent = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.sent), false, "", nil
}

func (s *scramConv) clientFinal(m string) ([]byte, bool, string, error) {
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, false, "", errors.New("client-final: no proof")
	}
	withoutProof, proof64 := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, "", errors.New("client-final: want c=...,r=...")
	}
	if attrs[0][2:] != base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return nil, false, "", errors.New("client-final: channel binding does not match the gs2 header")
	}
	if n := attrs[1][2:]; n != s.nonce && !strings.HasSuffix(n, s.nonce) {
		return nil, false, "", errors.New("client-final: nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil {
		return nil, false, "", fmt.Errorf("client-final: proof: %v", err)
	}
	if !s.known {
		return nil, false, "", fmt.Errorf("unknown user %q", s.user)
	}
	h := s.m.Hash()
	authMsg := s.first + "," + s.sent + "," + withoutProof
	mac := hmac.New(h, s.cred.StoredKey)
	mac.Write([]byte(authMsg))
	sig := mac.Sum(nil)
	if len(proof) != len(sig) {
		return nil, false, "", errors.New("invalid proof")
	}
	for j := range sig {
		sig[j] ^= proof[j]
	}
	sum := h()
	sum.Write(sig)
	if subtle.ConstantTimeCompare(sum.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, "", errors.New("invalid proof")
	}
	mac = hmac.New(h, s.cred.ServerKey)
	mac.Write([]byte(authMsg))
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), true, s.user, nil
}

// scramName decodes a SCRAM saslname ("=2C" is ',', "=3D" is '=').
func scramName(s string) (string, error) {
	if s == "" {
		return "", errors.New("SCRAM: empty user name")
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("SCRAM: bad escape in user name %q", s)
		}
		i += 2
	}
	return b.String(), nil
}
