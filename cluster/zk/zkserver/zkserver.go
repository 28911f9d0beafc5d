// Package zkserver runs a ZooKeeper server from Debian's zookeeper package
// (3.8) on loopback (or on Config.Host): one member of an ensemble, or a
// standalone server, in a directory of its own:
//
//	DIR/zoo.cfg          written by New from the Config
//	DIR/data/            dataDir: myid, version-2/ (snapshots, transaction logs)
//	DIR/zookeeper.log    the server's output, appended across starts
//
// Start returns once the server answers the "srvr" four-letter word as
// serving (polled, with a deadline; never a guessed sleep). Stop sends
// SIGTERM, then SIGKILL after a deadline. A server is attached by default:
// forked with Pdeathsig=SIGKILL, from a goroutine locked to its OS thread
// for the child's whole life (Pdeathsig follows the forking thread, and the
// Go runtime may otherwise retire that thread), so it dies with this
// process, and in a process group of its own (a terminal's Ctrl-C reaches
// its owner, which stops it when its clients are done). A Detached one
// gets its own session (setsid) and outlives it (`weir cluster up`).
// cluster/zk/zktest builds its test servers and ensembles on this package.
//
// # Why the configuration looks like this
//
//   - The server runs as java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar
//     QuorumPeerMain zoo.cfg, exactly what Debian's init script runs, but without
//     zkServer.sh (one process fewer, and its environment files stay out of the
//     way). Debian's classpath has no SLF4J binding, so ZooKeeper logs nothing
//     at all; slf4j-simple (Debian's libslf4j-java, a dependency) is added to
//     make the log useful. JVM flags for a fast start: serial GC, C1 only, no
//     perf data, a 128 MiB heap. A standalone start takes about 0.4-0.6 s on
//     the 2-core development machine.
//   - admin.enableServer=false: otherwise every server's Jetty admin server
//     binds port 8080 and servers collide.
//   - 4lw.commands.whitelist: only srvr is allowed by default since 3.5.3.
//   - The server clamps a client's session timeout to [Min, Max]SessionTimeout
//     (by default [2, 20] x tickTime), which are written explicitly.
//   - zookeeper.snapshot.trust.empty=true: a data directory with a
//     transaction log but no snapshot is otherwise refused at start-up
//     (ZOOKEEPER-3056, Debian's NEWS): restarts on the same data need it.
package zkserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	// ErrNotInstalled: java or ZooKeeper's jar is missing.
	ErrNotInstalled = errors.New("zkserver: ZooKeeper not installed (install Debian package zookeeper)")
	// ErrPortInUse: the server exited before serving because a port it
	// binds was taken.
	ErrPortInUse = errors.New("zkserver: address already in use")
	// ErrStart: the server exited before serving, or did not serve in time.
	ErrStart = errors.New("zkserver: not serving")
)

// Install says where ZooKeeper and java are.
type Install struct {
	// Java is the java binary (looked up in PATH when not absolute).
	Java string
	// Classpath is the server's classpath: the package's conf dir and jar
	// (whose manifest names its dependencies in /usr/share/java).
	Classpath []string
	// LogBinding, added to the classpath when present, gives SLF4J a
	// backend; without one ZooKeeper logs nothing.
	LogBinding string
}

// Debian is where Debian's zookeeper package puts ZooKeeper.
func Debian() Install {
	return Install{
		Java:       "java",
		Classpath:  []string{"/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar"},
		LogBinding: "/usr/share/java/slf4j-simple.jar",
	}
}

// Check reports whether java and every classpath entry are present, and if
// not, what is missing (wrapping ErrNotInstalled).
func (i Install) Check() error {
	if _, err := exec.LookPath(i.Java); err != nil {
		return fmt.Errorf("%w: java: %w", ErrNotInstalled, err)
	}
	for _, p := range i.Classpath {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
	}
	return nil
}

