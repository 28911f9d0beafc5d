// Package brokerproc runs `weir broker` as a subprocess on free loopback
// ports (or on addresses given), for the harness: the runner starts one per
// matrix point (so its CPU time and disk writes can be read apart from the
// load's), the durability lab SIGKILLs one and restarts it on the same
// data directory, and the cluster fault lab cuts the power of one started
// on the power-cut file system (Options.PowerCutFS, Process.PowerCut).
// Options.Exec runs it through a command that execs it, such as `ip netns
// exec NAME` for a broker in a network namespace; Options.OpenFilesLimit
// runs it under an open-file limit of its own, and Options.Env adds to its
// environment.
//
// Start waits for the Kafka port by polling it with a deadline, never by
// sleeping a guessed time. The process runs in its own process group (a
// terminal's Ctrl-C reaches the harness, which stops its load before the
// broker) and gets DeathSignal if the harness dies first.
package brokerproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrBroker: the broker would not start, exited, or would not stop cleanly.
// The error quotes the end of its output.
var ErrBroker = errors.New("brokerproc: broker")

// PowerCutStatus is the exit status of `weir broker --power-cut-fs` after
// SIGUSR1 cut its power (Options.PowerCutFS, Process.PowerCut).
const PowerCutStatus = 3

// Defaults of Options.
const (
	DefaultStartTimeout = 30 * time.Second // until the port accepts connections
	DefaultStopTimeout  = 30 * time.Second // from SIGTERM until exit (then SIGKILL)
	portAttempts        = 3                // new ports after "address already in use"
)

// Options say what to run.
type Options struct {
	Weir    string   // the weir binary
	DataDir string   // --data-dir
	Flags   []string // more `weir broker` flags
	// Listen is the address to serve the Kafka protocol on (--listen):
	// set it to restart a broker where clients and its old registration
	// know it. Default: a free loopback port, picked again on a clash.
	Listen string
	// SecureProtocol, when SSL, SASL_PLAINTEXT or SASL_SSL, adds a
	// listener of that protocol on a free loopback port
	// (Process.SecureAddr) beside the PLAINTEXT one on Listen, which stays
	// the inter-broker listener and the one readiness is polled on
	// (--listeners PLAINTEXT://Listen,PROTOCOL://SecureAddr). The
	// certificate and SASL flags it needs come in Flags. Default "": only
	// the PLAINTEXT listener.
	SecureProtocol string
	// SecureListen is the address of the SecureProtocol listener: set it
	// to restart a broker where its registration knows it, or to listen
	// on an address of a network namespace. Default: a free loopback
	// port.
	SecureListen string
	// Metrics serves /metrics on a second free port (Process.MetricsAddr);
	// otherwise the endpoint is off.
	Metrics bool
	// MetricsListen is the address to serve /metrics on; it implies
	// Metrics. Default: a free loopback port.
	MetricsListen string
	// Pprof serves Go's runtime profiles (--pprof-listen) on a free
	// loopback port (Process.PprofAddr): a goroutine count without
	// gathering every partition's metrics. Default off.
	Pprof bool
	// Env are NAME=value pairs added to the broker's environment (which is
	// otherwise the harness's). Default none.
	Env []string
	// OpenFilesLimit, when > 0, is the broker's RLIMIT_NOFILE, soft and
	// hard (what `ulimit -n` sets): it is set by `sh -c 'ulimit -n N &&
	// exec ...'` between the fork and the broker's exec, so the broker
	// never runs under another limit. Raising it above the harness's hard
	// limit needs CAP_SYS_RESOURCE; without it the broker does not start
	// and the error says so. Default 0: the harness's soft limit, which
	// the broker's Go runtime raises to the hard limit.
	OpenFilesLimit int
	// Exec, when not empty, is a command that runs the broker: the weir
	// binary and its arguments follow it (["ip", "netns", "exec", "ns1"]
	// runs `ip netns exec ns1 weir broker ...`). It must exec the broker,
	// not fork it, so that Process.Pid is the broker's. Default: weir is
	// run directly.
	Exec []string
	// Log, when set, receives everything the broker writes besides the
	// tail Output keeps (a file that outlives the process, for runs that
	// restart brokers).
	Log io.Writer
	// DeathSignal is sent to the broker if the harness process dies first.
	// Default SIGTERM (a graceful shutdown).
	DeathSignal syscall.Signal
	// PowerCutFS runs the broker with --power-cut-fs, a lab flag: it runs
	// on an in-memory copy of its data directory that knows what was
	// fsynced, every change made on the directory too, so that
	// Process.PowerCut can cut its power. Default false.
	PowerCutFS bool
	// StartTimeout and StopTimeout default to DefaultStartTimeout and
	// DefaultStopTimeout.
	StartTimeout, StopTimeout time.Duration
}

