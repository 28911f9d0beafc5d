package host

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/pluginrpc"
)

// checkInterval is the plugins' parent-check interval in the tests that set
// pluginrpc.ParentCheckEnv: short, so a few hundred milliseconds of calls
// span many checks.
const checkInterval = 20 * time.Millisecond

// stayUp calls c until more than ten parent-check intervals have passed and
// checks that every call worked in the one process the host started.
func stayUp(t *testing.T, h *Host, c codec.Codec) {
	t.Helper()
	before := pids(h)
	start := time.Now()
	calls := 0
	for ; calls < 10 || time.Since(start) < 10*checkInterval; calls++ {
		if _, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("hello")}); err != nil {
			t.Fatalf("call %d, %v after the first: %v", calls+1, time.Since(start), err)
		}
	}
	if after := pids(h); len(before) != 1 || !slices.Equal(before, after) {
		t.Fatalf("plugin processes %v before %d calls over %v, %v after: want one, unchanged", before, calls, time.Since(start), after)
	}
}

// TestWrappedPluginStaysUp: a plugin started through a wrapper script that
// does not exec, so that its parent is the shell and not the host, runs on
// across many parent checks. (The check used to want the host as parent and
// killed such a plugin at its first check.)
func TestWrappedPluginStaysUp(t *testing.T) {
	t.Setenv(pluginrpc.ParentCheckEnv, checkInterval.String())
	dir := t.TempDir()
	script := "#!/bin/sh\n'" + bin("weir-codec-s2") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "weir-codec-wrapped"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, Config{Dir: dir})
	c, err := h.Codec("wrapped")
	if err != nil {
		t.Fatal(err)
	}
	stayUp(t, h, c)
}

// TestInheritedHostPidEnv: a host whose own environment already sets
// pluginrpc.HostPidEnv (to init's pid here) passes its own pid to the plugin,
// which then stays up. (go-plugin appended the inherited value after ours,
// and the last one wins.)
func TestInheritedHostPidEnv(t *testing.T) {
	t.Setenv(pluginrpc.ParentCheckEnv, checkInterval.String())
	t.Setenv(pluginrpc.HostPidEnv, "1")
	h := newHost(t, Config{})
	c, err := h.Codec(bin("badplugin"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("hostpid")})
	if want := strconv.Itoa(os.Getpid()); err != nil || string(resp.Compressed) != want {
		t.Fatalf("the plugin's %s = %q, %v; want the host's pid %s", pluginrpc.HostPidEnv, resp.Compressed, err, want)
	}
	stayUp(t, h, c)
}

// count asks badplugin, through a codec instance, for one of its counters
// ("instances" open, "opens" ever).
func count(t *testing.T, c codec.Codec, what string) int {
	t.Helper()
	resp, err := c.Compress(ctx, codec.CompressRequest{Records: []byte(what)})
	if err != nil {
		t.Fatalf("asking the plugin for %s: %v", what, err)
	}
	n, err := strconv.Atoi(string(resp.Compressed))
	if err != nil {
		t.Fatalf("the plugin answered %q for %s", resp.Compressed, what)
	}
	return n
}

