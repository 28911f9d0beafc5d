// Package pluginrpc holds what every kind of external plugin (codec,
// partitioner, flush policy) shares: the go-plugin handshake, a supervisor
// that runs one plugin binary as a child process, per-instance calls with
// deadlines and restarts, the mapping of errors onto gRPC status codes, and
// the plugin side's Serve.
//
// # Why a supervisor
//
// A built-in runs in the broker and fails like any Go code. An external
// plugin is a separate process that can fail in ways a function cannot: it
// never starts (the binary is missing, prints the wrong handshake, or is not
// a weir plugin), it exits mid-call, it hangs, it answers with garbage. The
// broker must survive each with a clear error and keep going, and it must
// never leave a plugin process behind. The supervisor owns those rules, so
// the per-kind shims (codecrpc, partitionerrpc, flushpolicyrpc) stay thin:
//
//   - Start runs the binary under hashicorp/go-plugin (gRPC only) and waits
//     for its handshake (Config.StartTimeout), then checks its health.
//   - Every call gets a deadline (Config.CallTimeout, 5 s by default). A call
//     that outlives it means the plugin hangs: the supervisor kills the
//     process, and the call returns ErrHung.
//   - A call that finds the process dead (exited, crashed, killed) returns
//     ErrExited with the exit status. The call after a failure starts a new
//     process, at most Config.MaxRestarts (3) times per Config.RestartWindow
//     (1 min); beyond that calls fail fast with ErrRestartLimit until the
//     window has passed, so a plugin that crashes on start-up cannot turn the
//     broker into a fork loop.
//   - Every error names the plugin's path and the call, and wraps the kind's
//     own ErrPluginFailed, so callers test one sentinel per kind.
//
// # Instances
//
// One process serves many instances: a flush policy per partition, a
// partitioner per producer, a codec per spec. A kind's Open RPC builds an
// instance from the spec's parameters and returns its id, which every later
// call carries. An Instance remembers the parameters and the process
// generation it was opened in; after a restart its next call opens it again
// in the new process (whatever state it had, such as a round-robin position,
// starts afresh), so callers never see ids of a dead process. A re-opened
// instance that answers Open differently from the first time (another codec
// id, another loss bound) is closed in the plugin and fails for good with
// ErrIncompatible: callers already rely on the first answer.
//
// # Processes never outlive the host
//
// The child is started with Pdeathsig = SIGKILL, so the kernel kills it when
// the host dies, even by SIGKILL. Pdeathsig follows the thread that forked,
// and the Go runtime may retire threads, so as belt and braces Serve also
// checks its parent once a second (ParentCheckEnv overrides the interval)
// and exits when the parent it started with is gone (it was re-parented).
// The parent need not be the host: a wrapper script that runs the plugin
// without exec sits in between, and Pdeathsig kills the wrapper, which
// re-parents the plugin. For the start-up race, the host's pid (passed in
// HostPidEnv, set last in the plugin's environment so an inherited value
// cannot override it) makes a plugin that starts as init's child, or with
// the host no longer running, exit too. Close kills the process and waits
// for it. A plugin's stdout carries only go-plugin's handshake line: go-plugin
// redirects the plugin's later stdout and stderr into the gRPC stdio stream,
// which the supervisor logs (with the plugin's own hclog output) at debug
// level through slog.
package pluginrpc