// Process is a running `weir broker`.
type Process struct {
	Cmd         *exec.Cmd
	Addr        string // Kafka protocol, host:port (Options.Listen)
	SecureAddr  string // the Options.SecureProtocol listener's host:port; "" without one
	MetricsAddr string // "" without Options.Metrics
	PprofAddr   string // "" without Options.Pprof

	opts    Options
	out     *tail
	exited  chan struct{} // closed when the process has exited
	exitErr error         // set before exited is closed
}

// Start starts the broker and returns once its port accepts connections. A
// port taken by another process between the probe and the broker's bind
// makes it try again with new ports.
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.DeathSignal == 0 {
		o.DeathSignal = syscall.SIGTERM
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	for attempt := 1; ; attempt++ {
		p, err := startOnce(ctx, o)
		if err == nil || o.Listen != "" || attempt == portAttempts || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
	}
}

func startOnce(ctx context.Context, o Options) (*Process, error) {
	addr, err := o.Listen, error(nil)
	if addr == "" {
		if addr, err = freePort(); err != nil {
			return nil, err
		}
	}
	metricsAddr := o.MetricsListen
	if o.Metrics && metricsAddr == "" {
		if metricsAddr, err = freePort(); err != nil {
			return nil, err
		}
	}
	secureAddr := ""
	if o.SecureProtocol != "" && o.SecureProtocol != "PLAINTEXT" {
		if secureAddr = o.SecureListen; secureAddr == "" {
			if secureAddr, err = freePort(); err != nil {
				return nil, err
			}
		}
	}
	pprofAddr := ""
	if o.Pprof {
		if pprofAddr, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"broker", "--data-dir", o.DataDir, "--listen", addr, "--metrics-listen", metricsAddr, "--log-level", "warn"}
	if pprofAddr != "" {
		args = append(args, "--pprof-listen", pprofAddr)
	}
	if o.PowerCutFS {
		args = append(args, "--power-cut-fs")
	}
	if secureAddr != "" {
		args = append(args, "--listeners", "PLAINTEXT://"+addr+","+o.SecureProtocol+"://"+secureAddr)
	}
	args = append(args, o.Flags...)
	argv := slices.Clone(o.Exec)
	if o.OpenFilesLimit > 0 {
		// $0 is the limit; the broker's command line follows it.
		argv = append(argv, "/bin/sh", "-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(o.OpenFilesLimit))
	}
	argv = append(append(argv, o.Weir), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	p := &Process{Cmd: cmd, Addr: addr, SecureAddr: secureAddr, MetricsAddr: metricsAddr, PprofAddr: pprofAddr, opts: o, out: &tail{max: 16 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if o.Log != nil {
		w := io.MultiWriter(p.out, o.Log)
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: o.DeathSignal}
	// The DeathSignal comes when the thread that forked the broker exits,
	// not the process: Go retires a thread when a goroutine locked to it
	// ends (zkserver forks ZooKeeper from one, which ends with ZooKeeper),
	// and a thread that forked a broker earlier and is locked later would
	// take the broker with it. So the broker is forked from a goroutine
	// locked to its thread, blocked in Wait for the broker's whole life:
	// that thread runs nothing else, and ends only after the broker did.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBroker, argv[0], err)
	}
	if err := p.waitReady(ctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort() (string, error) {
	handed.mu.Lock()
	defer handed.mu.Unlock()
	if handed.ports == nil {
		handed.ports = map[string]bool{}
	}
	// The kernel may hand the same free port to two probes in a row (two
	// brokers starting at once): a port this process handed out before is
	// held open while another is drawn.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("%w: find a free port: %w", ErrBroker, err)
		}
		addr := ln.Addr().String()
		if handed.ports[addr] {
			held = append(held, ln)
			continue
		}
		handed.ports[addr] = true
		return addr, ln.Close()
	}
	return "", fmt.Errorf("%w: find a free port: every port drawn was handed out before", ErrBroker)
}

// handed are the ports freePort handed out in this process.
var handed struct {
	mu    sync.Mutex
	ports map[string]bool
}

// waitReady polls the port until it accepts a connection, the process
// exits, ctx ends or the start timeout passes.
func (p *Process) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(p.opts.StartTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			select {
			case <-p.exited:
				// Someone else listens there: this broker could not bind.
				return fmt.Errorf("%w: exited (%v) while %s accepted connections: %s", ErrBroker, p.exitErr, p.Addr, p.Output())
			default:
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: not listening on %s after %v: %s", ErrBroker, p.Addr, p.opts.StartTimeout, p.Output())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.exited:
			return fmt.Errorf("%w: exited before listening (%v): %s", ErrBroker, p.exitErr, p.Output())
		case <-tick.C:
		}
	}
}

// Stop sends SIGTERM (a graceful shutdown: logs flushed and sealed), waits,
// and kills the broker if it takes longer than the stop timeout. It returns
// an error if the broker did not exit cleanly, including when it had already
// exited on its own with an error.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
	default:
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if !p.await() {
			return fmt.Errorf("%w: did not stop within %v of SIGTERM; killed: %s", ErrBroker, p.opts.StopTimeout, p.Output())
		}
	}
	if p.exitErr != nil {
		return fmt.Errorf("%w: %v: %s", ErrBroker, p.exitErr, p.Output())
	}
	return nil
}

