package zk_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/coord"
)

// testExpiry expires the session from outside (zktest.ExpireSession with the
// password the tap saw): the server deletes the ephemerals at once, the
// client finds out on its reconnect, every watch fires NotWatching with
// ErrSessionExpired, and the store goes on with a new session.
func testExpiry(t *testing.T, c *zktest.Cluster) {
	tap := zktest.NewTap()
	logger, rec := newLogRecorder(t)
	s := open(t, c, func(cfg *zk.Config) { cfg.Dialer, cfg.Logger = tap.Dial, logger })
	observer := open(t, c, func(cfg *zk.Config) { cfg.Chroot = s.Chroot() })
	ctx := ctxT(t)
	if err := s.Create(ctx, "/reg", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "/data", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, dataW, err := s.GetW(ctx, "/data")
	if err != nil {
		t.Fatal(err)
	}
	_, _, regW, err := s.ExistsW(ctx, "/reg")
	if err != nil {
		t.Fatal(err)
	}
	_, _, gone, err := observer.ExistsW(ctx, "/reg")
	if err != nil {
		t.Fatal(err)
	}
	old := s.Session()
	id, passwd, timeout := tap.Session()
	if id != old.ID || old.State != coord.Connected {
		t.Fatalf("tap saw session %#x, store has %v %#x", id, old.State, old.ID)
	}
	if timeout != sessionTimeout {
		t.Errorf("negotiated session timeout %v, asked for %v", timeout, sessionTimeout)
	}
	t0 := time.Now()
	if err := zktest.ExpireSession(c.Servers[0].Addr, id, passwd, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, gone, 5*time.Second); ev.Type != coord.EventNodeDeleted {
		t.Fatalf("observer: %+v, want the ephemeral deleted", ev)
	}
	for name, w := range map[string]<-chan coord.Event{"GetW": dataW, "ExistsW": regW} {
		ev := event(t, w, 10*time.Second)
		if ev.Type != coord.EventNotWatching || ev.Err != coord.ErrSessionExpired {
			t.Errorf("%s of the expired session: %+v, want not-watching/session expired", name, ev)
		}
	}
	now := waitSession(t, s, 10*time.Second, "connected with a new session", func(sess coord.Session) bool {
		return sess.State == coord.Connected && sess.ID != old.ID
	})
	t.Logf("new session %#x %v after ExpireSession", now.ID, time.Since(t0))
	select {
	case <-old.Changed:
	default:
		t.Error("the old snapshot's Changed is still open")
	}
	if !rec.has("WARN zk: session expired") {
		t.Error("the expiry was not reported (state Expired)")
	}
	// The new session works and owns what it creates; the old data node
	// is still there (persistent).
	if err := s.Create(ctx, "/reg", nil, coord.Ephemeral); err != nil {
		t.Fatalf("re-register in the new session: %v", err)
	}
	if _, st, err := s.Get(ctx, "/reg"); err != nil || st.EphemeralOwner != now.ID {
		t.Fatalf("Get(/reg) = %+v, %v; want owner %#x", st, err, now.ID)
	}
	if _, _, err := s.Get(ctx, "/data"); err != nil {
		t.Fatal(err)
	}
}

// testUnknownOutcome makes the ephemeral create's reply go missing or
// garbled after the server applied it, or drops the request before the
// server sees it: Create resolves each by reading back and succeeds without
// a second node or a spurious ErrNodeExists.
func testUnknownOutcome(t *testing.T, c *zktest.Cluster) {
	for _, fault := range []zktest.Fault{zktest.DropRequest, zktest.DropReply, zktest.GarbleReply} {
		t.Run(fault.String(), func(t *testing.T) {
			tap := zktest.NewTap()
			s := open(t, c, func(cfg *zk.Config) { cfg.Dialer = tap.Dial })
			ctx := ctxT(t)
			struck := tap.Arm(zktest.OpCreate, fault)
			if err := s.Create(ctx, "/broker", []byte("b1"), coord.Ephemeral); err != nil {
				t.Fatalf("Create through %v: %v", fault, err)
			}
			select {
			case <-struck:
			default:
				t.Fatalf("the %v fault did not strike", fault)
			}
			data, st, err := s.Get(ctx, "/broker")
			if err != nil || string(data) != "b1" || st.EphemeralOwner != s.Session().ID {
				t.Fatalf("Get = %q, %+v, %v; want b1 owned by %#x", data, st, err, s.Session().ID)
			}
			// The same fault on a persistent create is reported, not resolved.
			struck = tap.Arm(zktest.OpCreate, fault)
			err = s.Create(ctx, "/plain", nil, coord.Persistent)
			<-struck
			if !errors.Is(err, coord.ErrConnectionLoss) {
				t.Fatalf("persistent Create through %v: %v, want connection loss", fault, err)
			}
			var ok bool
			retryLoss(t, func() (err error) { ok, _, err = s.Exists(ctx, "/plain"); return err })
			if ok != (fault != zktest.DropRequest) {
				t.Fatalf("after %v the persistent node exists: %v", fault, ok)
			}
		})
	}
	// The create is applied in session A, its reply lost, and A expires
	// before the client gets back (held off by a partition): the node went
	// with A, so Create makes it again, in the new session.
	t.Run("drop-reply-then-expiry", func(t *testing.T) {
		tap := zktest.NewTap()
		s := open(t, c, func(cfg *zk.Config) { cfg.Dialer = tap.Dial })
		ctx := ctxT(t)
		old, passwd, _ := tap.Session()
		struck := tap.Arm(zktest.OpCreate, zktest.DropReply)
		errc := make(chan error, 1)
		go func() { errc <- s.Create(ctx, "/broker", []byte("b1"), coord.Ephemeral) }()
		<-struck
		tap.Partition()
		if err := zktest.ExpireSession(c.Servers[0].Addr, old, passwd, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		tap.Heal()
		if err := <-errc; err != nil {
			t.Fatalf("Create across a lost reply and an expiry: %v", err)
		}
		now := s.Session()
		if now.ID == old {
			t.Fatalf("still session %#x after its expiry", old)
		}
		if _, st, err := s.Get(ctx, "/broker"); err != nil || st.EphemeralOwner != now.ID {
			t.Fatalf("Get = %+v, %v; want owner %#x", st, err, now.ID)
		}
	})
	t.Run("owned-by-another-session", func(t *testing.T) {
		tap := zktest.NewTap()
		s := open(t, c, func(cfg *zk.Config) { cfg.Dialer = tap.Dial })
		other := open(t, c, func(cfg *zk.Config) { cfg.Chroot = s.Chroot() })
		ctx := ctxT(t)
		if err := other.Create(ctx, "/broker", nil, coord.Ephemeral); err != nil {
			t.Fatal(err)
		}
		tap.Arm(zktest.OpCreate, zktest.DropRequest)
		err := s.Create(ctx, "/broker", nil, coord.Ephemeral)
		if !errors.Is(err, coord.ErrNodeExists) {
			t.Fatalf("Create of another session's ephemeral after an unknown outcome: %v", err)
		}
		if owned, err := s.OwnsEphemeral(ctx, "/broker"); owned || err != nil {
			t.Fatalf("OwnsEphemeral = %v, %v", owned, err)
		}
	})
}

// TestOutage stops ZooKeeper for longer than the session timeout: requests
// fail with ErrConnectionLoss within their ctx, the session goes Connecting,
// and after the restart it is Connected again with the same id, its
// ephemeral still owned and its watch still set. A restarted server gives
// every session it loads a fresh timeout, so the outage alone expires
// nothing.
func TestOutage(t *testing.T) {
	c := zktest.Start(t, zktest.Options{})
	// A restarted server gives every session a fresh timeout; the client must
	// reconnect within it, which on a loaded machine (1 s redial pauses, a
	// server still loading its database) can take seconds: go-zookeeper
	// whose first try met a server bound but not yet serving came back 5 to
	// 9 s later in full test runs, so this session's timeout is four times
	// the usual (ZooKeeper's maxSessionTimeout here is 20 s).
	timeout := 4 * sessionTimeout
	s := open(t, c, func(cfg *zk.Config) { cfg.SessionTimeout = timeout })
	observer := open(t, c, func(cfg *zk.Config) { cfg.Chroot = s.Chroot() })
	ctx := ctxT(t)
	if err := s.Create(ctx, "/reg", []byte("me"), coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, "/cfg", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, cfgW, err := s.GetW(ctx, "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	before := s.Session()

	stopped := time.Now()
	c.Servers[0].Stop()
	waitSession(t, s, 10*time.Second, "connecting", func(sess coord.Session) bool { return sess.State == coord.Connecting })
	for _, op := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"get", func(ctx context.Context) error { _, _, err := s.Get(ctx, "/cfg"); return err }},
		{"set", func(ctx context.Context) error { _, err := s.Set(ctx, "/cfg", []byte("x"), -1); return err }},
		{"create ephemeral", func(ctx context.Context) error { return s.Create(ctx, "/other", nil, coord.Ephemeral) }},
		{"multi", func(ctx context.Context) error {
			_, err := s.Multi(ctx, &coord.CheckOp{Path: "/cfg", Version: -1})
			return err
		}},
	} {
		const limit = 300 * time.Millisecond
		rctx, cancel := context.WithTimeout(ctx, limit)
		t0 := time.Now()
		err := op.do(rctx)
		took := time.Since(t0)
		cancel()
		if !errors.Is(err, coord.ErrConnectionLoss) {
			t.Errorf("%s while ZooKeeper is down: %v, want connection loss", op.name, err)
		}
		if took > limit+200*time.Millisecond {
			t.Errorf("%s took %v with a %v ctx", op.name, took, limit)
		}
	}
	if sess := s.Session(); sess.ID != before.ID || sess.State != coord.Connecting {
		t.Fatalf("during the outage: %v %#x", sess.State, sess.ID)
	}
	// Stay down past the session timeout: the outage's length is what is
	// tested here, not a guess at how long something takes.
	<-time.After(time.Until(stopped.Add(timeout + 500*time.Millisecond)))
	c.Servers[0].Start()
	ctx = ctxT(t) // a fresh deadline: the outage outlasts the first
	t.Logf("ZooKeeper was down %v (session timeout %v)", time.Since(stopped), timeout)
	after := waitSession(t, s, 10*time.Second, "connected again", func(sess coord.Session) bool { return sess.State == coord.Connected })
	if after.ID != before.ID {
		t.Fatalf("the session changed across the outage: %#x -> %#x", before.ID, after.ID)
	}
	if owned, err := s.OwnsEphemeral(ctx, "/reg"); !owned || err != nil {
		t.Fatalf("the ephemeral after the outage: owned %v, %v", owned, err)
	}
	quiet(t, cfgW)
	waitSession(t, observer, 10*time.Second, "observer connected", func(sess coord.Session) bool { return sess.State == coord.Connected })
	if _, err := observer.Set(ctx, "/cfg", []byte("after"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if ev := event(t, cfgW, 5*time.Second); ev.Type != coord.EventNodeDataChanged {
		t.Fatalf("a watch set before the outage: %+v", ev)
	}
}

// TestHungServer freezes ZooKeeper (SIGSTOP) with the connection open:
// go-zookeeper would wait for the reply until it declares the connection
// dead (2/3 of the session timeout), so only ctx bounds the request. The
// write given up on is applied anyway once the server goes on: that is
// what "outcome unknown" means.
func TestHungServer(t *testing.T) {
	c := zktest.Start(t, zktest.Options{})
	s := open(t, c, nil)
	ctx := ctxT(t)
	if err := s.Create(ctx, "/n", []byte("before"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	before := s.Session()
	c.Servers[0].Pause()
	const limit = 300 * time.Millisecond
	rctx, cancel := context.WithTimeout(ctx, limit)
	t0 := time.Now()
	_, err := s.Set(rctx, "/n", []byte("during"), coord.AnyVersion)
	took := time.Since(t0)
	cancel()
	c.Servers[0].Resume()
	if !errors.Is(err, coord.ErrConnectionLoss) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Set to a hung server: %v, want connection loss (deadline exceeded)", err)
	}
	if took > limit+200*time.Millisecond {
		t.Fatalf("Set took %v with a %v ctx", took, limit)
	}
	data, _, err := s.Get(ctx, "/n")
	if err != nil || string(data) != "during" {
		t.Fatalf("after the server resumed: Get = %q, %v; want the abandoned Set applied", data, err)
	}
	if after := s.Session(); after.ID != before.ID || after.State != coord.Connected {
		t.Fatalf("session %v %#x after the pause, was %#x", after.State, after.ID, before.ID)
	}
}

// TestEnsembleFailover kills the member the store is connected to: the store
// moves to another member within the session, keeping its id and ephemeral.
func TestEnsembleFailover(t *testing.T) {
	c := zktest.StartEnsemble(t, 3, zktest.Options{})
	s := open(t, c, func(cfg *zk.Config) { cfg.SessionTimeout = 8 * time.Second })
	ctx := ctxT(t)
	if err := s.Create(ctx, "/reg", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	before := s.Session()
	victim := c.Member(s.Server())
	if victim == nil {
		t.Fatalf("connected to %s, not a member of %v", s.Server(), c.Addrs())
	}
	mode, _ := victim.Mode()
	t0 := time.Now()
	victim.Kill()
	waitSession(t, s, 10*time.Second, "connecting", func(sess coord.Session) bool { return sess.State != coord.Connected })
	after := waitSession(t, s, 20*time.Second, "connected", func(sess coord.Session) bool { return sess.State == coord.Connected })
	t.Logf("killed member %d (%s); reconnected to %s in %v", victim.ID, mode, s.Server(), time.Since(t0))
	if after.ID != before.ID {
		t.Fatalf("the session changed: %#x -> %#x", before.ID, after.ID)
	}
	if s.Server() == victim.Addr {
		t.Fatalf("connected to the killed member %s", victim.Addr)
	}
	if owned, err := s.OwnsEphemeral(ctx, "/reg"); !owned || err != nil {
		t.Fatalf("the ephemeral after failover: owned %v, %v", owned, err)
	}
	if err := s.Create(ctx, "/written-after", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	victim.Start()
}

func TestOpenTimesOutWithoutServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	logger, _ := newLogRecorder(t)
	t0 := time.Now()
	_, err = zk.Open(ctx, zk.Config{Servers: []string{addr}, Logger: logger})
	if !errors.Is(err, coord.ErrConnectionLoss) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open without a server: %v", err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Fatalf("Open took %v with a 500ms ctx", took)
	}
}

// TestSilentServerDuringHandshake: a server that accepts the connection and
// never answers the session handshake (a ZooKeeper still starting, or hung)
// holds the client for at most a session timeout, after which it tries
// again, instead of the ten read timeouts go-zookeeper gives a handshake
// (over six session timeouts), by when the session the client wanted to
// resume would have expired.
func TestSilentServerDuringHandshake(t *testing.T) {
	c := zktest.Start(t, zktest.Options{})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		silent.Close()
		<-accepted
	}()
	var dials atomic.Int32
	const timeout = time.Second
	logger, _ := newLogRecorder(t)
	cfg := zk.Config{Servers: c.Addrs(), Chroot: freshChroot(t), SessionTimeout: timeout, Logger: logger,
		Dialer: func(network, addr string, d time.Duration) (net.Conn, error) {
			if dials.Add(1) == 1 {
				return net.DialTimeout(network, silent.Addr().String(), d)
			}
			return net.DialTimeout(network, addr, d)
		}}
	// Uncapped, the first handshake alone would take 10 x 2/3 of the
	// session timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*timeout)
	defer cancel()
	s, err := zk.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open through a silent server first: %v", err)
	}
	defer s.Close()
	if n := dials.Load(); n < 2 {
		t.Fatalf("%d dials: the silent server was not tried first", n)
	}
}
