package host

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// binDir holds the plugin binaries TestMain builds, once for all tests, named
// as the plugin directory wants them (weir-<kind>-<name>).
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "weir-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildPlugins(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// buildPlugins builds the example plugins, weir-builtins and the test-only
// programs into dir with one `go build`, then names badplugin for each way
// the tests start it.
func buildPlugins(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the host tests build plugin binaries and need the go command: %w", err)
	}
	const mod = "github.com/weir-broker/weir/plugins/"
	cmd := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator),
		mod+"cmd/weir-codec-s2", mod+"cmd/weir-partitioner-keyrange", mod+"cmd/weir-flushpolicy-ratelimit",
		mod+"cmd/weir-builtins", mod+"host/internal/badplugin", mod+"host/internal/sigkillhost")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the plugin binaries: %w\n%s", err, out.Bytes())
	}
	for _, name := range []string{"weir-codec-bad", "weir-partitioner-bad", "weir-flushpolicy-bad", "weir-codec-nohandshake", "weir-codec-stdoutnoise"} {
		if err := os.Symlink(filepath.Join(dir, "badplugin"), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// bin returns the path of a built binary.
func bin(name string) string { return filepath.Join(binDir, name) }

// testLogger shows plugin lifecycle events in the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newHost returns a Host over binDir, closed when the test ends.
func newHost(t testing.TB, cfg Config) *Host {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = binDir
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	h := New(cfg)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// gone reports whether pid no longer runs: no such process, or a zombie
// that its new parent has not reaped yet.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] == 'Z'
	}
	return false
}

// waitGone polls until pid is gone, failing the test after 10 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !gone(pid) {
		select {
		case <-deadline:
			t.Fatalf("process %d still runs 10s later", pid)
		case <-tick.C:
		}
	}
}

// pids returns the pids of the host's plugin processes.
func pids(h *Host) []int {
	var out []int
	for _, p := range h.Processes() {
		out = append(out, p.Pid)
	}
	return out
}
