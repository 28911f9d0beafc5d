package pluginrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weir-broker/weir/core/clock"
)

// Defaults of Config.
const (
	DefaultStartTimeout  = 10 * time.Second
	DefaultCallTimeout   = 5 * time.Second
	DefaultMaxRestarts   = 3
	DefaultRestartWindow = time.Minute
)

// Config configures a Supervisor. A zero field takes its default.
type Config struct {
	// Path is the plugin binary; errors name it. Required.
	Path string
	// Plugins holds the host side of every kind the binary may be asked for,
	// keyed by kind name (each kind's rpc package provides its value).
	// Required by Start; Connect ignores it.
	Plugins plugin.PluginSet
	// StartTimeout bounds starting a process: exec, go-plugin's handshake
	// and the health check. Default DefaultStartTimeout (10 s).
	StartTimeout time.Duration
	// CallTimeout bounds each call, Open and Close included. A call that
	// outlives it means the plugin hangs: the process is killed. A caller's
	// earlier ctx deadline ends the call without killing anything. Default
	// DefaultCallTimeout (5 s).
	CallTimeout time.Duration
	// MaxRestarts is how many times the process may be restarted within
	// RestartWindow; negative disables restarts. Default DefaultMaxRestarts
	// (3).
	MaxRestarts int
	// RestartWindow is the sliding window MaxRestarts counts over. Default
	// DefaultRestartWindow (1 min).
	RestartWindow time.Duration
	// Logger gets the supervisor's events (start, exit, kill, restart) at
	// info and warn, and the plugin's own output at debug. Default
	// slog.Default().
	Logger *slog.Logger
	// Clock times the restart window. Default clock.System{}.
	Clock clock.Clock
}

var errConfig = errors.New("pluginrpc: invalid config")

// validate fills the defaults and rejects nonsense.
func (c *Config) validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: no plugin path", errConfig)
	case c.StartTimeout < 0, c.CallTimeout < 0, c.RestartWindow < 0:
		return fmt.Errorf("%w: negative timeout or window", errConfig)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxRestarts == 0 {
		c.MaxRestarts = DefaultMaxRestarts
	}
	if c.RestartWindow == 0 {
		c.RestartWindow = DefaultRestartWindow
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	c.Logger = c.Logger.With("plugin", c.Path)
	return nil
}

// Supervisor runs one plugin binary as a child process and restarts it per
// its Config. Calls go through Instances (see Open). It is safe for
// concurrent use.
type Supervisor struct {
	cfg    Config
	attach plugin.ClientProtocol // Connect's connection; nil when running a binary

	mu          sync.Mutex
	cur         *process // nil when no live process
	gen         uint64
	restarts    []time.Time // restart times within the window, oldest first
	lastFailure string      // why the last process ended
	closed      bool
}

// Start runs the plugin binary at cfg.Path and waits for its handshake and
// health check. Errors wrap ErrStart (and errConfig for a bad Config). The
// caller must Close the Supervisor.
func Start(cfg Config) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Plugins) == 0 {
		return nil, fmt.Errorf("%w: no plugin kinds for %s", errConfig, cfg.Path)
	}
	s := &Supervisor{cfg: cfg}
	p, err := s.start()
	if err != nil {
		return nil, err
	}
	s.cur = p
	return s, nil
}

// Connect supervises an existing go-plugin connection instead of a process
// (package pluginrpctest makes one in process), so a kind's shim can be
// tested without a subprocess. cfg.Path names the connection in errors.
// Deadlines and error mapping work as for a process; a failed connection is
// closed, not restarted, and Close closes it but leaves stopping the server
// to whoever started it.
func Connect(cp plugin.ClientProtocol, cfg Config) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Supervisor{cfg: cfg, attach: cp, gen: 1}
	s.cur = &process{gen: 1, cp: cp}
	return s, nil
}

// Path returns the plugin's path as configured.
func (s *Supervisor) Path() string { return s.cfg.Path }

// Pid returns the live plugin process's pid, or 0 when there is none (not
// started yet after a failure, closed, or a Connect connection).
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.exited() {
		return 0
	}
	return s.cur.pid()
}

// Ping checks the plugin's health (gRPC health service), restarting a dead
// process first like any call. Errors wrap ErrPingFailed or a supervisor
// sentinel.
func (s *Supervisor) Ping(ctx context.Context) error {
	p, err := s.acquire()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPingFailed, err)
	}
	return s.do(ctx, p, pingKind, "Ping", p.ping)
}

// ErrPingFailed wraps the errors of Ping.
var ErrPingFailed = errors.New("pluginrpc: health check failed")

var pingKind = Kind{Name: "plugin", ErrFailed: ErrPingFailed}

// Close stops the plugin process (gracefully, then by SIGKILL after go-plugin's
// two-second grace) and waits for it to exit. Later calls fail with
// ErrClosed. It is idempotent and always returns nil.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	p := s.cur
	s.cur = nil
	s.closed = true
	s.mu.Unlock()
	if p != nil {
		p.markDead("closed")
		p.stop()
		s.cfg.Logger.Debug("plugin stopped", "pid", p.pid())
	}
	return nil
}