// Config says what server to run. Only Dir is required.
type Config struct {
	// Dir holds zoo.cfg, data/ and zookeeper.log; created if missing. A Dir
	// used before keeps its data (and its zoo.cfg is rewritten).
	Dir string
	// Host is the address the client port listens on (default
	// 127.0.0.1). Brokers in network namespaces of their own reach a
	// ZooKeeper on their bridge's address in the root namespace.
	Host string
	// Port is the client port on Host (default 0: a free port, chosen
	// by New).
	Port int
	// ID is the server's myid (default 1).
	ID int
	// Peers are an ensemble's "server.N=127.0.0.1:quorumPort:electionPort"
	// lines, this server's own among them (default none: standalone).
	Peers []string
	// TickTime is ZooKeeper's time unit: the heartbeat, the granularity of
	// session expiry, and the unit of initLimit (10) and syncLimit (5) in an
	// ensemble (default 2 s, ZooKeeper's).
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts the
	// server grants (defaults 2 and 20 x TickTime, ZooKeeper's).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// NoSync sets forceSync=no: the transaction log is not fsynced, for
	// servers that die by signal, never by power cut (tests). Default false:
	// ZooKeeper's fsync per write.
	NoSync bool
	// StartTimeout bounds each Start until the server serves (default 30 s);
	// StopTimeout bounds Stop's wait after SIGTERM before SIGKILL (default
	// 10 s).
	StartTimeout, StopTimeout time.Duration
	// ExtraConfig lines are appended to zoo.cfg.
	ExtraConfig []string
	// Install is where ZooKeeper is (default Debian()).
	Install Install
	// Detach runs the server in a session of its own (setsid) that outlives
	// this process. Default false: it is killed when this process dies.
	Detach bool
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("zkserver: Config.Dir is required")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("zkserver: port %d out of range", c.Port)
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	} else if net.ParseIP(c.Host) == nil {
		return fmt.Errorf("zkserver: host %q: want an IP address", c.Host)
	}
	if c.ID == 0 {
		c.ID = 1
	}
	if c.ID < 0 {
		return fmt.Errorf("zkserver: myid %d: want 1 or more", c.ID)
	}
	if c.TickTime <= 0 {
		c.TickTime = 2 * time.Second
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 2 * c.TickTime
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 20 * c.TickTime
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		return fmt.Errorf("zkserver: MaxSessionTimeout %v < MinSessionTimeout %v", c.MaxSessionTimeout, c.MinSessionTimeout)
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.Install.Java == "" && c.Install.Classpath == nil {
		c.Install = Debian()
	}
	return nil
}

// Server is one ZooKeeper process, started and stopped any number of times
// on the same directory and port. Its methods may be called concurrently.
type Server struct {
	Addr       string // client address, Host:port
	Dir        string // Config.Dir
	DataDir    string // Dir/data
	LogPath    string // Dir/zookeeper.log
	ConfigPath string // Dir/zoo.cfg

	cfg  Config
	mu   sync.Mutex
	proc *process // nil while stopped
}

type process struct {
	pid      int
	signal   func(os.Signal) error
	logStart int64         // the log's size when this process started
	exited   chan struct{} // closed when the process has been reaped
	err      error         // Wait's result, set before exited is closed
}

// New checks the installation, picks the port and writes the directory
// (zoo.cfg, data/myid); it starts nothing.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.Install.Check(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	cfg.Dir = dir
	if cfg.Port == 0 {
		port, err := freePort(cfg.Host)
		if err != nil {
			return nil, err
		}
		cfg.Port = port
	}
	s := &Server{
		Addr:       net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		Dir:        dir,
		DataDir:    filepath.Join(dir, "data"),
		LogPath:    filepath.Join(dir, "zookeeper.log"),
		ConfigPath: filepath.Join(dir, "zoo.cfg"),
		cfg:        cfg,
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start is New, then Server.Start.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) writeConfig() error {
	c := &s.cfg
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	lines := []string{
		"tickTime=" + ms(c.TickTime),
		"dataDir=" + s.DataDir,
		"clientPort=" + strconv.Itoa(c.Port),
		"clientPortAddress=" + c.Host,
		"minSessionTimeout=" + ms(c.MinSessionTimeout),
		"maxSessionTimeout=" + ms(c.MaxSessionTimeout),
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok,mntr,stat",
		"zookeeper.snapshot.trust.empty=true",
	}
	if c.NoSync {
		lines = append(lines, "forceSync=no")
	}
	if len(c.Peers) > 0 {
		lines = append(lines, "initLimit=10", "syncLimit=5", "standaloneEnabled=false")
		lines = append(lines, c.Peers...)
	}
	lines = append(lines, c.ExtraConfig...)
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.DataDir, "myid"), []byte(strconv.Itoa(c.ID)+"\n"), 0o644); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	if err := os.WriteFile(s.ConfigPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	return nil
}

// Running reports whether the server's process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Pid is the running process's id, or 0 while stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// Start starts the server and waits until it serves (an ensemble member:
// until it has joined a quorum), ctx ends or Config.StartTimeout passes.
// Members of an ensemble must be started concurrently. A server that does
// not serve is stopped; the error wraps ErrPortInUse when a port was taken,
// ErrStart otherwise, and names the log.
func (s *Server) Start(ctx context.Context) error {
	p, err := s.spawn()
	if err != nil {
		return err
	}
	if err := s.waitServing(ctx, p); err != nil {
		_ = s.stop(syscall.SIGKILL)
		if s.logSince(p.logStart, "Address already in use") {
			return fmt.Errorf("%w: %s (see %s)", ErrPortInUse, s.Addr, s.LogPath)
		}
		return err
	}
	return nil
}

