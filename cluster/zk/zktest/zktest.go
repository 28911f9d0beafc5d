// Package zktest runs real ZooKeeper servers for tests: Debian's zookeeper
// package (3.8), a standalone server or an ensemble on loopback, each member
// with its own zoo.cfg, data directory and log file under t.TempDir().
//
// The servers are cluster/zk/zkserver's, whose package doc says how they
// run and why their configuration looks as it does; this package adds what
// tests need around them. Start and StartEnsemble return once every member
// serves (polled, with a deadline; never a guessed sleep). Members can be
// stopped (SIGTERM, then SIGKILL after a deadline), killed, paused (SIGSTOP:
// connected but silent) and started again on the same data, so a test can
// take ZooKeeper away for a while and bring it back with its sessions and
// nodes. Everything started is stopped by t.Cleanup, also when the test
// fails, and then the member logs are printed. The JVM also dies with the
// test binary (zkserver forks it with Pdeathsig=SIGKILL).
//
// When ZooKeeper or java is missing the test is skipped with a hint ("install
// Debian package zookeeper"); under CI=true it fails instead, so CI cannot
// pass by testing nothing.
//
// # Defaults for tests
//
//   - tickTime 200 ms: sessions expire and ensembles elect fast. The server
//     clamps a client's session timeout to [min, max]SessionTimeout, and
//     maxSessionTimeout is 20 s (not 20 x tickTime) for tests that want
//     longer sessions.
//   - forceSync=no and a 1 MiB preAllocSize: members die by signal, never by
//     power cut, so the page cache is durable enough, and fsyncs on a shared
//     disk would only slow the tests.
//
// Sessions survive a ZooKeeper restart: a restarted server loads the sessions
// from its transaction log and gives each a fresh timeout from the moment it
// starts, so an outage longer than the session timeout does not, by itself,
// expire anything. To expire a session, use ExpireSession (with the session
// password a Tap captured), or keep the client away with Tap.Partition while
// the server runs.
package zktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk/zkserver"
)

// Where ZooKeeper is (Debian's package, zkserver.Debian); variables so that
// tests can point them elsewhere.
var (
	// Classpath is the server's classpath: the package's conf dir and jar
	// (whose manifest names its dependencies in /usr/share/java).
	Classpath = zkserver.Debian().Classpath
	// LogBinding, added to the classpath when present, gives SLF4J a backend.
	LogBinding = zkserver.Debian().LogBinding
	// Java is the java binary (looked up in PATH when not absolute).
	Java = zkserver.Debian().Java
)

func install() zkserver.Install {
	return zkserver.Install{Java: Java, Classpath: Classpath, LogBinding: LogBinding}
}

// Options configure the servers. The zero value is fine.
type Options struct {
	// TickTime is ZooKeeper's time unit (default 200 ms): the heartbeat, the
	// granularity of session expiry, and the unit of initLimit (10) and
	// syncLimit (5) in an ensemble.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts the
	// server grants (defaults 2 x TickTime and 20 s).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// StartTimeout bounds each start until the member serves (default 30 s);
	// StopTimeout bounds Stop's wait after SIGTERM before SIGKILL (default 5 s).
	StartTimeout, StopTimeout time.Duration
	// ExtraConfig lines are appended to every member's zoo.cfg.
	ExtraConfig []string
}

func (o *Options) fill() {
	if o.TickTime <= 0 {
		o.TickTime = 200 * time.Millisecond
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = 2 * o.TickTime
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = 20 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 5 * time.Second
	}
}

// Cluster is one standalone server or an ensemble.
type Cluster struct {
	Servers []*Server
}

// Server is one ZooKeeper process (a member of its Cluster). Its methods
// must be called from the test's goroutine (they fail the test on error).
type Server struct {
	ID      int    // myid, from 1
	Addr    string // client address, 127.0.0.1:port
	Dir     string // data directory (myid, version-2/)
	LogPath string // the member's log file, appended across restarts

	tb testing.TB
	zk *zkserver.Server
}

// ErrNotInstalled: java or ZooKeeper's jar is missing.
var ErrNotInstalled = zkserver.ErrNotInstalled

// Installed reports whether java and ZooKeeper's jar are present, and if
// not, what is missing (wrapping ErrNotInstalled).
func Installed() error { return install().Check() }

// Require skips the test when ZooKeeper is not installed, or fails it when
// the environment variable CI is "true".
func Require(tb testing.TB) {
	tb.Helper()
	err := Installed()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%v (CI=true: not skipping)", err)
	}
	tb.Skipf("%v", err)
}

// Start runs a standalone server and returns when it serves.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	return start(tb, 1, opts)
}

// StartEnsemble runs an ensemble of n members (n >= 2; use an odd n) on
// loopback and returns when every member serves (a leader was elected).
func StartEnsemble(tb testing.TB, n int, opts Options) *Cluster {
	tb.Helper()
	if n < 2 {
		tb.Fatalf("zktest: an ensemble needs 2 or more members, not %d", n)
	}
	return start(tb, n, opts)
}

// portAttempts: fresh ports after a member lost a port race.
const portAttempts = 3

