package brokertest

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/transport/broker"
)

// DefaultSessionTimeout is the ZooKeeper session timeout of a Cluster's
// brokers: short, so that a broker that dies without closing its session is
// forgotten quickly, and long enough for a loaded 2-core machine not to
// expire live sessions.
const DefaultSessionTimeout = 3 * time.Second

// Cluster is brokers joined through a real ZooKeeper (zktest, a standalone
// server), each a broker.Broker in this process on 127.0.0.1 with its own
// data directory and port, both kept across restarts. Broker ids start at 1.
// Its methods must be called from the test's goroutine.
type Cluster struct {
	t  testing.TB
	ZK *zktest.Cluster
	// SessionTimeout is the ZooKeeper session timeout the brokers ask for.
	SessionTimeout time.Duration

	mods    []func(*broker.Config)
	members map[int32]*Member
	nextID  int32
}

// Member is one broker of a Cluster, running or not.
type Member struct {
	ID   int32
	Dir  string // data directory, kept across restarts
	Addr string // 127.0.0.1:port, kept across restarts
	// Tap is the dialer of the running incarnation's ZooKeeper client: its
	// session (Tap.Session, for zktest.ExpireSession) and a way to cut it off.
	Tap *zktest.Tap
	// Log holds every line the member logged (all incarnations).
	Log *LogBuffer

	b *broker.Broker // nil while down
}

// Broker returns the running incarnation, nil while the member is down.
func (m *Member) Broker() *broker.Broker { return m.b }

// StartCluster starts a ZooKeeper server and n brokers joined through it,
// tuned as Start tunes a single broker, with SessionTimeout
// DefaultSessionTimeout. mods adjust every broker's config (also of brokers
// added or restarted later). Everything is stopped when the test ends. When
// ZooKeeper is not installed the test is skipped (failed under CI=true).
func StartCluster(t testing.TB, n int, mods ...func(*broker.Config)) *Cluster {
	t.Helper()
	zktest.Require(t)
	c := &Cluster{
		t:              t,
		ZK:             zktest.Start(t, zktest.Options{}),
		SessionTimeout: DefaultSessionTimeout,
		mods:           mods,
		members:        map[int32]*Member{},
		nextID:         1,
	}
	t.Cleanup(func() {
		for _, id := range c.IDs() {
			if m := c.members[id]; m.b != nil {
				if err := m.b.Close(); err != nil {
					t.Errorf("broker %d: Close: %v", id, err)
				}
				m.b = nil
			}
		}
	})
	for range n {
		c.Add()
	}
	return c
}

// Add starts a new broker (the next id) in the running cluster.
func (c *Cluster) Add() *Member {
	c.t.Helper()
	id := c.nextID
	c.nextID++
	m := &Member{ID: id, Dir: filepath.Join(c.t.TempDir(), fmt.Sprintf("broker-%d", id)), Log: &LogBuffer{}}
	c.members[id] = m
	if err := c.start(m, "127.0.0.1:0"); err != nil {
		c.t.Fatalf("broker %d: start: %v", id, err)
	}
	return m
}

// Config returns the config broker id starts with (without the address it
// listens on and the ZooKeeper dialer), for a test that starts a broker of
// its own. Its log lines go to the test log, and to log when not nil.
func (c *Cluster) Config(id int32, dir string, log *LogBuffer) broker.Config {
	cfg := memberConfig(c.t, id, dir, log)
	cfg.ZooKeeper, cfg.ZooKeeperSessionTimeout = c.ZK.ConnectString(), c.SessionTimeout
	for _, mod := range c.mods {
		mod(&cfg)
	}
	return cfg
}

// memberConfig is what every broker of a test cluster starts with: quick
// groups, auto-created topics, and its log lines (INFO and up) to the test
// log and to log, prefixed with its id.
func memberConfig(t testing.TB, id int32, dir string, log *LogBuffer) broker.Config {
	return broker.Config{
		DataDir:                    dir,
		NodeID:                     id,
		AutoCreateTopics:           true,
		GroupInitialRebalanceDelay: 0,
		GroupMinSessionTimeout:     100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(teeWriter{log: log, t: t, prefix: fmt.Sprintf("broker %d: ", id)},
			&slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

func (c *Cluster) start(m *Member, listen string) error {
	cfg := c.Config(m.ID, m.Dir, m.Log)
	cfg.Listen = listen
	m.Tap = zktest.NewTap()
	cfg.ZooKeeperDialer = m.Tap.Dial
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	m.b, m.Addr = b, b.Addr()
	return nil
}

// Member returns broker id; it fails the test when there is none.
func (c *Cluster) Member(id int32) *Member {
	c.t.Helper()
	m := c.members[id]
	if m == nil {
		c.t.Fatalf("no broker %d in the cluster", id)
	}
	return m
}

// Broker returns the running broker id; it fails the test when it is down.
func (c *Cluster) Broker(id int32) *broker.Broker {
	c.t.Helper()
	m := c.Member(id)
	if m.b == nil {
		c.t.Fatalf("broker %d is down", id)
	}
	return m.b
}

// IDs returns every member's id, running or not, sorted.
func (c *Cluster) IDs() []int32 {
	ids := make([]int32, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Addrs returns the addresses of the running brokers, by id.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.IDs() {
		if m := c.members[id]; m.b != nil {
			out = append(out, m.Addr)
		}
	}
	return out
}

// Stop shuts broker id down gracefully: its ZooKeeper session is closed, so
// its registration (and controllership) goes at once.
func (c *Cluster) Stop(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	if err := b.Close(); err != nil {
		c.t.Errorf("broker %d: Close: %v", id, err)
	}
	c.members[id].b = nil
}

// Kill makes broker id die the way a crashed process looks to the cluster:
// its ZooKeeper connection is cut first (the Tap refuses every dial), so
// its session, registration and controllership linger until ZooKeeper
// expires the session (SessionTimeout after its last heartbeat); then it
// stops serving clients. Its logs are closed in order (the in-process
// broker cannot lose its page cache; a SIGKILL test needs a subprocess).
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	m, b := c.Member(id), c.Broker(id)
	m.Tap.Partition()
	if err := b.Close(); err != nil {
		c.t.Logf("broker %d: Close after being cut off ZooKeeper: %v", id, err)
	}
	m.b = nil
}

// Restart starts broker id again on its data directory and address (which
// another process could have taken meanwhile: the test then fails). After
// Kill, its old session may still hold its registration: the broker waits
// for ZooKeeper to expire it (up to twice the session timeout).
func (c *Cluster) Restart(id int32) *broker.Broker {
	c.t.Helper()
	m := c.Member(id)
	if m.b != nil {
		c.t.Fatalf("broker %d is running", id)
	}
	if err := c.start(m, m.Addr); err != nil {
		c.t.Fatalf("broker %d: restart on %s: %v", id, m.Addr, err)
	}
	return m.b
}

// LogBuffer keeps log lines for a test to look for.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Contains reports whether a logged line contains every one of parts.
func (l *LogBuffer) Contains(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.buf.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// Count returns how many logged lines contain s.
func (l *LogBuffer) Count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// teeWriter writes a broker's log lines to its LogBuffer and to the test log.
type teeWriter struct {
	log    *LogBuffer
	t      testing.TB
	prefix string
}

func (w teeWriter) Write(p []byte) (int, error) {
	if w.log != nil {
		w.log.Write(p)
	}
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
