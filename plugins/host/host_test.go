package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc"
)

var ctx = context.Background()

func TestResolveBuiltins(t *testing.T) {
	h := newHost(t, Config{})
	c, err := h.Codec("zstd:level=3")
	if err != nil {
		t.Fatalf("Codec(zstd:level=3): %v", err)
	}
	if _, external := c.(*codecrpc.Client); external || c.ID() != codec.Zstd {
		t.Errorf("zstd resolved to %T (id %v), want the built-in", c, c.ID())
	}
	p, err := h.Partitioner("murmur2")
	if err != nil {
		t.Fatalf("Partitioner(murmur2): %v", err)
	}
	if _, external := p.(*partitionerrpc.Client); external {
		t.Errorf("murmur2 resolved to %T, want the built-in", p)
	}
	f, err := h.FlushPolicy("interval:ms=50")
	if err != nil {
		t.Fatalf("FlushPolicy(interval:ms=50): %v", err)
	}
	if _, external := f.(*flushpolicyrpc.Client); external {
		t.Errorf("interval resolved to %T, want the built-in", f)
	}
	if n := len(h.Processes()); n != 0 {
		t.Errorf("built-ins started %d processes", n)
	}
}

func TestResolveErrors(t *testing.T) {
	h := newHost(t, Config{})
	tests := []struct {
		name     string
		resolve  func() error
		want     error
		contains []string
	}{
		{"unknown name", func() error { _, err := h.Codec("brotli"); return err },
			codec.ErrUnknownCodec, []string{`"brotli"`, "no plugin weir-codec-brotli in " + binDir}},
		{"bad built-in params", func() error { _, err := h.Codec("zstd:level=99"); return err },
			codec.ErrInvalidSpec, []string{"zstd:level=99"}},
		{"malformed", func() error { _, err := h.Partitioner("murmur2:seed"); return err },
			partitioner.ErrInvalidSpec, []string{"murmur2:seed"}},
		{"missing binary", func() error { _, err := h.FlushPolicy("/nonexistent/weir-flushpolicy-x"); return err },
			flushpolicy.ErrPluginFailed, []string{"/nonexistent/weir-flushpolicy-x", "no such file"}},
		{"directory", func() error { _, err := h.Codec(binDir + "/"); return err },
			codec.ErrPluginFailed, []string{"is a directory"}},
		{"plugin rejects params", func() error { _, err := h.Codec("bad:reject=1"); return err },
			codec.ErrInvalidSpec, []string{`"bad:reject=1"`, bin("weir-codec-bad"), "rejected as asked"}},
		{"plugin does not serve the kind", func() error {
			_, err := h.Partitioner(bin("weir-codec-s2"))
			return err
		}, partitioner.ErrPluginFailed, []string{"does not serve the partitioner kind"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.resolve()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.want)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
	if _, err := New(Config{}).Codec("brotli"); !errors.Is(err, codec.ErrUnknownCodec) || !strings.Contains(err.Error(), "no plugin directory") {
		t.Errorf("unknown name without a plugin directory: %v", err)
	}
}

func TestCheckSpec(t *testing.T) {
	h := newHost(t, Config{})
	for _, tc := range []struct{ kind, spec string }{
		{"codec", "lz4"},
		{"codec", "s2:level=better"},
		{"partitioner", "round-robin"},
		{"partitioner", bin("weir-partitioner-keyrange") + ":splits=m"},
		{"flushpolicy", "never"},
		{"flushpolicy", "ratelimit:hz=10"},
	} {
		if err := h.CheckSpec(tc.kind, tc.spec); err != nil {
			t.Errorf("CheckSpec(%s, %s): %v", tc.kind, tc.spec, err)
		}
	}
	for _, tc := range []struct {
		kind, spec string
		want       error
	}{
		{"codec", "s2:level=ultra", codec.ErrInvalidSpec},
		{"partitioner", "keyrange", partitioner.ErrInvalidSpec}, // splits is required
		{"flushpolicy", "ratelimit:hz=0", flushpolicy.ErrInvalidSpec},
		{"codec", "nohandshake", codec.ErrPluginFailed},
		{"router", "x", ErrUnknownKind},
	} {
		if err := h.CheckSpec(tc.kind, tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("CheckSpec(%s, %s): %v, want %v", tc.kind, tc.spec, err, tc.want)
		}
	}
}

// TestOneProcessPerPlugin opens many instances from one binary: they share
// one process and keep separate state.
func TestOneProcessPerPlugin(t *testing.T) {
	h := newHost(t, Config{})
	var parts []partitioner.Partitioner
	for range 3 {
		p, err := h.Partitioner("keyrange:splits=m")
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if _, err := h.Partitioner(bin("weir-partitioner-keyrange") + ":splits=c"); err != nil {
		t.Fatal(err)
	}
	procs := h.Processes()
	if len(procs) != 1 || procs[0].Path != bin("weir-partitioner-keyrange") || procs[0].Pid == 0 {
		t.Fatalf("processes %+v, want one for weir-partitioner-keyrange", procs)
	}
	// Keyless records go round robin per instance: each starts at 0.
	for i, p := range parts {
		resp, err := p.Partition(ctx, partitioner.Request{Topic: "t", Partitions: 4, Keys: [][]byte{nil, nil, []byte("z")}})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(resp.Partitions) != "[0 1 1]" {
			t.Errorf("instance %d: partitions %v, want [0 1 1]", i, resp.Partitions)
		}
	}
}

// TestWeirBuiltins checks that weir-builtins serves each kind.
func TestWeirBuiltins(t *testing.T) {
	h := newHost(t, Config{})
	path := bin("weir-builtins")
	c, err := h.Codec(path + ":builtin=snappy")
	if err != nil {
		t.Fatal(err)
	}
	comp, err := c.Compress(ctx, codec.CompressRequest{Records: []byte("weir weir weir weir")})
	if err != nil || c.ID() != codec.Snappy {
		t.Fatalf("snappy via weir-builtins: id %v, %v", c.ID(), err)
	}
	back, err := codec.Standard(codec.Snappy).Decompress(ctx, codec.DecompressRequest{Compressed: comp.Compressed})
	if err != nil || string(back.Records) != "weir weir weir weir" {
		t.Fatalf("the built-in cannot read the plugin's snappy: %q, %v", back.Records, err)
	}
	p, err := h.Partitioner(path + ":builtin=murmur2")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("customer-42")
	resp, err := p.Partition(ctx, partitioner.Request{Topic: "t", Partitions: 12, Keys: [][]byte{key}})
	if err != nil || resp.Partitions[0] != int32(partitioner.Murmur2(key)&0x7fffffff%12) {
		t.Fatalf("murmur2 via weir-builtins: %v, %v", resp.Partitions, err)
	}
	if kc, ok := p.(partitioner.KeyConsistent); !ok || !kc.KeyConsistent() {
		t.Error("murmur2 via weir-builtins lost its KeyConsistent promise")
	}
	f, err := h.FlushPolicy(path + ":builtin=messages,n=10")
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Appended(ctx, flushpolicy.AppendInfo{Messages: 10, UnflushedMessages: 10, Now: time.Now(), OldestUnflushed: time.Now()})
	if err != nil || !d.Flush {
		t.Fatalf("messages:n=10 via weir-builtins after 10 records: %+v, %v", d, err)
	}
	if _, err := h.Codec(path); !errors.Is(err, codec.ErrInvalidSpec) || !strings.Contains(err.Error(), "missing parameter builtin") {
		t.Errorf("weir-builtins without builtin=: %v", err)
	}
	if procs := h.Processes(); len(procs) != 1 {
		t.Errorf("processes %+v, want one weir-builtins for all three kinds", procs)
	}
}

func TestHandshakeFailures(t *testing.T) {
	h := newHost(t, Config{})
	for _, tc := range []struct{ name, want string }{
		{"nohandshake", "exit status 2"},
		{"stdoutnoise", "Unrecognized remote plugin message: badplugin: hello on stdout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Codec(tc.name)
			if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrStart) {
				t.Fatalf("Codec(%s): %v, want codec.ErrPluginFailed and pluginrpc.ErrStart", tc.name, err)
			}
			for _, s := range []string{bin("weir-codec-" + tc.name), tc.want} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
	if n := len(h.Processes()); n != 0 {
		t.Errorf("%d processes left after failed starts", n)
	}
}

// failure is one misbehaviour of badplugin and what the host must make of it.
type failure struct {
	name    string
	call    func(c codec.Codec, p partitioner.Partitioner, f flushpolicy.Policy) error
	want    []error
	says    string
	restart bool // the process is replaced
}

var codecCall = func(cmd string) func(codec.Codec, partitioner.Partitioner, flushpolicy.Policy) error {
	return func(c codec.Codec, _ partitioner.Partitioner, _ flushpolicy.Policy) error {
		_, err := c.Compress(ctx, codec.CompressRequest{Records: []byte(cmd)})
		return err
	}
}

var partitionerCall = func(topic string) func(codec.Codec, partitioner.Partitioner, flushpolicy.Policy) error {
	return func(_ codec.Codec, p partitioner.Partitioner, _ flushpolicy.Policy) error {
		_, err := p.Partition(ctx, partitioner.Request{Topic: topic, Partitions: 3, Keys: [][]byte{[]byte("a"), nil}})
		return err
	}
}

var policyCall = func(messages int64) func(codec.Codec, partitioner.Partitioner, flushpolicy.Policy) error {
	return func(_ codec.Codec, _ partitioner.Partitioner, f flushpolicy.Policy) error {
		_, err := f.Appended(ctx, flushpolicy.AppendInfo{Messages: messages, UnflushedMessages: messages, Now: time.Now(), OldestUnflushed: time.Now()})
		return err
	}
}

// TestFailures drives each misbehaviour through a real badplugin process and
// checks the error, the restart, and that the next call works.
func TestFailures(t *testing.T) {
	const callTimeout = time.Second
	tests := []failure{
		{"codec crash", codecCall("crash"), []error{codec.ErrPluginFailed, pluginrpc.ErrExited}, "died during Compress (pid %d, exit status 3)", true},
		{"codec hang", codecCall("hang"), []error{codec.ErrPluginFailed, pluginrpc.ErrHung}, "Compress did not answer within 1s, so the process was killed as hung (pid %d, signal: killed)", true},
		{"codec error", codecCall("error"), []error{codec.ErrPluginFailed}, "badplugin: failing as asked", false},
		{"codec garbage", func(c codec.Codec, _ partitioner.Partitioner, _ flushpolicy.Policy) error {
			_, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: []byte("garbage"), MaxSize: 1000})
			return err
		}, []error{codec.ErrPluginFailed, codec.ErrTooLarge}, "1001 bytes, over MaxSize 1000", false},
		{"partitioner crash", partitionerCall("crash"), []error{partitioner.ErrPluginFailed, pluginrpc.ErrExited}, "died during Partition (pid %d, exit status 3)", true},
		{"partitioner hang", partitionerCall("hang"), []error{partitioner.ErrPluginFailed, pluginrpc.ErrHung}, "Partition did not answer within 1s", true},
		{"partitioner error", partitionerCall("error"), []error{partitioner.ErrPluginFailed}, "badplugin: failing as asked", false},
		{"partitioner out of range", partitionerCall("garbage"), []error{partitioner.ErrPluginFailed, partitioner.ErrBadResponse}, "partition 3 out of range [0, 3)", false},
		{"partitioner short", partitionerCall("short"), []error{partitioner.ErrPluginFailed, partitioner.ErrBadResponse}, "1 partitions for 2 records", false},
		{"flushpolicy crash", policyCall(1001), []error{flushpolicy.ErrPluginFailed, pluginrpc.ErrExited}, "died during Appended (pid %d, exit status 3)", true},
		{"flushpolicy hang", policyCall(1002), []error{flushpolicy.ErrPluginFailed, pluginrpc.ErrHung}, "Appended did not answer within 1s", true},
		{"flushpolicy error", policyCall(1003), []error{flushpolicy.ErrPluginFailed}, "badplugin: failing as asked", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, Config{CallTimeout: callTimeout})
			c, err := h.Codec(bin("badplugin"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := h.Partitioner(bin("badplugin"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := h.FlushPolicy(bin("badplugin"))
			if err != nil {
				t.Fatal(err)
			}
			// All three kinds share one badplugin process.
			before := pids(h)
			if len(before) != 1 {
				t.Fatalf("processes %v, want one", before)
			}
			err = tc.call(c, p, f)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			says := tc.says
			if strings.Contains(says, "%d") {
				says = fmt.Sprintf(says, before[0])
			}
			if err == nil || !strings.Contains(err.Error(), bin("badplugin")) || !strings.Contains(err.Error(), says) {
				t.Fatalf("error %v does not name the plugin and say %q", err, says)
			}
			if tc.restart && !gone(before[0]) {
				t.Errorf("the failed process %d still runs", before[0])
			}
			// The next call of every kind works, in a new process if the old
			// one died.
			for name, call := range map[string]func(codec.Codec, partitioner.Partitioner, flushpolicy.Policy) error{
				"codec": codecCall("fine"), "partitioner": partitionerCall("fine"), "flushpolicy": policyCall(1),
			} {
				if err := call(c, p, f); err != nil {
					t.Errorf("%s call after the failure: %v", name, err)
				}
			}
			after := pids(h)
			if restarted := after[0] != before[0]; restarted != tc.restart {
				t.Errorf("pid %d -> %d: restarted = %v, want %v", before[0], after[0], restarted, tc.restart)
			}
		})
	}
}

// TestRestartBudget: beyond MaxRestarts within the window calls fail fast
// until the window has passed.
func TestRestartBudget(t *testing.T) {
	h := newHost(t, Config{MaxRestarts: 2, RestartWindow: time.Minute})
	clk := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h.clock = clk
	c, err := h.Codec("bad")
	if err != nil {
		t.Fatal(err)
	}
	crash, fine := codecCall("crash"), codecCall("fine")
	for i := range 2 {
		if err := crash(c, nil, nil); !errors.Is(err, pluginrpc.ErrExited) {
			t.Fatalf("crash %d: %v", i+1, err)
		}
		if err := fine(c, nil, nil); err != nil {
			t.Fatalf("call after crash %d (restart %d of 2): %v", i+1, i+1, err)
		}
		clk.Advance(10 * time.Second)
	}
	err = crash(c, nil, nil)
	if !errors.Is(err, pluginrpc.ErrExited) || !strings.Contains(err.Error(), "no restarts left (2 per 1m0s): calls fail until 2026-03-01T12:01:00Z") {
		t.Fatalf("third crash: %v", err)
	}
	for range 3 {
		err = fine(c, nil, nil)
		if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrRestartLimit) {
			t.Fatalf("call with no restarts left: %v, want codec.ErrPluginFailed and pluginrpc.ErrRestartLimit", err)
		}
	}
	if !strings.Contains(err.Error(), bin("weir-codec-bad")) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("fail-fast error %q does not name the plugin and the last failure", err)
	}
	// New instances fail fast too, rather than starting the process.
	if _, err := h.Codec("bad"); !errors.Is(err, pluginrpc.ErrRestartLimit) {
		t.Errorf("new instance with no restarts left: %v", err)
	}
	// The first restart leaves the window at 12:01:00.
	clk.Advance(40 * time.Second)
	if err := fine(c, nil, nil); err != nil {
		t.Fatalf("call once a restart left the window: %v", err)
	}
}

func TestCloseReapsAll(t *testing.T) {
	h := New(Config{Dir: binDir, Logger: testLogger(t)})
	if _, err := h.Codec("s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Partitioner("keyrange:splits=k"); err != nil {
		t.Fatal(err)
	}
	f, err := h.FlushPolicy("ratelimit:hz=5")
	if err != nil {
		t.Fatal(err)
	}
	running := pids(h)
	if len(running) != 3 {
		t.Fatalf("processes %v, want 3", h.Processes())
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range running {
		// Close waits for each exit, and the host reaps its children.
		if !gone(pid) {
			t.Errorf("plugin %d survived Close", pid)
		}
	}
	if n := len(h.Processes()); n != 0 {
		t.Errorf("%d processes listed after Close", n)
	}
	if _, err := f.Appended(ctx, flushpolicy.AppendInfo{Messages: 1, UnflushedMessages: 1, Now: time.Now(), OldestUnflushed: time.Now()}); !errors.Is(err, flushpolicy.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrClosed) {
		t.Errorf("policy call after Close: %v", err)
	}
	if _, err := h.Codec("s2"); !errors.Is(err, ErrClosed) {
		t.Errorf("Codec after Close: %v, want ErrClosed", err)
	}
	if _, err := h.Codec("gzip"); err != nil {
		t.Errorf("built-in after Close: %v", err)
	}
}

// TestPluginDiesWithHost SIGKILLs a host process and checks that its plugin
// follows it (Pdeathsig, and the plugin's parent watch).
func TestPluginDiesWithHost(t *testing.T) {
	cmd := exec.Command(bin("sigkillhost"), bin("weir-codec-s2"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the plugin pid from sigkillhost: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "pid "))
	if err != nil || pid <= 0 {
		t.Fatalf("sigkillhost said %q", line)
	}
	if gone(pid) {
		t.Fatalf("plugin %d is not running before the kill", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pid)
}

// TestPluginExitsWhenOrphaned checks the plugin side's own parent watch,
// which catches what Pdeathsig misses: a plugin started without it (here by
// hand, with the handshake cookie) exits once its parent is gone.
func TestPluginExitsWhenOrphaned(t *testing.T) {
	// sh starts the plugin in the background, telling it sh is its host,
	// prints its pid and exits, so the plugin is re-parented.
	sh := exec.Command("sh", "-c", ``+pluginrpc.HostPidEnv+`=$$ "$0" >/dev/null 2>&1 </dev/null & echo $!`, bin("weir-codec-s2"))
	sh.Env = append(os.Environ(), pluginrpc.Handshake.MagicCookieKey+"="+pluginrpc.Handshake.MagicCookieValue,
		pluginrpc.ParentCheckEnv+"=20ms")
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sh printed %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitGone(t, pid)
}