func start(tb testing.TB, n int, opts Options) *Cluster {
	tb.Helper()
	Require(tb)
	opts.fill()
	dir := tb.TempDir()
	var lastErr error
	for attempt := 0; attempt < portAttempts; attempt++ {
		c, err := tryStart(tb, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), n, &opts)
		if err == nil {
			c.register()
			return c
		}
		lastErr = err
		logs := c.stopAll()
		if !errors.Is(err, zkserver.ErrPortInUse) {
			tb.Fatalf("zktest: %v\n%s", err, logs)
		}
	}
	tb.Fatalf("zktest: no free ports after %d attempts: %v", portAttempts, lastErr)
	return nil
}

func tryStart(tb testing.TB, dir string, n int, opts *Options) (*Cluster, error) {
	c := &Cluster{}
	ports, err := zkserver.FreePorts(3 * n)
	if err != nil {
		return c, err
	}
	var peers []string
	if n > 1 {
		for i := 1; i <= n; i++ {
			peers = append(peers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, ports[3*(i-1)+1], ports[3*(i-1)+2]))
		}
	}
	for i := 1; i <= n; i++ {
		zs, err := zkserver.New(zkserver.Config{
			Dir:               filepath.Join(dir, fmt.Sprintf("zk%d", i)),
			Port:              ports[3*(i-1)],
			ID:                i,
			Peers:             peers,
			TickTime:          opts.TickTime,
			MinSessionTimeout: opts.MinSessionTimeout,
			MaxSessionTimeout: opts.MaxSessionTimeout,
			NoSync:            true,
			StartTimeout:      opts.StartTimeout,
			StopTimeout:       opts.StopTimeout,
			ExtraConfig:       append([]string{"preAllocSize=1024"}, opts.ExtraConfig...),
			Install:           install(),
		})
		if err != nil {
			return c, err
		}
		c.Servers = append(c.Servers, &Server{ID: i, Addr: zs.Addr, Dir: zs.DataDir, LogPath: zs.LogPath, tb: tb, zk: zs})
	}
	// Members start concurrently: each waits for a quorum of the others.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.zk.Start(context.Background())
		}()
	}
	wg.Wait()
	return c, errors.Join(errs...)
}

// register stops every member when the test ends, printing the logs if it
// failed. It runs before t.TempDir's own cleanup (cleanups run last first).
func (c *Cluster) register() {
	tb := c.Servers[0].tb
	tb.Cleanup(func() {
		failed := tb.Failed()
		logs := c.stopAll()
		if failed {
			tb.Logf("zktest: ZooKeeper logs (last lines of each member):\n%s", logs)
		}
	})
}

// stopAll stops every member and returns the ends of their logs.
func (c *Cluster) stopAll() string {
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.zk.Stop()
		}()
	}
	wg.Wait()
	var b strings.Builder
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "==== member %d (%s), %s\n%s", s.ID, s.Addr, s.LogPath, s.zk.Tail(60))
	}
	return b.String()
}

// Addrs returns the members' client addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Servers {
		a = append(a, s.Addr)
	}
	return a
}

// ConnectString returns "host:port,host:port" (append a chroot if wanted).
func (c *Cluster) ConnectString() string { return strings.Join(c.Addrs(), ",") }

// Member returns the member with client address addr, or nil.
func (c *Cluster) Member(addr string) *Server {
	for _, s := range c.Servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// Running reports whether the member's process is running.
func (s *Server) Running() bool { return s.zk.Running() }

// Start starts a stopped member again on the same data and ports, and waits
// until it serves (for an ensemble member: until it has joined a quorum).
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.zk.Start(context.Background()); err != nil {
		s.tb.Fatalf("zktest: member %d: %v\n%s", s.ID, err, s.zk.Tail(60))
	}
}

// Stop sends SIGTERM, waits for the exit up to Options.StopTimeout, then
// sends SIGKILL.
func (s *Server) Stop() {
	s.tb.Helper()
	if err := s.zk.Stop(); err != nil {
		s.tb.Fatalf("zktest: member %d: %v", s.ID, err)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (s *Server) Kill() {
	s.tb.Helper()
	if err := s.zk.Kill(); err != nil {
		s.tb.Fatalf("zktest: member %d: %v", s.ID, err)
	}
}

// Pause freezes the member (SIGSTOP): its connections stay open and
// nothing is answered, the way a server hung in a GC pause or a stalled
// disk looks to clients. Resume (SIGCONT) lets it go on; Stop and Kill
// resume it first.
func (s *Server) Pause() {
	s.tb.Helper()
	if err := s.zk.Signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatalf("zktest: member %d: %v", s.ID, err)
	}
	// The signal is delivered asynchronously: until every thread of the JVM
	// has stopped, a request can still be answered.
	deadline := time.Now().Add(5 * time.Second)
	for !stopped(s.zk.Pid()) {
		if time.Now().After(deadline) {
			s.tb.Fatalf("zktest: member %d (pid %d) not stopped 5s after SIGSTOP", s.ID, s.zk.Pid())
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

// stopped reports whether every thread of process pid is stopped (state T
// in /proc/<pid>/task/<tid>/stat).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues a paused member.
func (s *Server) Resume() {
	s.tb.Helper()
	if err := s.zk.Signal(syscall.SIGCONT); err != nil {
		s.tb.Fatalf("zktest: member %d: %v", s.ID, err)
	}
}

// Restart is Stop then Start.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.Start()
}

// Mode returns the member's role from "srvr": standalone, leader or follower.
func (s *Server) Mode() (string, error) { return s.zk.Mode() }

// FourLetterWord sends a four-letter command (srvr, ruok, mntr, stat) and
// returns the whole reply.
func FourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	return zkserver.FourLetterWord(addr, cmd, timeout)
}
