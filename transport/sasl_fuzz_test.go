package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/credentials"
)

type credMap map[string]credentials.Credential

func (m credMap) Lookup(_ credentials.Mechanism, user string) (credentials.Credential, bool) {
	c, ok := m[user]
	return c, ok
}

func testCred(t testing.TB, password string) credentials.Credential {
	salt := []byte("0123456789abcdef")
	c, err := credentials.FromSaltedPassword(credentials.SHA256, salt,
		credentials.SaltPassword(credentials.SHA256, password, salt, 4096), 4096)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scramClientFinal computes a client's final message for the exchange so
// far (RFC 5802), with the nonce as given.
func scramClientFinal(password, clientFirstBare, serverFirst, nonce string) string {
	var salt []byte
	iters := 0
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "s="):
			salt, _ = base64.StdEncoding.DecodeString(a[2:])
		case strings.HasPrefix(a, "i="):
			for _, d := range a[2:] {
				iters = iters*10 + int(d-'0')
			}
		}
	}
	salted := credentials.SaltPassword(credentials.SHA256, password, salt, iters)
	mac := func(k []byte, m string) []byte { h := hmac.New(sha256.New, k); h.Write([]byte(m)); return h.Sum(nil) }
	clientKey := mac(salted, "Client Key")
	sum := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=" + nonce
	sig := mac(sum[:], clientFirstBare+","+serverFirst+","+withoutProof)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig)
}

// The SCRAM server accepts the right password (and librdkafka's doubled
// nonce), and refuses a wrong one, an unknown user and a wrong nonce.
func TestScramConversation(t *testing.T) {
	store := credMap{"bob": testCred(t, "pw")}
	run := func(user, password string, nonce func(cnonce, full string) string) error {
		s := &scramConv{m: credentials.SHA256, store: store}
		first := "n=" + user + ",r=clientnonce"
		out, done, _, err := s.step([]byte("n,," + first))
		if err != nil || done {
			return err
		}
		full := strings.TrimPrefix(strings.Split(string(out), ",")[0], "r=")
		_, done, got, err := s.step([]byte(scramClientFinal(password, first, string(out), nonce("clientnonce", full))))
		if err == nil && (!done || got != user) {
			t.Fatalf("authenticated %q, done %v", got, done)
		}
		return err
	}
	same := func(_, full string) string { return full }
	if err := run("bob", "pw", same); err != nil {
		t.Errorf("right password: %v", err)
	}
	if err := run("bob", "pw", func(c, full string) string { return c + full }); err != nil {
		t.Errorf("librdkafka's doubled nonce: %v", err)
	}
	for name, err := range map[string]error{
		"wrong password": run("bob", "nope", same),
		"unknown user":   run("eve", "pw", same),
		"wrong nonce":    run("bob", "pw", func(c, _ string) string { return c + "x" }),
	} {
		if err == nil {
			t.Errorf("%s: authenticated", name)
		}
	}
}

// FuzzSASLExchange drives a connection's SASL state with arbitrary
// handshakes and messages: it never panics, never authenticates without
// the right credentials, and a failure always leaves the exchange.
func FuzzSASLExchange(f *testing.F) {
	f.Add("PLAIN", []byte("\x00alice\x00alice-secret"), []byte{})
	f.Add("PLAIN", []byte("alice\x00alice\x00wrong"), []byte("more"))
	f.Add("SCRAM-SHA-256", []byte("n,,n=bob,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add("SCRAM-SHA-256", []byte("y,a=bob,n=bob,r=x,ext=1"), []byte(",p="))
	f.Add("SCRAM-SHA-512", []byte("n,,n==2Cb=3D,r=z"), []byte("c=,r=,p=!!"))
	f.Add("GSSAPI", []byte{}, []byte{})
	f.Add("SCRAM-SHA-256", []byte(""), []byte(strings.Repeat("=", 1000)))
	cfg := SASLConfig{PlainUsers: map[string]string{"alice": "alice-secret"}}
	bob := credMap{"bob": testCred(f, "pw")}
	f.Fuzz(func(t *testing.T, mech string, first, second []byte) {
		var st saslState
		c := cfg
		if mech == MechanismScramSHA256 || mech == MechanismScramSHA512 {
			st.stage, st.mech = saslAwaitAuthenticate, mech
			st.conv = &scramConv{m: credentials.SHA256, store: bob}
		} else if err, _ := st.handshake(c, mech); err != nil {
			return
		}
		for _, m := range [][]byte{first, second} {
			_, err := st.authenticate(m)
			if err != nil {
				if st.stage == saslAuthenticated {
					t.Fatal("failed and authenticated")
				}
				return
			}
			if st.stage == saslAuthenticated {
				break
			}
		}
		if st.stage == saslAuthenticated && st.mech == MechanismPlain && string(first) != "\x00alice\x00alice-secret" &&
			string(first) != "alice\x00alice\x00alice-secret" {
			t.Fatalf("PLAIN authenticated %q with %q", st.user, first)
		}
		if st.stage == saslAuthenticated && st.mech != MechanismPlain {
			t.Fatalf("SCRAM authenticated %q from fuzzed bytes", st.user)
		}
	})
}
