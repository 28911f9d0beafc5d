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

// ParentCheckInterval is how often a serving plugin checks that its parent
// (the host) is alive. Slow on purpose: Pdeathsig normally kills an orphaned
// plugin at once; this catches only the cases Pdeathsig misses.
const ParentCheckInterval = time.Second

// Serve serves plugins (kind name -> the kind's plugin-side GRPCPlugin) over
// go-plugin's gRPC protocol and returns only when the host stops it. Each
// kind's rpc package wraps it in a one-call Serve; a binary serving several
// kinds (like weir-builtins) calls it directly. The plugin exits when its
// parent process dies.
func Serve(plugins plugin.PluginSet) {
	go watchParent(hostPid(), ParentCheckInterval, os.Getppid, func() {
		fmt.Fprintln(os.Stderr, "weir plugin: the host process is gone; exiting")
		os.Exit(1)
	})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugins,
		GRPCServer:      NewGRPCServer,
	})
}

// HostPidEnv names the environment variable in which the supervisor passes
// the host's pid to the plugin. Serve compares its parent with it rather than
// with the parent it finds when it starts, which would already be init's if
// the host died during the plugin's start-up.
const HostPidEnv = "WEIR_PLUGIN_HOST_PID"

// hostPid is the pid the plugin's parent must have: HostPidEnv's, or the
// parent at start when it is unset or malformed.
func hostPid() int {
	if pid, err := strconv.Atoi(os.Getenv(HostPidEnv)); err == nil && pid > 0 {
		return pid
	}
	return os.Getppid()
}

// watchParent calls gone once getppid stops returning parent (the process
// was re-parented because its parent died), checking every interval.
func watchParent(parent int, interval time.Duration, getppid func() int, gone func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for range t.C {
		if getppid() != parent {
			gone()
			return
		}
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
