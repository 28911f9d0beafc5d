// Package zktest runs real ZooKeeper servers for tests: Debian's zookeeper
// package (3.8), a standalone server or an ensemble on loopback, each member
// with its own zoo.cfg, data directory and log file under t.TempDir().
//
// Start and StartEnsemble return once every member answers the "srvr"
// four-letter word as serving (polled, with a deadline; never a guessed
// sleep). Members can be stopped (SIGTERM, then SIGKILL after a deadline),
// killed, paused (SIGSTOP: connected but silent) and started again on the
// same data, so a test can take ZooKeeper
// away for a while and bring it back with its sessions and nodes. Everything
// started is stopped by t.Cleanup, also when the test fails, and then the
// member logs are printed. The JVM also dies with the test binary: it is
// forked with Pdeathsig=SIGKILL from a goroutine locked to its OS thread for
// the child's whole life (Pdeathsig follows the forking thread, and the Go
// runtime may otherwise retire that thread).
//
// When ZooKeeper or java is missing the test is skipped with a hint ("install
// Debian package zookeeper"); under CI=true it fails instead, so CI cannot
// pass by testing nothing.
//
// # Why the configuration looks like this
//
//   - The server runs as java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar
//     QuorumPeerMain zoo.cfg, exactly what Debian's init script runs, but without
//     zkServer.sh (one process fewer, and its environment files stay out of the
//     way). Debian's classpath has no SLF4J binding, so ZooKeeper logs nothing
//     at all; slf4j-simple (Debian's libslf4j-java, a dependency) is added to
//     make the member logs useful. JVM flags for a fast start: serial GC, C1
//     only, no perf data, a 128 MiB heap. A standalone start takes about
//     0.4-0.6 s on the 2-core development machine.
//   - admin.enableServer=false: otherwise every member's Jetty admin server
//     binds port 8080 and members (and parallel test binaries) collide.
//   - 4lw.commands.whitelist: only srvr is allowed by default since 3.5.3.
//   - tickTime 200 ms by default: sessions expire and ensembles elect fast.
//     The server clamps a client's session timeout to [2, 20] x tickTime
//     unless told otherwise, so maxSessionTimeout is set explicitly (20 s
//     by default) for tests that want longer sessions.
//   - zookeeper.snapshot.trust.empty=true: a data directory with a
//     transaction log but no snapshot is otherwise refused at start-up
//     (ZOOKEEPER-3056, Debian's NEWS): restarts on the same data need it.
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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Where Debian's package puts ZooKeeper; variables so that tests can point
// them elsewhere.
var (
	// Classpath is the server's classpath: the package's conf dir and jar
	// (whose manifest names its dependencies in /usr/share/java).
	Classpath = []string{"/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar"}
	// LogBinding, added to the classpath when present, gives SLF4J a backend.
	LogBinding = "/usr/share/java/slf4j-simple.jar"
	// Java is the java binary (looked up in PATH when not absolute).
	Java = "java"
)

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
	opts    Options
}

// Server is one ZooKeeper process (a member of its Cluster). Its methods
// must be called from the test's goroutine (they fail the test on error).
type Server struct {
	ID      int    // myid, from 1
	Addr    string // client address, 127.0.0.1:port
	Dir     string // data directory (myid, version-2/)
	LogPath string // the member's log file, appended across restarts

	tb       testing.TB
	opts     *Options
	cfgPath  string
	ensemble bool

	mu   sync.Mutex
	proc *process // nil while stopped
}

type process struct {
	pid    int
	signal func(os.Signal) error
	exited chan struct{} // closed when the process has been reaped
	err    error         // Wait's result, set before exited is closed
}

// ErrNotInstalled: java or ZooKeeper's jar is missing.
var ErrNotInstalled = errors.New("zktest: ZooKeeper not installed (install Debian package zookeeper)")