// TestReopenMismatchFailsForGood: when a restarted plugin re-opens an
// instance with another codec id or loss bound, the instance it opened is
// closed in the plugin, and the host's instance fails for good with a clear
// error rather than re-opening (and leaking) at every call.
func TestReopenMismatchFailsForGood(t *testing.T) {
	tests := []struct {
		name    string
		open    func(h *Host, file string) (func() error, error) // returns the instance's call
		changed string
		kindErr error
	}{
		{"codec id", func(h *Host, file string) (func() error, error) {
			c, err := h.Codec(bin("badplugin") + ":idfile=" + file)
			if err == nil && c.ID() != 6 {
				err = errors.New("codec id " + c.ID().String() + ", want 6")
			}
			return func() error { return codecCall("fine")(c, nil, nil) }, err
		}, "codec id changed from 6 to 5 after a restart", codec.ErrPluginFailed},
		{"loss bound", func(h *Host, file string) (func() error, error) {
			f, err := h.FlushPolicy(bin("badplugin") + ":boundfile=" + file)
			if err == nil && f.(flushpolicy.Bounded).LossBound().Messages != 6 {
				err = errors.New("loss bound not 6 messages")
			}
			return func() error { return policyCall(1)(nil, nil, f) }, err
		}, "loss bound changed from", flushpolicy.ErrPluginFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "answer")
			if err := os.WriteFile(file, []byte("6"), 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHost(t, Config{})
			call, err := tc.open(h, file)
			if err != nil {
				t.Fatal(err)
			}
			counter, err := h.Codec(bin("badplugin"))
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, counter, "instances"); n != 2 {
				t.Fatalf("%d instances open, want 2", n)
			}
			if err := os.WriteFile(file, []byte("5"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := counter.Compress(ctx, codec.CompressRequest{Records: []byte("crash")}); !errors.Is(err, pluginrpc.ErrExited) {
				t.Fatalf("crash: %v", err)
			}
			for i := range 3 {
				err := call()
				if !errors.Is(err, tc.kindErr) || !errors.Is(err, pluginrpc.ErrIncompatible) || !strings.Contains(err.Error(), tc.changed) {
					t.Fatalf("call %d after the restart: %v; want %v and pluginrpc.ErrIncompatible, saying %q", i+1, err, tc.kindErr, tc.changed)
				}
			}
			// In the new process: the counter's own instance, re-opened;
			// the rejected one was opened once and closed.
			if n := count(t, counter, "instances"); n != 1 {
				t.Errorf("%d instances open in the restarted plugin, want 1 (the rejected one leaked)", n)
			}
			if n := count(t, counter, "opens"); n != 2 {
				t.Errorf("%d Opens in the restarted plugin, want 2 (the failed instance re-opened at every call)", n)
			}
		})
	}
}

// allocated returns the bytes this process allocated while f ran.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecompressOverLimitNotReceived: a plugin answering Decompress with
// 64 MiB under a 1000-byte MaxSize is refused from the answer's length
// prefix, before the host receives it, and the connection survives.
func TestDecompressOverLimitNotReceived(t *testing.T) {
	h := newHost(t, Config{})
	c, err := h.Codec(bin("badplugin"))
	if err != nil {
		t.Fatal(err)
	}
	before := pids(h)
	alloc := allocated(func() {
		_, err = c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("huge"), MaxSize: 1000})
	})
	if !errors.Is(err, codec.ErrTooLarge) || !errors.Is(err, codec.ErrPluginFailed) || !strings.Contains(err.Error(), bin("badplugin")) {
		t.Errorf("64 MiB answer under MaxSize 1000: %v; want codec.ErrTooLarge and codec.ErrPluginFailed, naming the plugin", err)
	}
	if alloc > 16<<20 {
		t.Errorf("refusing a 64 MiB answer under MaxSize 1000 allocated %d MiB", alloc>>20)
	}
	if resp, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("fine"), MaxSize: 1000}); err != nil || string(resp.Records) != "fine" {
		t.Errorf("next call: %q, %v", resp.Records, err)
	}
	if resp, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("huge")}); err != nil || len(resp.Records) != 64<<20 {
		t.Errorf("64 MiB answer without MaxSize: %d bytes, %v", len(resp.Records), err)
	}
	if after := pids(h); !slices.Equal(before, after) {
		t.Errorf("plugin processes %v, then %v: want no restart", before, after)
	}
}

// TestClosedHostErrors: after Close, a spec that needs a plugin fails with
// the kind's ErrPluginFailed as well as ErrClosed.
func TestClosedHostErrors(t *testing.T) {
	h := New(Config{Dir: binDir, Logger: testLogger(t)})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	_, cerr := h.Codec("s2")
	_, perr := h.Partitioner("keyrange:splits=k")
	_, ferr := h.FlushPolicy("ratelimit:hz=5")
	for _, tc := range []struct {
		err, kind error
	}{{cerr, codec.ErrPluginFailed}, {perr, partitioner.ErrPluginFailed}, {ferr, flushpolicy.ErrPluginFailed}} {
		if !errors.Is(tc.err, ErrClosed) || !errors.Is(tc.err, tc.kind) {
			t.Errorf("spec after Close: %v; want ErrClosed and %v", tc.err, tc.kind)
		}
	}
}