// start runs a new process (the caller holds s.mu or owns s exclusively).
func (s *Supervisor) start() (*process, error) {
	s.gen++
	cmd := exec.Command(s.cfg.Path)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Env = pluginEnv(os.Environ(), os.Getpid())
	logger := s.cfg.Logger
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          s.cfg.Plugins,
		Cmd:              cmd,
		SkipHostEnv:      true, // cmd.Env has it, without stale HostPidEnv values
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.cfg.StartTimeout,
		Logger:           newHCLogAdapter(logger),
		SyncStdout:       &logWriter{l: logger, stream: "stdout"},
		SyncStderr:       &logWriter{l: logger, stream: "stderr"},
		GRPCDialOptions:  DialOptions(),
	})
	p := &process{gen: s.gen, client: client, cmd: cmd}
	cp, err := client.Client()
	if err != nil {
		p.markDead("start failed")
		p.kill()
		return nil, fmt.Errorf("%w: %s: %w (process: %s)", ErrStart, s.cfg.Path, err, p.state)
	}
	p.cp = cp
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StartTimeout)
	defer cancel()
	if err := p.ping(ctx); err != nil {
		p.markDead("health check failed")
		p.kill()
		return nil, fmt.Errorf("%w: %s: health check: %w", ErrStart, s.cfg.Path, err)
	}
	logger.Info("plugin started", "pid", p.pid(), "generation", p.gen)
	return p, nil
}

// pluginEnv is the plugin's environment: the host's (environ), without any
// HostPidEnv it inherited, then HostPidEnv set to hostPid. (go-plugin would
// append the host's environment after cmd.Env, and the last value of a
// variable wins, so an inherited HostPidEnv would override ours.) go-plugin
// appends its handshake variables after these.
func pluginEnv(environ []string, hostPid int) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, HostPidEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, HostPidEnv+"="+strconv.Itoa(hostPid))
}

// acquire returns the live process, starting a new one if the last failed
// and the restart budget allows.
func (s *Supervisor) acquire() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, s.cfg.Path)
	}
	if p := s.cur; p != nil {
		if !p.exited() {
			return p, nil
		}
		p.markDead("exited between calls")
		p.kill()
		s.retire(p)
	}
	if s.attach != nil {
		return nil, fmt.Errorf("%w: %s: %s; a connected (in-process) plugin cannot be restarted", ErrExited, s.cfg.Path, s.lastFailure)
	}
	if left, until := s.budget(); left <= 0 {
		if s.cfg.MaxRestarts < 0 {
			return nil, fmt.Errorf("%w: %s failed (%s) and restarts are disabled", ErrRestartLimit, s.cfg.Path, s.lastFailure)
		}
		return nil, fmt.Errorf("%w: %s failed (%s) after %d restarts within %v; calls fail until %s",
			ErrRestartLimit, s.cfg.Path, s.lastFailure, len(s.restarts), s.cfg.RestartWindow, until.Format(time.RFC3339))
	}
	s.restarts = append(s.restarts, s.cfg.Clock.Now())
	s.cfg.Logger.Info("restarting plugin", "after", s.lastFailure, "restart", len(s.restarts), "of", s.cfg.MaxRestarts, "window", s.cfg.RestartWindow)
	p, err := s.start()
	if err != nil {
		s.lastFailure = err.Error()
		return nil, err
	}
	s.cur = p
	return p, nil
}

// budget drops restarts older than the window and returns how many restarts
// are left and, when none is, when the oldest leaves the window (s.mu held).
func (s *Supervisor) budget() (left int, until time.Time) {
	if s.cfg.MaxRestarts < 0 {
		return 0, time.Time{}
	}
	now := s.cfg.Clock.Now()
	i := 0
	for i < len(s.restarts) && now.Sub(s.restarts[i]) >= s.cfg.RestartWindow {
		i++
	}
	s.restarts = s.restarts[i:]
	left = s.cfg.MaxRestarts - len(s.restarts)
	if left <= 0 {
		until = s.restarts[0].Add(s.cfg.RestartWindow)
	}
	return left, until
}

// retire forgets p as the current process, recording why it ended (s.mu
// held; p is dead and reaped).
func (s *Supervisor) retire(p *process) {
	if s.cur == p {
		s.cur = nil
		s.lastFailure = p.describe()
		s.cfg.Logger.Warn("plugin process ended", "pid", p.pid(), "why", s.lastFailure)
	}
}

// fail kills p after a failed call, retires it and returns the failure's
// description and what happens next.
func (s *Supervisor) fail(p *process, why string) (desc, next string) {
	p.markDead(why)
	p.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire(p)
	switch left, until := s.budget(); {
	case s.attach != nil:
		next = "a connected (in-process) plugin cannot be restarted"
	case s.closed:
		next = "the plugin is closed"
	case left > 0:
		next = "the next call restarts it"
	case s.cfg.MaxRestarts < 0:
		next = "restarts are disabled"
	default:
		next = fmt.Sprintf("no restarts left (%d per %v): calls fail until %s", s.cfg.MaxRestarts, s.cfg.RestartWindow, until.Format(time.RFC3339))
	}
	return p.describe(), next
}

