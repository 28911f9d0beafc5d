package brokertest

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/netfault"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/transport/broker"
)

// MemCluster is an in-process cluster for deterministic fault tests of the
// code around storage and coordination: real brokers serving the Kafka
// protocol on 127.0.0.1 (clients and followers use real sockets), each on
// its own in-memory file system (crash clones cut its power), sharing an
// in-memory coordination store (sessions, watches, faults on demand), and
// following their leaders over a network that can be cut (netfault).
// End-to-end proof with ZooKeeper and processes is StartCluster's and
// harness/brokerproc's.
type MemCluster struct {
	t       testing.TB
	Store   *memstore.Server
	Net     *netfault.Net
	mods    []func(*broker.Config)
	members map[int32]*MemMember
}

// MemMember is one broker of a MemCluster.
type MemMember struct {
	ID   int32
	FS   *vfs.MemFS
	Log  *LogBuffer
	Addr string
	// Coord is the broker's connection to the store (Store.Disconnect,
	// Expire and Reconnect it to cut the broker off from coordination).
	Coord *memstore.Store
	b     *broker.Broker
}

// Broker is the running broker (nil while stopped).
func (m *MemMember) Broker() *broker.Broker { return m.b }

// StartMemCluster starts brokers 1..n; mods adjust each broker's config.
// Everything stops when the test ends.
func StartMemCluster(t testing.TB, n int, mods ...func(*broker.Config)) *MemCluster {
	t.Helper()
	c := &MemCluster{t: t, Store: memstore.NewServer(), Net: netfault.New(), mods: mods, members: map[int32]*MemMember{}}
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
	for i := range n {
		id := int32(i + 1)
		m := &MemMember{ID: id, FS: vfs.NewMem(), Log: &LogBuffer{}}
		c.members[id] = m
		c.Start(id)
	}
	c.awaitFormed()
	return c
}

// awaitFormed waits until every running broker lists every running broker,
// so that a test may create topics replicated on all of them at once.
func (c *MemCluster) awaitFormed() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		want := len(c.Addrs())
		formed := true
		for _, id := range c.IDs() {
			if m := c.members[id]; m.b != nil && len(m.b.Node().Brokers()) != want {
				formed = false
			}
		}
		if formed {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster of %d brokers did not form within 30s", want)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// IDs lists the brokers, running or not.
func (c *MemCluster) IDs() []int32 {
	var ids []int32
	for id := range c.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Member returns broker id.
func (c *MemCluster) Member(id int32) *MemMember {
	c.t.Helper()
	m := c.members[id]
	if m == nil {
		c.t.Fatalf("no broker %d", id)
	}
	return m
}

// Addrs returns the addresses of the running brokers.
func (c *MemCluster) Addrs() []string {
	var out []string
	for _, id := range c.IDs() {
		if m := c.members[id]; m.b != nil {
			out = append(out, m.Addr)
		}
	}
	return out
}

// Start starts broker id (again) on its file system.
func (c *MemCluster) Start(id int32) *MemMember {
	c.t.Helper()
	m := c.Member(id)
	cfg := memberConfig(c.t, id, "/data", m.Log)
	cfg.FS, cfg.Listen, cfg.ReplicaDialer = m.FS, "127.0.0.1:0", c.Net.Dialer(id)
	m.Coord = c.Store.Connect()
	cfg.Coord = m.Coord
	for _, mod := range c.mods {
		mod(&cfg)
	}
	b, err := broker.Start(cfg)
	if err != nil {
		c.t.Fatalf("broker %d: start: %v", id, err)
	}
	m.b, m.Addr = b, b.Addr()
	c.Net.Name(m.Addr, id)
	return m
}

// Stop stops broker id cleanly (its session ends, so the others see it go
// at once).
func (c *MemCluster) Stop(id int32) {
	c.t.Helper()
	m := c.Member(id)
	if m.b == nil {
		return
	}
	if err := m.b.Close(); err != nil {
		c.t.Errorf("broker %d: Close: %v", id, err)
	}
	m.b = nil
}

// PowerCut stops broker id as a power cut would leave it: its file system
// keeps only what was fsynced (a crash clone taken before it stops), and
// the next Start runs on that.
func (c *MemCluster) PowerCut(id int32) {
	c.t.Helper()
	m := c.Member(id)
	if m.b == nil {
		return
	}
	clone := m.FS.CrashClone()
	if err := m.b.Crash(); err != nil {
		c.t.Logf("broker %d: Crash: %v", id, err)
	}
	m.b = nil
	m.FS = clone
}