// await waits, after a signal that ends the broker, for it to exit within
// the stop timeout; past it the broker is killed, and await reports false.
func (p *Process) await() bool {
	timer := time.NewTimer(p.opts.StopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return true
	case <-timer.C:
		_ = p.Cmd.Process.Kill()
		<-p.exited
		return false
	}
}

// PowerCut cuts the power of a broker started with Options.PowerCutFS:
// SIGUSR1, upon which it loses everything it did not fsync (its data
// directory keeps only what was: file contents as of their last fsync,
// directory entries as of their directory's last fsync) and exits at once
// with PowerCutStatus, without a controlled shutdown or a goodbye to
// ZooKeeper. PowerCut returns once it has exited; an error (wrapping
// ErrBroker) when it did not within the stop timeout (it is then killed)
// or exited otherwise.
func (p *Process) PowerCut() error {
	if !p.opts.PowerCutFS {
		return fmt.Errorf("%w: started without PowerCutFS: its power cannot be cut", ErrBroker)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("%w: SIGUSR1: %w", ErrBroker, err)
	}
	if !p.await() {
		return fmt.Errorf("%w: did not exit within %v of SIGUSR1 (power cut); killed: %s", ErrBroker, p.opts.StopTimeout, p.Output())
	}
	if !PowerCutExit(p.exitErr) {
		return fmt.Errorf("%w: exited with %v after SIGUSR1, not the power cut's status %d: %s", ErrBroker, p.exitErr, PowerCutStatus, p.Output())
	}
	return nil
}

// PowerCutExit reports whether a broker's exit error (ExitErr) is a power
// cut's: exit status PowerCutStatus.
func PowerCutExit(exitErr error) bool {
	var ee *exec.ExitError
	return errors.As(exitErr, &ee) && ee.ExitCode() == PowerCutStatus
}

// Pid is the broker's process id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited; ExitErr then tells how.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is cmd.Wait's error; valid once Exited is closed.
func (p *Process) ExitErr() error { return p.exitErr }

// Output is the end of the broker's log (its last 16 KiB), for errors.
func (p *Process) Output() string { return p.out.String() }

// Logged reports whether the broker's log so far (its first 16 MiB) holds
// s: Output's end may have lost a line written early, behind a burst of
// others (a line per partition).
func (p *Process) Logged(s string) bool { return p.out.logged(s) }

// tail keeps the last max bytes written to it, and the first allMax in
// all.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
	all []byte
}

const allMax = 16 << 20

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	if n := min(len(b), allMax-len(t.all)); n > 0 {
		t.all = append(t.all, b[:n]...)
	}
	return len(b), nil
}

func (t *tail) logged(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.all, []byte(s))
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

// Quiet returns a handler that passes log records on to next until off is
// set, and drops them from then on (handlers derived from it share off): a
// broker whose power was cut goes quiet, the errors of its failing file
// operations being the cut's doing, not findings.
func Quiet(next slog.Handler, off *atomic.Bool) slog.Handler { return quiet{next: next, off: off} }

type quiet struct {
	next slog.Handler
	off  *atomic.Bool
}

func (h quiet) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.off.Load() && h.next.Enabled(ctx, l)
}

func (h quiet) Handle(ctx context.Context, r slog.Record) error {
	if h.off.Load() {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h quiet) WithAttrs(as []slog.Attr) slog.Handler {
	return quiet{next: h.next.WithAttrs(as), off: h.off}
}

func (h quiet) WithGroup(name string) slog.Handler {
	return quiet{next: h.next.WithGroup(name), off: h.off}
}
