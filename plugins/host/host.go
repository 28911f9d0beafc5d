package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

// Errors of the host itself; the kinds' errors wrap their own sentinels.
var (
	// ErrClosed: the Host was closed. A spec that needs a plugin then fails
	// with an error wrapping both ErrClosed and the kind's ErrPluginFailed.
	ErrClosed = errors.New("host: closed")
	// ErrUnknownKind: CheckSpec was given a kind other than codec,
	// partitioner or flushpolicy.
	ErrUnknownKind = errors.New("host: unknown plugin kind")
)

// Config configures a Host. Zero fields take their defaults.
type Config struct {
	// Dir is the plugin directory, searched for weir-<kind>-<name> when a
	// spec's name is no built-in. Empty: no directory is searched.
	Dir string
	// CallTimeout bounds each plugin call; a call that outlives it kills the
	// plugin as hung. Default pluginrpc.DefaultCallTimeout (5 s).
	CallTimeout time.Duration
	// MaxRestarts is how many times one plugin process may be restarted
	// within RestartWindow; negative disables restarts. Default
	// pluginrpc.DefaultMaxRestarts (3).
	MaxRestarts int
	// RestartWindow is the window MaxRestarts counts over. Default
	// pluginrpc.DefaultRestartWindow (1 min).
	RestartWindow time.Duration
	// StartTimeout bounds a plugin's start (exec, handshake, health check).
	// Default pluginrpc.DefaultStartTimeout (10 s).
	StartTimeout time.Duration
	// Logger gets plugin lifecycle events, and plugin output at debug level.
	// Default slog.Default().
	Logger *slog.Logger
}

// Host resolves specs and owns the plugin processes it starts. It is safe
// for concurrent use. The caller must Close it.
type Host struct {
	cfg   Config
	clock clock.Clock // the restart window's clock; tests replace it

	mu     sync.Mutex
	procs  map[string]*proc // by absolute path
	closed bool
}

// proc is one plugin binary's supervisor, or its start in progress.
type proc struct {
	done chan struct{} // closed when the start finished
	sup  *pluginrpc.Supervisor
	err  error
}

// New returns a Host; it starts nothing until a spec needs a plugin.
func New(cfg Config) *Host {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Host{cfg: cfg, clock: clock.System{}, procs: make(map[string]*proc)}
}

// Codec returns the codec a spec names (see the package doc). A plugin codec
// is a *codecrpc.Client, which the caller may Close when done with it; Host
// Close ends it anyway. Errors name the spec and wrap codec's sentinels.
func (h *Host) Codec(s string) (codec.Codec, error) {
	c, path, params, err := resolve(h, pluginrpc.KindCodec, s, codec.New, codec.ErrUnknownCodec, codec.ErrInvalidSpec)
	if err != nil || path == "" {
		return c, wrapSpec(pluginrpc.KindCodec, s, err)
	}
	sup, err := h.supervisor(path, codec.ErrPluginFailed)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindCodec, s, err)
	}
	cl, err := codecrpc.Open(context.Background(), sup, params)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindCodec, s, err)
	}
	return cl, nil
}

// Partitioner returns a new partitioner for a spec (one per producer: a
// partitioner keeps state). A plugin partitioner is a *partitionerrpc.Client.
// Errors name the spec and wrap partitioner's sentinels.
func (h *Host) Partitioner(s string) (partitioner.Partitioner, error) {
	p, path, params, err := resolve(h, pluginrpc.KindPartitioner, s, partitioner.New, partitioner.ErrUnknownPartitioner, partitioner.ErrInvalidSpec)
	if err != nil || path == "" {
		return p, wrapSpec(pluginrpc.KindPartitioner, s, err)
	}
	sup, err := h.supervisor(path, partitioner.ErrPluginFailed)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindPartitioner, s, err)
	}
	cl, err := partitionerrpc.Open(context.Background(), sup, params)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindPartitioner, s, err)
	}
	return cl, nil
}

// FlushPolicy returns a new policy for a spec, one per partition (a policy
// keeps state). A plugin policy is a *flushpolicyrpc.Client. Errors name the
// spec and wrap flushpolicy's sentinels.
func (h *Host) FlushPolicy(s string) (flushpolicy.Policy, error) {
	p, path, params, err := resolve(h, pluginrpc.KindFlushPolicy, s, flushpolicy.New, flushpolicy.ErrUnknownPolicy, flushpolicy.ErrInvalidSpec)
	if err != nil || path == "" {
		return p, wrapSpec(pluginrpc.KindFlushPolicy, s, err)
	}
	sup, err := h.supervisor(path, flushpolicy.ErrPluginFailed)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindFlushPolicy, s, err)
	}
	cl, err := flushpolicyrpc.Open(context.Background(), sup, params)
	if err != nil {
		return nil, wrapSpec(pluginrpc.KindFlushPolicy, s, err)
	}
	return cl, nil
}

// CheckSpec validates a spec of a kind ("codec", "partitioner",
// "flushpolicy") without putting load on it: a built-in is built with its
// parameters; a plugin's binary must exist, complete the handshake and open
// an instance with the parameters (the process then stays up for later
// use). The instance is closed again.
func (h *Host) CheckSpec(kind, s string) error {
	var v any
	var err error
	switch kind {
	case pluginrpc.KindCodec:
		v, err = h.Codec(s)
	case pluginrpc.KindPartitioner:
		v, err = h.Partitioner(s)
	case pluginrpc.KindFlushPolicy:
		v, err = h.FlushPolicy(s)
	default:
		return fmt.Errorf("%w %q (want %s, %s or %s)", ErrUnknownKind, kind, pluginrpc.KindCodec, pluginrpc.KindPartitioner, pluginrpc.KindFlushPolicy)
	}
	if err != nil {
		return err
	}
	if c, ok := v.(io.Closer); ok {
		if err := c.Close(); err != nil {
			return wrapSpec(kind, s, err)
		}
	}
	return nil
}