// Stop sends SIGTERM, waits for the exit up to Config.StopTimeout, then
// sends SIGKILL. A stopped server is left alone.
func (s *Server) Stop() error { return s.stop(syscall.SIGTERM) }

// Kill sends SIGKILL and waits for the exit.
func (s *Server) Kill() error { return s.stop(syscall.SIGKILL) }

// Signal sends sig to the running process (SIGSTOP pauses it: connections
// stay open and nothing is answered; SIGCONT resumes it).
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zkserver: %s is not running", s.Addr)
	}
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("zkserver: %s: %v: %w", s.Addr, sig, err)
	}
	return nil
}

// spawn starts the JVM. An attached server is forked on a goroutine locked
// to its OS thread, which stays blocked in Wait for the child's whole life:
// Pdeathsig is tied to the forking thread, and a locked thread is never
// reused or retired while its goroutine lives.
func (s *Server) spawn() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil, fmt.Errorf("zkserver: %s is already running", s.Addr)
	}
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	fmt.Fprintf(logf, "==== zkserver: starting myid %d on %s at %s\n", s.cfg.ID, s.Addr, time.Now().Format(time.RFC3339Nano))
	var logStart int64
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}
	in := s.cfg.Install
	cp := append([]string(nil), in.Classpath...)
	if in.LogBinding != "" {
		if _, err := os.Stat(in.LogBinding); err == nil {
			cp = append(cp, in.LogBinding)
		}
	}
	cmd := exec.Command(in.Java,
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xmx128m",
		"-Dzookeeper.snapshot.trust.empty=true",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-cp", strings.Join(cp, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.ConfigPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	cmd.SysProcAttr = sysProcAttr(s.cfg.Detach)

	p := &process{logStart: logStart, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		if !s.cfg.Detach {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		}
		err := cmd.Start()
		logf.Close() // the child has its own descriptor
		if err != nil {
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
		return nil, fmt.Errorf("zkserver: start %s: %w", s.Addr, err)
	}
	s.proc = p
	return p, nil
}

// stop signals the process and waits for it; after SIGTERM it escalates to
// SIGKILL at the stop timeout.
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
	timer := time.NewTimer(s.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
	}
	_ = p.signal(syscall.SIGKILL)
	timer.Reset(30 * time.Second)
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		return fmt.Errorf("zkserver: %s (pid %d) survived SIGKILL for 30 s", s.Addr, p.pid)
	}
}

// waitServing polls "srvr" until the server says it serves, its process
// exits, ctx ends or the start timeout passes.
func (s *Server) waitServing(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
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
			return fmt.Errorf("%w: %s exited before serving (%v); see %s", ErrStart, s.Addr, p.err, s.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("%w: %s not serving after %v (%w): %s; see %s", ErrStart, s.Addr, s.cfg.StartTimeout, ctx.Err(), last, s.LogPath)
		case <-tick.C:
		}
	}
}

// Mode returns the server's role from "srvr": standalone, leader or follower.
func (s *Server) Mode() (string, error) { return Mode(s.Addr, time.Second) }

// Mode asks the server at addr for its role ("srvr"): standalone, leader or
// follower.
func Mode(addr string, timeout time.Duration) (string, error) {
	reply, err := FourLetterWord(addr, "srvr", timeout)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(reply, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zkserver: %s is not serving: %s", addr, strings.TrimSpace(reply))
}

// FourLetterWord sends a four-letter command (srvr, ruok, mntr, stat) and
// returns the whole reply.
func FourLetterWord(addr, cmd string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zkserver: %s %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", fmt.Errorf("zkserver: %s %s: %w", cmd, addr, err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(conn); err != nil {
		return b.String(), fmt.Errorf("zkserver: %s %s: %w", cmd, addr, err)
	}
	return b.String(), nil
}

// FreePorts returns n loopback ports that were free a moment ago (all held
// open together, so they are distinct).
func FreePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("zkserver: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// freePort returns a port on host that was free a moment ago.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("zkserver: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// logSince reports whether the log, from offset on, contains substr.
func (s *Server) logSince(offset int64, substr string) bool {
	f, err := os.Open(s.LogPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			return true
		}
	}
	return false
}

// Tail returns the last n lines of the server's log.
func (s *Server) Tail(n int) string { return TailLog(s.LogPath, n) }

// TailLog returns the last n lines of a log file, without Java stack frames.
func TailLog(path string, n int) string {
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
