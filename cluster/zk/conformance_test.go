package zk_test

import (
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/coordtest"
)

// TestConformance runs coord's conformance suite against one real
// ZooKeeper server; each subtest gets an empty store: a fresh chroot.
func TestConformance(t *testing.T) {
	coordtest.Run(t, harness{zktest.Start(t, zktest.Options{})})
}

type harness struct{ c *zktest.Cluster }

func (h harness) New(t *testing.T) coordtest.Env {
	return &env{c: h.c, chroot: freshChroot(t), taps: map[coord.Store]*zktest.Tap{}}
}

// env is one chroot; every session dials through a Tap, so that Expire
// has the session's password.
type env struct {
	c      *zktest.Cluster
	chroot string
	mu     sync.Mutex
	taps   map[coord.Store]*zktest.Tap
}

func (e *env) Connect(t *testing.T) coord.Store {
	tap := zktest.NewTap()
	s := open(t, e.c, func(cfg *zk.Config) { cfg.Chroot, cfg.Dialer = e.chroot, tap.Dial })
	e.mu.Lock()
	e.taps[s] = tap
	e.mu.Unlock()
	return s
}

// Expire closes the session from a second connection with its id and
// password; the server has deleted its ephemerals when that returns.
func (e *env) Expire(t *testing.T, s coord.Store) {
	e.mu.Lock()
	tap := e.taps[s]
	e.mu.Unlock()
	id, passwd, _ := tap.Session()
	if id != s.Session().ID {
		t.Fatalf("tap saw session %#x, the store has %#x", id, s.Session().ID)
	}
	if err := zktest.ExpireSession(e.c.Servers[0].Addr, id, passwd, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