// Installed reports whether java and ZooKeeper's jar are present, and if
// not, what is missing (wrapping ErrNotInstalled).
func Installed() error {
	if _, err := exec.LookPath(Java); err != nil {
		return fmt.Errorf("%w: java: %w", ErrNotInstalled, err)
	}
	for _, p := range Classpath {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
	}
	return nil
}

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
		if !strings.Contains(logs, "Address already in use") {
			tb.Fatalf("%v\n%s", err, logs)
		}
	}
	tb.Fatalf("zktest: no free ports after %d attempts: %v", portAttempts, lastErr)
	return nil
}

func tryStart(tb testing.TB, dir string, n int, opts *Options) (*Cluster, error) {
	c := &Cluster{opts: *opts}
	ports, err := freePorts(3 * n)
	if err != nil {
		return c, err
	}
	var servers []string
	for i := 1; i <= n; i++ {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, ports[3*(i-1)+1], ports[3*(i-1)+2]))
	}
	for i := 1; i <= n; i++ {
		s := &Server{
			ID:       i,
			Addr:     fmt.Sprintf("127.0.0.1:%d", ports[3*(i-1)]),
			Dir:      filepath.Join(dir, fmt.Sprintf("zk%d", i), "data"),
			LogPath:  filepath.Join(dir, fmt.Sprintf("zk%d", i), "zookeeper.log"),
			cfgPath:  filepath.Join(dir, fmt.Sprintf("zk%d", i), "zoo.cfg"),
			tb:       tb,
			opts:     &c.opts,
			ensemble: n > 1,
		}
		c.Servers = append(c.Servers, s)
		if err := s.writeConfig(ports[3*(i-1)], servers); err != nil {
			return c, err
		}
	}
	// Members start concurrently: each waits for a quorum of the others.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		if err := s.spawn(); err != nil {
			return c, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.waitServing()
		}()
	}
	wg.Wait()
	return c, errors.Join(errs...)
}

func (s *Server) writeConfig(clientPort int, servers []string) error {
	o := s.opts
	lines := []string{
		"tickTime=" + strconv.FormatInt(o.TickTime.Milliseconds(), 10),
		"dataDir=" + s.Dir,
		"clientPort=" + strconv.Itoa(clientPort),
		"clientPortAddress=127.0.0.1",
		"minSessionTimeout=" + strconv.FormatInt(o.MinSessionTimeout.Milliseconds(), 10),
		"maxSessionTimeout=" + strconv.FormatInt(o.MaxSessionTimeout.Milliseconds(), 10),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok,mntr,stat",
		"zookeeper.snapshot.trust.empty=true",
		"forceSync=no",
		"preAllocSize=1024",
	}
	if s.ensemble {
		lines = append(lines, "initLimit=10", "syncLimit=5", "standaloneEnabled=false")
		lines = append(lines, servers...)
	}
	lines = append(lines, o.ExtraConfig...)
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	if err := os.WriteFile(s.cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	return nil
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
			_ = s.stop(syscall.SIGTERM)
		}()
	}
	wg.Wait()
	var b strings.Builder
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "==== member %d (%s), %s\n%s", s.ID, s.Addr, s.LogPath, tailFile(s.LogPath, 60))
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
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Start starts a stopped member again on the same data and ports, and waits
// until it serves (for an ensemble member: until it has joined a quorum).
func (s *Server) Start() {
	s.tb.Helper()
	if s.Running() {
		s.tb.Fatalf("zktest: member %d is already running", s.ID)
	}
	if err := s.spawn(); err != nil {
		s.tb.Fatalf("%v", err)
	}
	if err := s.waitServing(); err != nil {
		s.tb.Fatalf("%v\n%s", err, tailFile(s.LogPath, 60))
	}
}

