package ktls

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"sync"
)

// KeyLog is a tls.Config.KeyLogWriter that keeps the TLS 1.3 application
// traffic secrets of the connections being set up, by client random. Take
// removes a connection's secrets once it has them, so KeyLog holds only
// handshakes in progress (or whose connection never took them: Forget).
type KeyLog struct {
	mu      sync.Mutex
	secrets map[string]Secrets
}

// Secrets are one connection's TLS 1.3 application traffic secrets.
type Secrets struct {
	Client, Server []byte
}

// Write takes one or more key log lines (crypto/tls writes one per call).
func (k *KeyLog) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 {
			continue
		}
		secret, err := hex.DecodeString(string(f[2]))
		if err != nil {
			continue
		}
		random := string(f[1])
		k.mu.Lock()
		if k.secrets == nil {
			k.secrets = map[string]Secrets{}
		}
		s := k.secrets[random]
		switch string(f[0]) {
		case "CLIENT_TRAFFIC_SECRET_0":
			s.Client = secret
		case "SERVER_TRAFFIC_SECRET_0":
			s.Server = secret
		default:
			k.mu.Unlock()
			continue
		}
		k.secrets[random] = s
		k.mu.Unlock()
	}
	return len(p), nil
}

// Take returns and forgets the secrets of the connection whose client
// random (hex) is random.
func (k *KeyLog) Take(random string) (Secrets, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.secrets[random]
	delete(k.secrets, random)
	return s, ok && s.Server != nil
}

// Len is the number of connections whose secrets are held.
func (k *KeyLog) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.secrets)
}

// TakeAny returns and forgets the secrets of some connection (tests with a
// single connection in flight).
func (k *KeyLog) TakeAny() (Secrets, bool) {
	k.mu.Lock()
	var random string
	for r := range k.secrets {
		random = r
		break
	}
	k.mu.Unlock()
	return k.Take(random)
}
