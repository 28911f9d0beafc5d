package zktest

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// connect opens a go-zookeeper session and waits for it.
func connect(t *testing.T, addrs []string, dial zk.Dialer) *zk.Conn {
	t.Helper()
	hasSession := make(chan struct{})
	var once sync.Once
	if dial == nil {
		dial = net.DialTimeout
	}
	conn, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(nopLogger{}), zk.WithDialer(dial),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(hasSession) })
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	select {
	case <-hasSession:
	case <-time.After(10 * time.Second):
		t.Fatal("no session after 10 s")
	}
	return conn
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		<-tick.C
	}
}

func TestStandaloneStopStartKeepsData(t *testing.T) {
	t0 := time.Now()
	c := Start(t, Options{})
	t.Logf("standalone start: %v", time.Since(t0))
	s := c.Servers[0]
	if mode, err := s.Mode(); err != nil || mode != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", mode, err)
	}
	if reply, err := FourLetterWord(s.Addr, "ruok", time.Second); err != nil || reply != "imok" {
		t.Fatalf("ruok = %q, %v", reply, err)
	}
	conn := connect(t, c.Addrs(), nil)
	if _, err := conn.Create("/kept", []byte("v"), zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	t0 = time.Now()
	s.Stop()
	t.Logf("stop (SIGTERM): %v", time.Since(t0))
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	if _, err := FourLetterWord(s.Addr, "srvr", time.Second); err == nil {
		t.Fatal("srvr answered after Stop")
	}
	t0 = time.Now()
	s.Start()
	t.Logf("restart on existing data: %v", time.Since(t0))
	s.Kill()
	s.Start()

	conn = connect(t, c.Addrs(), nil)
	data, _, err := conn.Get("/kept")
	if err != nil || string(data) != "v" {
		t.Fatalf("after stop, kill and restarts: Get = %q, %v", data, err)
	}

	s.Pause()
	if reply, err := FourLetterWord(s.Addr, "srvr", 300*time.Millisecond); err == nil {
		t.Fatalf("a paused server answered srvr: %q", reply)
	}
	s.Resume()
	if mode, err := s.Mode(); err != nil || mode != "standalone" {
		t.Fatalf("after Resume: Mode = %q, %v", mode, err)
	}
	s.Pause() // Stop, at cleanup, resumes it first
}

func TestEnsembleElectsAgainAfterLeaderKill(t *testing.T) {
	t0 := time.Now()
	c := StartEnsemble(t, 3, Options{})
	t.Logf("3-member ensemble start: %v", time.Since(t0))
	leader := func() *Server {
		var l *Server
		for _, s := range c.Servers {
			if m, err := s.Mode(); err == nil && m == "leader" {
				if l != nil {
					t.Fatalf("two leaders: %d and %d", l.ID, s.ID)
				}
				l = s
			}
		}
		return l
	}
	old := leader()
	if old == nil {
		t.Fatal("no leader after StartEnsemble")
	}
	old.Kill()
	var next *Server
	eventually(t, 20*time.Second, "no new leader after the old one was killed", func() bool {
		next = leader()
		return next != nil
	})
	if next == old {
		t.Fatal("the killed member still leads")
	}
	old.Start()
	if m, err := old.Mode(); err != nil || m != "follower" {
		t.Fatalf("restarted old leader: Mode = %q, %v; want follower", m, err)
	}
}

func TestExpireSessionDeletesEphemerals(t *testing.T) {
	c := Start(t, Options{})
	tap := NewTap()
	owner := connect(t, c.Addrs(), tap.Dial)
	id, passwd, timeout := tap.Session()
	if id == 0 || id != owner.SessionID() || len(passwd) == 0 {
		t.Fatalf("tap saw session %#x (password %d bytes), client has %#x", id, len(passwd), owner.SessionID())
	}
	if timeout != 4*time.Second {
		t.Errorf("negotiated timeout %v, want the 4s asked for", timeout)
	}
	if _, err := owner.Create("/eph", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	observer := connect(t, c.Addrs(), nil)
	_, _, gone, err := observer.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := ExpireSession(c.Servers[0].Addr, id, passwd, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-gone:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("observer's watch: %+v, want a deletion", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the ephemeral outlived its expired session by 5 s")
	}
	t.Logf("ephemeral gone %v after ExpireSession", time.Since(t0))
	eventually(t, 10*time.Second, "the owner did not move to a new session", func() bool {
		return owner.State() == zk.StateHasSession && owner.SessionID() != id
	})
	// A session that is gone already is not an error.
	if err := ExpireSession(c.Servers[0].Addr, id, passwd, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestTapPartitionRefusesDials(t *testing.T) {
	c := Start(t, Options{})
	tap := NewTap()
	conn := connect(t, c.Addrs(), tap.Dial)
	tap.Partition()
	if _, err := tap.Dial("tcp", c.Servers[0].Addr, time.Second); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("Dial while partitioned: %v", err)
	}
	eventually(t, 5*time.Second, "the client did not notice the cut", func() bool {
		return conn.State() != zk.StateHasSession
	})
	tap.Heal()
	eventually(t, 10*time.Second, "no session after Heal", func() bool {
		return conn.State() == zk.StateHasSession
	})
	if _, _, err := conn.Exists("/"); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records Skip and Fatal; both end the calling goroutine, as in testing.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = format
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = format
	runtime.Goexit()
}

func TestRequireSkipsOrFailsUnderCI(t *testing.T) {
	saved := Classpath
	t.Cleanup(func() { Classpath = saved })
	Classpath = []string{t.TempDir() + "/no-such/zookeeper.jar"}
	run := func(ci string) *fakeTB {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Require(f)
		}()
		<-done
		return f
	}
	if f := run(""); f.skipped == "" || f.fatal != "" {
		t.Errorf("without CI: skipped %q, fatal %q; want a skip", f.skipped, f.fatal)
	}
	if f := run("true"); f.fatal == "" || f.skipped != "" {
		t.Errorf("CI=true: skipped %q, fatal %q; want a failure", f.skipped, f.fatal)
	}
	err := Installed()
	if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "install Debian package zookeeper") {
		t.Errorf("Installed() = %v", err)
	}
}