// do runs one call f on p with the call deadline and turns its error into
// the kind's: a caller's ctx ending, a hung call (kills p), a dead process
// (reaps p), or an error answer mapped by kind.
func (s *Supervisor) do(ctx context.Context, p *process, kind Kind, op string, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	err := f(cctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: plugin %s: %s: %w", kind.Name, s.cfg.Path, op, ctx.Err())
	}
	st, ok := status.FromError(err)
	if !ok {
		return err // the kind's own, already formed
	}
	switch {
	case cctx.Err() != nil, st.Code() == codes.DeadlineExceeded:
		// The plugin's side may end the call first: gRPC passes it the
		// deadline, so both ends see it expire.
		desc, next := s.fail(p, fmt.Sprintf("%s did not answer within %v, so the process was killed as hung", op, s.cfg.CallTimeout))
		return fmt.Errorf("%w: %w: plugin %s: %s; %s", kind.ErrFailed, ErrHung, s.cfg.Path, desc, next)
	case st.Code() == codes.Unavailable, st.Code() == codes.Canceled, p.exited():
		desc, next := s.fail(p, fmt.Sprintf("the process died during %s", op))
		return fmt.Errorf("%w: %w: plugin %s: %s; %s", kind.ErrFailed, ErrExited, s.cfg.Path, desc, next)
	}
	return fromStatus(kind, s.cfg.Path, op, st)
}

// process is one run of the plugin binary (or a Connect connection).
type process struct {
	gen    uint64
	client *plugin.Client // nil for Connect
	cmd    *exec.Cmd      // nil for Connect
	cp     plugin.ClientProtocol

	dead   atomic.Bool
	whyMu  sync.Mutex
	why    string // the first reason it was declared dead
	stubMu sync.Mutex
	stubs  map[string]any

	killOnce sync.Once
	state    string // how the process ended; set inside killOnce
}

func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited reports whether p is known dead (marked, or go-plugin saw it exit).
func (p *process) exited() bool {
	return p.dead.Load() || (p.client != nil && p.client.Exited())
}

// markDead records the first reason p is dead; later ones are ignored.
func (p *process) markDead(why string) {
	p.whyMu.Lock()
	if p.why == "" {
		p.why = why
	}
	p.whyMu.Unlock()
	p.dead.Store(true)
}

// kill SIGKILLs the process (a hung plugin gets no grace) and reaps it, or
// closes a Connect connection. Concurrent callers all wait for the reaping.
func (p *process) kill() {
	p.killOnce.Do(func() {
		if p.client == nil {
			p.closeConn()
			return
		}
		if p.cmd.Process != nil {
			_ = p.cmd.Process.Signal(os.Kill)
		}
		p.client.Kill()
		p.state = exitState(p.cmd)
	})
}

// stop ends the process gracefully (go-plugin's Kill: ask the plugin to stop,
// then SIGKILL after two seconds) and reaps it.
func (p *process) stop() {
	p.killOnce.Do(func() {
		if p.client == nil {
			p.closeConn()
			return
		}
		p.client.Kill()
		p.state = exitState(p.cmd)
	})
}

// closeConn closes a Connect connection. Only the connection: whoever made
// it owns the server at the other end and stops it.
func (p *process) closeConn() {
	if gc, ok := p.cp.(*plugin.GRPCClient); ok {
		_ = gc.Conn.Close()
	} else {
		_ = p.cp.Close()
	}
	p.state = "connection closed"
}

// describe says why p ended and how (after kill or stop).
func (p *process) describe() string {
	p.whyMu.Lock()
	defer p.whyMu.Unlock()
	return fmt.Sprintf("%s (pid %d, %s)", p.why, p.pid(), p.state)
}

// exitState reads the exit status of a reaped process.
func exitState(cmd *exec.Cmd) string {
	if cmd.Process == nil {
		return "not started"
	}
	if cmd.ProcessState == nil {
		return "exit status unknown"
	}
	return cmd.ProcessState.String()
}

// ping runs the gRPC health check go-plugin's server answers.
func (p *process) ping(ctx context.Context) error {
	if gc, ok := p.cp.(*plugin.GRPCClient); ok {
		_, err := healthpb.NewHealthClient(gc.Conn).Check(ctx, &healthpb.HealthCheckRequest{Service: plugin.GRPCServiceName})
		return err
	}
	return p.cp.Ping()
}

// dispense returns p's client stub for a kind.
func (p *process) dispense(kind string) (any, error) {
	p.stubMu.Lock()
	defer p.stubMu.Unlock()
	if stub, ok := p.stubs[kind]; ok {
		return stub, nil
	}
	stub, err := p.cp.Dispense(kind)
	if err != nil {
		return nil, err
	}
	if p.stubs == nil {
		p.stubs = make(map[string]any)
	}
	p.stubs[kind] = stub
	return stub, nil
}
