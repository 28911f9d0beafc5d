package durability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/transport/broker"
)

// target is the broker under test, through its crash and restart.
type target interface {
	// addr is where the current broker serves the Kafka protocol.
	addr() string
	// crash injects the fault and returns its instant. The broker is gone
	// when it returns: nothing it does afterwards reaches what restart
	// starts from.
	crash(rng *rand.Rand) (time.Time, error)
	// restart starts a broker on what the crash left.
	restart(ctx context.Context) error
	// close stops the current broker gracefully, and anything left.
	close() error
}

// powerDataDir is the in-process brokers' data directory, on their own
// in-memory file system.
const powerDataDir = "/weir"

// powerTarget runs the broker in process on a powerFS.
type powerTarget struct {
	cfg  Config
	fs   *powerFS
	b    *broker.Broker
	dead *atomic.Bool // silences the first broker's log at the cut
	torn bool
	late *lateness
	// Of the first broker, read at the cut: its fsyncs, the longest, and
	// the worst lateness of a timer in its process.
	syncs         int64
	maxSync       time.Duration
	timerLateness time.Duration
}

func startPower(cfg Config) (*powerTarget, error) {
	t := &powerTarget{cfg: cfg, fs: newPowerFS(cfg.SyncLatency), torn: cfg.Torn, dead: new(atomic.Bool)}
	first := cfg
	first.Logger = slog.New(deadHandler{next: cfg.Logger.Handler(), dead: t.dead})
	b, err := startInProcess(first, t.fs)
	if err != nil {
		return nil, err
	}
	t.b = b
	t.late = watchLateness(latenessPeriod)
	return t, nil
}

func startInProcess(cfg Config, fs vfs.FS) (*broker.Broker, error) {
	b, err := broker.Start(broker.Config{
		DataDir:                    powerDataDir,
		Listen:                     "127.0.0.1:0",
		FS:                         fs,
		GroupInitialRebalanceDelay: 0,
		PluginDir:                  cfg.PluginDir,
		Logger:                     cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBroker, err)
	}
	return b, nil
}

func (t *powerTarget) addr() string { return t.b.Addr() }

func (t *powerTarget) crash(rng *rand.Rand) (time.Time, error) {
	var torn *rand.Rand
	if t.torn {
		torn = rng
	}
	clone, at := t.fs.Cut(torn)
	t.dead.Store(true)
	t.syncs, t.maxSync, t.timerLateness = t.fs.Syncs(), t.fs.MaxSync(), t.late.stop()
	// The dead machine's broker: its connections close, its file
	// operations fail; it has nothing left to say, errors included.
	_ = t.b.Close()
	t.fs = &powerFS{mem: clone} // what the next broker runs on; no more cuts
	return at, nil
}

func (t *powerTarget) restart(context.Context) error {
	b, err := startInProcess(t.cfg, t.fs)
	if err != nil {
		return err
	}
	t.b = b
	return nil
}

func (t *powerTarget) close() error {
	t.late.stop()
	if err := t.b.Close(); err != nil {
		return fmt.Errorf("%w: close: %w", ErrBroker, err)
	}
	return nil
}

// latenessPeriod is how often the lateness watch sets its timer.
const latenessPeriod = 2 * time.Millisecond

// lateness watches how late timers fire in this process: the delay the
// partition logs' flush timers suffer too, when the load generator and
// the broker share the process and the machine's cores. An age bound is
// checked with it added, measured rather than assumed.
type lateness struct {
	done chan struct{}
	out  chan time.Duration
	once sync.Once
	max  time.Duration
}

func watchLateness(period time.Duration) *lateness {
	l := &lateness{done: make(chan struct{}), out: make(chan time.Duration, 1)}
	go func() {
		var worst time.Duration
		t := time.NewTimer(period)
		defer t.Stop()
		for due := time.Now().Add(period); ; due = time.Now().Add(period) {
			t.Reset(period)
			select {
			case <-l.done:
				l.out <- worst
				return
			case <-t.C:
				worst = max(worst, time.Since(due))
			}
		}
	}()
	return l
}

// stop ends the watch and returns the worst lateness seen; later calls
// return the same.
func (l *lateness) stop() time.Duration {
	l.once.Do(func() {
		close(l.done)
		l.max = <-l.out
	})
	return l.max
}

