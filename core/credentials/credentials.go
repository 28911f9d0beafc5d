// Package credentials keeps the brokers' SCRAM credentials (RFC 5802,
// RFC 7677) in the coordination store, as Kafka keeps them in ZooKeeper:
//
//	/config/users/<sanitized user>   {"version":1,"config":{
//	    "SCRAM-SHA-256":"salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>",
//	    "SCRAM-SHA-512":"..."}}
//
// The user name is sanitized as Kafka's Sanitizer does (URL encoding, with
// "%20" for a space and "%2A" for '*'), so names with '/' fit in a path.
// A credential never holds the password: only the salt, the iteration count,
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"), which is what the server side of
// SCRAM needs. AlterUserScramCredentials sends the salted password
// (the client did the expensive PBKDF2), and Alter derives both keys from it.
//
// Every broker runs a Store: it watches /config/users and every user's node,
// and keeps a decoded copy that SCRAM authentications read without touching
// the store. Writes (Alter) go to the coordination store by compare-and-set
// on the version read, so concurrent alters of one user never lose each
// other's change; every broker's watch then picks them up. Kafka also writes
// a /config/changes/config_change_<n> notification; weir's brokers watch the
// user nodes themselves and write none (see package layout on topic configs).
//
// Garbage in a user's node (not JSON, a bad credential string) is an error
// naming the node's path: that user cannot authenticate with SCRAM, Describe
// reports the error for that user, and every other user is served.
package credentials

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strconv"
	"strings"
)

// Mechanism is a SCRAM mechanism.
type Mechanism int8

// The SCRAM mechanisms, numbered as Kafka's ScramMechanism (the numbers
// DescribeUserScramCredentials and AlterUserScramCredentials carry).
const (
	SHA256 Mechanism = 1
	SHA512 Mechanism = 2
)

// Mechanisms lists the mechanisms, in order.
var Mechanisms = []Mechanism{SHA256, SHA512}

// Iteration bounds, Kafka's (ScramMechanism.minIterations/maxIterations).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

var (
	// ErrMalformed: a user's node or credential string does not decode.
	ErrMalformed = errors.New("credentials: malformed")
	// ErrUnknownMechanism: not SCRAM-SHA-256 nor SCRAM-SHA-512.
	ErrUnknownMechanism = errors.New("credentials: unknown SCRAM mechanism")
	// ErrUnacceptable: an iteration count out of range, an empty user name,
	// salt or salted password.
	ErrUnacceptable = errors.New("credentials: unacceptable credential")
	// ErrNotFound: deleting a credential that does not exist.
	ErrNotFound = errors.New("credentials: no such credential")
	// ErrDuplicate: one request names the same user twice.
	ErrDuplicate = errors.New("credentials: user named twice in one request")
)

// String is the mechanism's SASL name, "SCRAM-SHA-256" or "SCRAM-SHA-512".
func (m Mechanism) String() string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return "SCRAM-UNKNOWN(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is SHA256 or SHA512.
func (m Mechanism) Valid() bool { return m == SHA256 || m == SHA512 }

// ParseMechanism accepts "SCRAM-SHA-256" and "SCRAM-SHA-512".
func ParseMechanism(name string) (Mechanism, error) {
	for _, m := range Mechanisms {
		if name == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownMechanism, name)
}

// Hash returns the mechanism's hash constructor.
func (m Mechanism) Hash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is what the server keeps of one user's password for one
// mechanism.
type Credential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// FromSaltedPassword derives a credential from a salted password
// (Hi(password, salt, iterations), which AlterUserScramCredentials carries).
func FromSaltedPassword(m Mechanism, salt, salted []byte, iterations int) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("%w: %d", ErrUnknownMechanism, m)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %s iterations %d outside [%d, %d]", ErrUnacceptable, m, iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(salted) == 0 {
		return Credential{}, fmt.Errorf("%w: empty salt or salted password", ErrUnacceptable)
	}
	h := m.Hash()
	mac := func(key []byte, msg string) []byte {
		x := hmac.New(h, key)
		x.Write([]byte(msg))
		return x.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{Salt: append([]byte(nil), salt...), StoredKey: sum.Sum(nil),
		ServerKey: mac(salted, "Server Key"), Iterations: iterations}, nil
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802: PBKDF2 with
// the mechanism's HMAC (what a client sends in AlterUserScramCredentials).
func SaltPassword(m Mechanism, password string, salt []byte, iterations int) []byte {
	h := m.Hash()
	size := h().Size()
	u := hmac.New(h, []byte(password))
	u.Write(salt)
	u.Write([]byte{0, 0, 0, 1})
	prev := u.Sum(nil)
	out := append([]byte(nil), prev...)
	for i := 1; i < iterations; i++ {
		u = hmac.New(h, []byte(password))
		u.Write(prev)
		prev = u.Sum(prev[:0])
		for j := range size {
			out[j] ^= prev[j]
		}
	}
	return out
}

// String is Kafka's ZooKeeper form of the credential:
// "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>".
func (c Credential) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return "salt=" + b64(c.Salt) + ",stored_key=" + b64(c.StoredKey) + ",server_key=" + b64(c.ServerKey) +
		",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseCredential parses Credential.String's form; errors wrap ErrMalformed
// and name where (a node's path and key) the string came from.
func ParseCredential(where, s string) (Credential, error) {
	bad := func(format string, args ...any) (Credential, error) {
		return Credential{}, fmt.Errorf("%w: %s: %s", ErrMalformed, where, fmt.Sprintf(format, args...))
	}
	var c Credential
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bad("%q is not key=value", kv)
		}
		if seen[k] {
			return bad("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
			if err == nil && c.Iterations <= 0 {
				err = errors.New("not positive")
			}
		default:
			return bad("unknown key %q", k)
		}
		if err != nil {
			return bad("%s: %v", k, err)
		}
	}
	for _, k := range []string{"salt", "stored_key", "server_key", "iterations"} {
		if !seen[k] {
			return bad("%s missing", k)
		}
	}
	if len(c.Salt) == 0 || len(c.StoredKey) == 0 || len(c.ServerKey) == 0 {
		return bad("empty salt or key")
	}
	return c, nil
}

// UsersPath is the parent of the users' nodes.
const UsersPath = "/config/users"

// UserPath is the node of user's credentials.
func UserPath(user string) string { return UsersPath + "/" + Sanitize(user) }

// Sanitize is Kafka's Sanitizer.sanitize: URL encoding (UTF-8), with "%20"
// for a space, "%2A" for '*' and '~' left as it is.
func Sanitize(name string) string {
	s := url.QueryEscape(name)
	s = strings.ReplaceAll(s, "+", "%20")
	s = strings.ReplaceAll(s, "*", "%2A")
	return strings.ReplaceAll(s, "%7E", "~")
}

// Desanitize undoes Sanitize.
func Desanitize(name string) (string, error) { return url.PathUnescape(name) }
