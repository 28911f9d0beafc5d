package pluginrpc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc"
)

// TestMain doubles as the plugin: started by a Supervisor (go-plugin puts
// the handshake cookie in its environment), the test binary serves the
// scripted codec instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv(pluginrpc.Handshake.MagicCookieKey) == pluginrpc.Handshake.MagicCookieValue {
		codecrpc.Serve(func(map[string]string) (codec.Codec, error) { return scripted{}, nil })
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// scripted is a codec (id 5) whose Compress obeys its input: "crash" exits
// the process with status 3, "hang" blocks forever, "pid" answers the
// process id; anything else is echoed.
type scripted struct{}

func (scripted) ID() codec.ID { return 5 }
func (scripted) Compress(_ context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	switch string(req.Records) {
	case "crash":
		os.Exit(3)
	case "hang":
		select {}
	case "pid":
		return codec.CompressResponse{Compressed: []byte(strconv.Itoa(os.Getpid()))}, nil
	}
	return codec.CompressResponse{Compressed: bytes.Clone(req.Records)}, nil
}
func (scripted) Decompress(_ context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	return codec.DecompressResponse{Records: bytes.Clone(req.Compressed)}, nil
}

// testLogger shows the supervisor's info and warn events in the test's
// output (with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func start(t *testing.T, cfg pluginrpc.Config) *pluginrpc.Supervisor {
	t.Helper()
	cfg.Path = os.Args[0]
	cfg.Logger = testLogger(t)
	cfg.Plugins = plugin.PluginSet{pluginrpc.KindCodec: codecrpc.Plugin(nil)}
	sup, err := pluginrpc.Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = sup.Close() })
	return sup
}

func compress(c codec.Codec, s string) (string, error) {
	resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: []byte(s)})
	return string(resp.Compressed), err
}

// mustCompress compresses s and checks the echo.
func mustCompress(t *testing.T, c codec.Codec, s string) {
	t.Helper()
	if got, err := compress(c, s); err != nil || got != s {
		t.Fatalf("Compress(%q) = %q, %v; want the echo", s, got, err)
	}
}

// gone reports whether pid no longer runs: no such process, or a zombie
// nobody reaped yet.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}

func TestRestartBudget(t *testing.T) {
	clk := clocktest.New(t0)
	sup := start(t, pluginrpc.Config{MaxRestarts: 1, RestartWindow: time.Minute, Clock: clk})
	c, err := codecrpc.Open(context.Background(), sup, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	mustCompress(t, c, "hello")
	pid1 := sup.Pid()

	// A crash mid-call: a clear error, and the next call restarts.
	_, err = compress(c, "crash")
	if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrExited) {
		t.Fatalf("crash: %v, want codec.ErrPluginFailed and pluginrpc.ErrExited", err)
	}
	for _, want := range []string{os.Args[0], "during Compress", "exit status 3", "the next call restarts it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("crash error %q lacks %q", err, want)
		}
	}
	if !gone(pid1) {
		t.Errorf("crashed plugin pid %d still there", pid1)
	}
	mustCompress(t, c, "after restart")
	if pid2 := sup.Pid(); pid2 == 0 || pid2 == pid1 {
		t.Errorf("pid after restart = %d, was %d", pid2, pid1)
	}

	// The budget (one restart per minute) is spent: the next crash leaves
	// the plugin down and calls fail fast.
	_, err = compress(c, "crash")
	if !errors.Is(err, pluginrpc.ErrExited) || !strings.Contains(err.Error(), "no restarts left") {
		t.Fatalf("second crash: %v, want ErrExited saying no restarts are left", err)
	}
	for range 2 {
		_, err = compress(c, "hello")
		if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrRestartLimit) {
			t.Fatalf("call with the budget spent: %v, want codec.ErrPluginFailed and pluginrpc.ErrRestartLimit", err)
		}
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "calls fail until 2026-01-02T03:05:05Z") {
		t.Errorf("fail-fast error %q does not say why and until when", err)
	}
	if pid := sup.Pid(); pid != 0 {
		t.Errorf("Pid() = %d with the plugin down", pid)
	}

	// Once the window has passed, the next call restarts it.
	clk.Advance(time.Minute)
	mustCompress(t, c, "back again")
}

func TestHungCallKillsAndRestarts(t *testing.T) {
	sup := start(t, pluginrpc.Config{CallTimeout: 500 * time.Millisecond})
	c, err := codecrpc.Open(context.Background(), sup, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	pid, err := compress(c, "pid")
	if err != nil {
		t.Fatal(err)
	}
	_, err = compress(c, "hang")
	if !errors.Is(err, codec.ErrPluginFailed) || !errors.Is(err, pluginrpc.ErrHung) {
		t.Fatalf("hang: %v, want codec.ErrPluginFailed and pluginrpc.ErrHung", err)
	}
	if !strings.Contains(err.Error(), "Compress did not answer within 500ms") || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("hang error %q does not say what happened", err)
	}
	n, _ := strconv.Atoi(pid)
	if n == 0 || !gone(n) {
		t.Errorf("hung plugin pid %q still there", pid)
	}
	mustCompress(t, c, "after the hang")
	if err := sup.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestCloseReaps(t *testing.T) {
	sup := start(t, pluginrpc.Config{})
	pid := sup.Pid()
	if pid == 0 || gone(pid) {
		t.Fatalf("no live plugin: pid %d", pid)
	}
	c, err := codecrpc.Open(context.Background(), sup, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := sup.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the exit, and go-plugin reaps: gone at once.
	if !gone(pid) {
		t.Fatalf("plugin pid %d survived Close", pid)
	}
	if _, err := compress(c, "x"); !errors.Is(err, pluginrpc.ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if err := sup.Ping(context.Background()); !errors.Is(err, pluginrpc.ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}
}

// TestStartFailures starts binaries that are no weir plugins.
func TestStartFailures(t *testing.T) {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true binary")
	}
	echoBin, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo binary")
	}
	tests := []struct{ path, want string }{
		{"/nonexistent/weir-codec-x", "no such file"},
		{trueBin, "Failed to read any lines from plugin's stdout"},
		{echoBin, "Unrecognized remote plugin message"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, err := pluginrpc.Start(pluginrpc.Config{
				Path:         tc.path,
				Plugins:      plugin.PluginSet{pluginrpc.KindCodec: codecrpc.Plugin(nil)},
				StartTimeout: 5 * time.Second,
				Logger:       testLogger(t),
			})
			if !errors.Is(err, pluginrpc.ErrStart) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start(%s): %v, want ErrStart naming the path and saying %q", tc.path, err, tc.want)
			}
		})
	}
}