// deadHandler passes log records on until the machine dies: the errors a
// broker logs while its file operations fail after a power cut are the
// cut's doing, not findings. Derived handlers share dead.
type deadHandler struct {
	next slog.Handler
	dead *atomic.Bool
}

func (h deadHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.dead.Load() && h.next.Enabled(ctx, l)
}

func (h deadHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.dead.Load() {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h deadHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return deadHandler{next: h.next.WithAttrs(as), dead: h.dead}
}

func (h deadHandler) WithGroup(name string) slog.Handler {
	return deadHandler{next: h.next.WithGroup(name), dead: h.dead}
}

// Subprocess timeouts.
const (
	processStartTimeout = 30 * time.Second // until its port accepts connections
	processStopTimeout  = 30 * time.Second // from SIGTERM until it exits
	portAttempts        = 3                // new ports after "address already in use"
)

// killTarget runs `weir broker` subprocesses on one data directory.
type killTarget struct {
	cfg Config
	p   *process
}

func startKill(ctx context.Context, cfg Config) (*killTarget, error) {
	p, err := startProcess(ctx, cfg.Weir, cfg.DataDir, cfg.BrokerFlags)
	if err != nil {
		return nil, err
	}
	return &killTarget{cfg: cfg, p: p}, nil
}

func (t *killTarget) addr() string { return t.p.addr }

func (t *killTarget) crash(*rand.Rand) (time.Time, error) {
	at := time.Now()
	if err := t.p.cmd.Process.Kill(); err != nil {
		return at, fmt.Errorf("%w: SIGKILL: %w", ErrBroker, err)
	}
	<-t.p.exited
	if !killed(t.p.exitErr) {
		return at, fmt.Errorf("%w: exited with %v before SIGKILL reached it: %s", ErrBroker, t.p.exitErr, t.p.output())
	}
	return at, nil
}

func (t *killTarget) restart(ctx context.Context) error {
	p, err := startProcess(ctx, t.cfg.Weir, t.cfg.DataDir, t.cfg.BrokerFlags)
	if err != nil {
		return err
	}
	t.p = p
	return nil
}

func (t *killTarget) close() error { return t.p.stop() }

// killed reports whether a process exited by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// process is a `weir broker` subprocess.
type process struct {
	cmd     *exec.Cmd
	addr    string
	out     *tail
	exited  chan struct{} // closed when it has exited
	exitErr error         // set before exited closes
}

// startProcess starts `weir broker` on a free loopback port with its data
// in dir, and polls the port (with a deadline) until it accepts
// connections. The broker gets SIGKILL if this process dies first.
func startProcess(ctx context.Context, weir, dir string, flags []string) (*process, error) {
	for attempt := 1; ; attempt++ {
		p, err := startProcessOnce(ctx, weir, dir, flags)
		if err == nil || attempt == portAttempts || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
	}
}

func startProcessOnce(ctx context.Context, weir, dir string, flags []string) (*process, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: find a free port: %w", ErrBroker, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"broker", "--data-dir", dir, "--listen", addr, "--metrics-listen", "",
		"--log-level", "warn"}, flags...)
	cmd := exec.Command(weir, args...)
	p := &process{cmd: cmd, addr: addr, out: &tail{max: 16 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBroker, weir, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(processStartTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%w: not listening on %s after %v: %s", ErrBroker, addr, processStartTimeout, p.output())
		}
		select {
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-p.exited:
			return nil, fmt.Errorf("%w: exited before listening (%v): %s", ErrBroker, p.exitErr, p.output())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM (a graceful shutdown), waits, and kills the process
// if it takes longer than processStopTimeout. An unclean exit is an error.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil // already gone (killed by the experiment)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(processStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%w: did not stop within %v of SIGTERM; killed: %s", ErrBroker, processStopTimeout, p.output())
	}
	if p.exitErr != nil {
		return fmt.Errorf("%w: stop: %v: %s", ErrBroker, p.exitErr, p.output())
	}
	return nil
}

func (p *process) output() string { return p.out.String() }

// tail keeps the last max bytes written to it: the broker's log, quoted in
// errors.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.TrimSpace(t.buf))
	if s == "" {
		return "(no output)"
	}
	return "broker output:\n" + s
}
