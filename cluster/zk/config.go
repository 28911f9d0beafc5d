package zk

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/coord"
)

// Defaults of Config.
const (
	// DefaultSessionTimeout is Kafka's zookeeper.session.timeout.ms (18 s).
	// The server clamps it to its [minSessionTimeout, maxSessionTimeout],
	// by default [2, 20] x tickTime: 4-40 s with ZooKeeper's tickTime of 2 s.
	DefaultSessionTimeout = 18 * time.Second
	// DefaultMaxBufferSize bounds a reply the client will read: 4 MiB, the
	// jute.maxbuffer Kafka's ZooKeeper client uses. go-zookeeper's own
	// default is unbounded, so a garbled length prefix would make it
	// allocate up to 4 GiB.
	DefaultMaxBufferSize = 4 << 20
	// DefaultPort is ZooKeeper's client port, for servers named without one.
	DefaultPort = 2181
)

// ErrConfig: the Config or connect string is invalid.
var ErrConfig = errors.New("zk: invalid config")

// Config says which ensemble to use and how. Servers is required.
type Config struct {
	// Servers are the ensemble's client addresses, host:port (a host
	// without a port gets DefaultPort). The client picks one at random and
	// moves to another when it loses its connection.
	Servers []string
	// Chroot, if not empty or "/", is an absolute path under which the store
	// lives: the store's "/" is Chroot on the servers, the way Kafka's
	// zookeeper.connect "host:port/chroot" works. Open creates it (and its
	// parents) when missing, as Kafka does. go-zookeeper has no chroot of
	// its own; the store prefixes paths itself.
	Chroot string
	// SessionTimeout is the session timeout asked for (default
	// DefaultSessionTimeout); the server may grant another within its
	// bounds. A session survives losing its connection for this long.
	SessionTimeout time.Duration
	// Logger receives the store's and go-zookeeper's messages, the latter at
	// debug level (default slog.Default()).
	Logger *slog.Logger
	// Dialer dials one server (default net.DialTimeout). Tests put
	// zktest.Tap's Dial here to cut connections and capture sessions.
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)
	// MaxBufferSize bounds the size of a reply (default DefaultMaxBufferSize);
	// match the servers' jute.maxbuffer.
	MaxBufferSize int
}

// validate fills in defaults and rejects nonsense.
func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("%w: no servers", ErrConfig)
	}
	servers := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addr, err := normalizeServer(s)
		if err != nil {
			return err
		}
		servers[i] = addr
	}
	c.Servers = servers
	if c.Chroot == "/" {
		c.Chroot = ""
	}
	if c.Chroot != "" {
		if err := coord.ValidatePath(c.Chroot); err != nil {
			return fmt.Errorf("%w: chroot: %w", ErrConfig, err)
		}
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.SessionTimeout < time.Millisecond {
		return fmt.Errorf("%w: session timeout %v", ErrConfig, c.SessionTimeout)
	}
	if c.Dialer == nil {
		c.Dialer = net.DialTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxBufferSize == 0 {
		c.MaxBufferSize = DefaultMaxBufferSize
	}
	if c.MaxBufferSize < 0 {
		return fmt.Errorf("%w: max buffer size %d", ErrConfig, c.MaxBufferSize)
	}
	return nil
}

func normalizeServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty server address", ErrConfig)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host name, IPv4 address or bracketed IPv6 address.
		h := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if strings.ContainsAny(h, "[]/") || (strings.Contains(h, ":") && !strings.HasPrefix(s, "[")) {
			return "", fmt.Errorf("%w: server %q: %w", ErrConfig, s, err)
		}
		return net.JoinHostPort(h, strconv.Itoa(DefaultPort)), nil
	}
	if host == "" {
		return "", fmt.Errorf("%w: server %q: no host", ErrConfig, s)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("%w: server %q: bad port", ErrConfig, s)
	}
	return net.JoinHostPort(host, port), nil
}

// ParseConnectString parses a Kafka-style zookeeper.connect string,
// "host:port[,host:port...][/chroot]", into the Servers and Chroot of a
// Config (the other fields are left zero). As in ZooKeeper's own client,
// the chroot follows the last server: "a:2181,b:2181/weir".
func ParseConnectString(s string) (Config, error) {
	s = strings.TrimSpace(s)
	hosts, chroot := s, ""
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], s[i:]
	}
	var cfg Config
	if chroot != "" && chroot != "/" {
		if err := coord.ValidatePath(chroot); err != nil {
			return Config{}, fmt.Errorf("%w: connect string %q: chroot: %w", ErrConfig, s, err)
		}
		cfg.Chroot = chroot
	}
	for _, h := range strings.Split(hosts, ",") {
		addr, err := normalizeServer(h)
		if err != nil {
			return Config{}, fmt.Errorf("connect string %q: %w", s, err)
		}
		cfg.Servers = append(cfg.Servers, addr)
	}
	return cfg, nil
}
