package pluginrpc

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
)

// ParentCheckInterval is how often a serving plugin checks, by default, that
// its host is alive. Slow on purpose: Pdeathsig normally kills an orphaned
// plugin at once; this catches only the cases Pdeathsig misses.
const ParentCheckInterval = time.Second

// ParentCheckEnv names the environment variable that overrides
// ParentCheckInterval in a plugin, as a Go duration ("50ms"); a malformed or
// non-positive value is ignored. Tests set it to see a plugin through many
// checks quickly. The host's environment passes to its plugins.
const ParentCheckEnv = "WEIR_PLUGIN_PARENT_CHECK"

// Serve serves plugins (kind name -> the kind's plugin-side GRPCPlugin) over
// go-plugin's gRPC protocol and returns only when the host stops it. Each
// kind's rpc package wraps it in a one-call Serve; a binary serving several
// kinds (like weir-builtins) calls it directly. The plugin exits when its
// host process dies (see parentWatch).
func Serve(plugins plugin.PluginSet) {
	w := newParentWatch(os.Getenv(HostPidEnv), os.Getppid, processAlive)
	go w.run(checkInterval(os.Getenv(ParentCheckEnv)), func(why string) {
		fmt.Fprintf(os.Stderr, "weir plugin: the host process is gone (%s); exiting\n", why)
		os.Exit(1)
	})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugins,
		GRPCServer:      NewGRPCServer,
	})
}

// HostPidEnv names the environment variable in which the supervisor passes
// the host's pid to the plugin, so a plugin whose host died during its
// start-up (it then starts with init, or a subreaper, as its parent) knows.
const HostPidEnv = "WEIR_PLUGIN_HOST_PID"

// checkInterval parses ParentCheckEnv's value, defaulting to
// ParentCheckInterval.
func checkInterval(s string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return ParentCheckInterval
}

// parentWatch decides when a serving plugin's host is gone. The plugin's
// parent is the host, or a wrapper the host ran (a shell script that starts
// the plugin without exec), so a parent other than the host is no reason to
// exit. What is: the parent changing from the one the plugin started with
// (it died, and the plugin was re-parented), and, for the start-up race,
// starting as init's child or with the host no longer running.
type parentWatch struct {
	host    int // the host's pid from HostPidEnv; 0 when unknown
	parent  int // the parent when the plugin started
	getppid func() int
	alive   func(pid int) bool // whether a process exists
}

func newParentWatch(hostEnv string, getppid func() int, alive func(int) bool) *parentWatch {
	w := &parentWatch{parent: getppid(), getppid: getppid, alive: alive}
	if pid, err := strconv.Atoi(hostEnv); err == nil && pid > 0 {
		w.host = pid
	}
	return w
}

// gone reports whether the host is gone, and why.
func (w *parentWatch) gone() (string, bool) {
	ppid := w.getppid()
	switch {
	case ppid != w.parent:
		return fmt.Sprintf("re-parented from pid %d to %d", w.parent, ppid), true
	case w.host == 0 || ppid == w.host:
		return "", false
	case ppid == 1:
		// The host is not init, yet init adopted the plugin: orphaned
		// before the watch began.
		return fmt.Sprintf("started as init's child, not host %d's", w.host), true
	case !w.alive(w.host):
		return fmt.Sprintf("host pid %d no longer runs", w.host), true
	}
	return "", false
}

// run checks at once and then every interval, and calls gone with the
// reason once the host is gone.
func (w *parentWatch) run(interval time.Duration, gone func(why string)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if why, ok := w.gone(); ok {
			gone(why)
			return
		}
		<-t.C
	}
}

// Instances is the plugin side's table of open instances of one kind: Open
// adds one under a fresh id, the kind's calls look it up, Close removes it.
// It is safe for concurrent use.
type Instances[T any] struct {
	mu   sync.RWMutex
	next uint64
	m    map[uint64]T
}

// Add stores v and returns its id (never 0).
func (r *Instances[T]) Add(v T) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[uint64]T)
	}
	r.next++
	r.m[r.next] = v
	return r.next
}

// Get returns the instance id; an unknown id returns an error wrapping
// ErrUnknownInstance.
func (r *Instances[T]) Get(id uint64) (T, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.m[id]
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w %d", ErrUnknownInstance, id)
	}
	return v, nil
}

// Remove drops the instance id, closing it if it is an io.Closer. An unknown
// id is not an error (Close is idempotent).
func (r *Instances[T]) Remove(id uint64) error {
	r.mu.Lock()
	v, ok := r.m[id]
	delete(r.m, id)
	r.mu.Unlock()
	if c, isCloser := any(v).(io.Closer); ok && isCloser {
		return c.Close()
	}
	return nil
}

// Len returns the number of open instances.
func (r *Instances[T]) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}