// Stop sends SIGTERM, waits for the exit up to Options.StopTimeout, then
// sends SIGKILL.
func (s *Server) Stop() {
	s.tb.Helper()
	if err := s.stop(syscall.SIGTERM); err != nil {
		s.tb.Fatalf("%v", err)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (s *Server) Kill() {
	s.tb.Helper()
	if err := s.stop(syscall.SIGKILL); err != nil {
		s.tb.Fatalf("%v", err)
	}
}

// Pause freezes the member (SIGSTOP): its connections stay open and
// nothing is answered, the way a server hung in a GC pause or a stalled
// disk looks to clients. Resume (SIGCONT) lets it go on; Stop and Kill
// resume it first.
func (s *Server) Pause() {
	s.tb.Helper()
	if err := s.signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatalf("%v", err)
	}
}

// Resume continues a paused member.
func (s *Server) Resume() {
	s.tb.Helper()
	if err := s.signal(syscall.SIGCONT); err != nil {
		s.tb.Fatalf("%v", err)
	}
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: member %d is not running", s.ID)
	}
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("zktest: member %d: %v: %w", s.ID, sig, err)
	}
	return nil
}

// Restart is Stop then Start.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.Start()
}

// spawn starts the JVM. The fork happens on a goroutine locked to its OS
// thread, which stays blocked in Wait for the child's whole life: Pdeathsig
// is tied to the forking thread, and a locked thread is never reused or
// retired while its goroutine lives.
func (s *Server) spawn() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return fmt.Errorf("zktest: member %d is already running", s.ID)
	}
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("zktest: %w", err)
	}
	fmt.Fprintf(logf, "==== zktest: starting member %d at %s\n", s.ID, time.Now().Format(time.RFC3339Nano))
	cp := append([]string(nil), Classpath...)
	if _, err := os.Stat(LogBinding); err == nil {
		cp = append(cp, LogBinding)
	}
	cmd := exec.Command(Java,
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xmx128m",
		"-Dzookeeper.snapshot.trust.empty=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", strings.Join(cp, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = filepath.Dir(s.cfgPath)
	cmd.SysProcAttr = sysProcAttr()

	p := &process{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		p.signal = cmd.Process.Signal
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("zktest: start member %d: %w", s.ID, err)
	}
	s.proc = p
	return nil
}

// stop signals the process and waits for it; after SIGTERM it escalates to
// SIGKILL at the stop timeout. A stopped member is left alone.
func (s *Server) stop(sig syscall.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.signal(syscall.SIGCONT) // a paused JVM would not handle SIGTERM
	_ = p.signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(s.opts.StopTimeout):
	}
	_ = p.signal(syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("zktest: member %d (pid %d) survived SIGKILL for 30 s", s.ID, p.pid)
	}
}

// waitServing polls "srvr" until the member says it serves, its process
// exits, or the start timeout passes.
func (s *Server) waitServing() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: member %d is not running", s.ID)
	}
	deadline := time.Now().Add(s.opts.StartTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		reply, err := FourLetterWord(s.Addr, "srvr", time.Second)
		switch {
		case err == nil && strings.Contains(reply, "Mode: "):
			return nil
		case err == nil:
			last = strings.TrimSpace(reply)
		default:
			last = err.Error()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("zktest: member %d exited before serving (%v)", s.ID, p.err)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: member %d (%s) not serving after %v: %s", s.ID, s.Addr, s.opts.StartTimeout, last)
		}
	}
}

// Mode returns the member's role from "srvr": standalone, leader or follower.
func (s *Server) Mode() (string, error) {
	reply, err := FourLetterWord(s.Addr, "srvr", time.Second)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(reply, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zktest: %s is not serving: %s", s.Addr, strings.TrimSpace(reply))
}

// FourLetterWord sends a four-letter command (srvr, ruok, mntr, stat) and
// returns the whole reply.
func FourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(conn); err != nil {
		return b.String(), fmt.Errorf("zktest: %s %s: %w", cmd, addr, err)
	}
	return b.String(), nil
}

// freePorts returns n loopback ports that were free a moment ago (all held
// open together, so they are distinct).
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("zktest: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailFile returns the last n lines of a file, without Java stack frames.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)\n", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "\tat ") {
			continue // Java stack frames: the exception line says enough here
		}
		lines = append(lines, sc.Text())
		if len(lines) > 2*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