// Process describes one plugin process the host runs.
type Process struct {
	Path string // absolute path of the binary
	Pid  int    // 0 while it is down (between a failure and the next call's restart)
}

// Processes lists the plugin processes, sorted by path.
func (h *Host) Processes() []Process {
	h.mu.Lock()
	var sups []*pluginrpc.Supervisor
	for _, p := range h.procs {
		select {
		case <-p.done:
			if p.sup != nil {
				sups = append(sups, p.sup)
			}
		default:
		}
	}
	h.mu.Unlock()
	out := make([]Process, 0, len(sups))
	for _, s := range sups {
		out = append(out, Process{Path: s.Path(), Pid: s.Pid()})
	}
	slices.SortFunc(out, func(a, b Process) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Close kills every plugin process the host started and waits for them to
// exit. Instances from them fail afterwards; so do new specs that need a
// plugin. It is idempotent and returns nil.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	procs := make([]*proc, 0, len(h.procs))
	for _, p := range h.procs {
		procs = append(procs, p)
	}
	h.procs = make(map[string]*proc)
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			<-p.done
			if p.sup != nil {
				_ = p.sup.Close()
			}
		})
	}
	wg.Wait()
	return nil
}

// resolve parses s and returns the built-in it names, or the path and
// parameters of the plugin that serves it.
func resolve[T any](h *Host, kind, s string, newBuiltin func(string) (T, error), errUnknown, errInvalid error) (builtin T, path string, params map[string]string, err error) {
	var zero T
	sp, err := spec.Parse(s)
	if err != nil {
		return zero, "", nil, fmt.Errorf("%w: %w", errInvalid, err)
	}
	if sp.IsPath() {
		return zero, sp.Name, sp.Params, nil
	}
	v, err := newBuiltin(s)
	if err == nil || !errors.Is(err, errUnknown) {
		return v, "", nil, err
	}
	if h.cfg.Dir == "" {
		return zero, "", nil, fmt.Errorf("%w (no plugin directory configured)", err)
	}
	file := filepath.Join(h.cfg.Dir, "weir-"+kind+"-"+sp.Name)
	if _, statErr := os.Stat(file); statErr != nil {
		return zero, "", nil, fmt.Errorf("%w (and no plugin %s in %s)", err, filepath.Base(file), h.cfg.Dir)
	}
	return zero, file, sp.Params, nil
}

// wrapSpec names the spec in err (nil stays nil).
func wrapSpec(kind, s string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("host: %s spec %q: %w", kind, s, err)
}

// supervisor returns the supervisor of the plugin binary at path, starting
// the process if none runs. Errors wrap failed, the kind's ErrPluginFailed.
func (h *Host) supervisor(path string, failed error) (*pluginrpc.Supervisor, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: plugin path %s: %w", failed, path, err)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: plugin %s not started", failed, ErrClosed, abs)
	}
	p, ok := h.procs[abs]
	if ok {
		h.mu.Unlock()
		<-p.done
		if p.err != nil {
			return nil, fmt.Errorf("%w: %w", failed, p.err)
		}
		return p.sup, nil
	}
	p = &proc{done: make(chan struct{})}
	h.procs[abs] = p
	h.mu.Unlock()

	p.sup, p.err = h.start(abs)
	h.mu.Lock()
	switch {
	case p.err != nil:
		delete(h.procs, abs) // the next spec tries again
	case h.closed: // Close ran during the start and did not see this one
		_ = p.sup.Close()
		p.sup, p.err = nil, ErrClosed
	}
	h.mu.Unlock()
	close(p.done)
	if p.err != nil {
		return nil, fmt.Errorf("%w: %w", failed, p.err)
	}
	return p.sup, nil
}

// start checks the binary and starts it under a supervisor.
func (h *Host) start(path string) (*pluginrpc.Supervisor, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: plugin binary %s: %w", pluginrpc.ErrStart, path, err)
	case fi.IsDir():
		return nil, fmt.Errorf("%w: plugin binary %s is a directory", pluginrpc.ErrStart, path)
	case fi.Mode().Perm()&0o111 == 0:
		return nil, fmt.Errorf("%w: plugin binary %s is not executable (mode %v): %w", pluginrpc.ErrStart, path, fi.Mode().Perm(), fs.ErrPermission)
	}
	return pluginrpc.Start(pluginrpc.Config{
		Path: path,
		Plugins: plugin.PluginSet{
			pluginrpc.KindCodec:       codecrpc.Plugin(nil),
			pluginrpc.KindPartitioner: partitionerrpc.Plugin(nil),
			pluginrpc.KindFlushPolicy: flushpolicyrpc.Plugin(nil),
		},
		StartTimeout:  h.cfg.StartTimeout,
		CallTimeout:   h.cfg.CallTimeout,
		MaxRestarts:   h.cfg.MaxRestarts,
		RestartWindow: h.cfg.RestartWindow,
		Logger:        h.cfg.Logger,
		Clock:         h.clock,
	})
}
