package zkserver

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// require skips without ZooKeeper, or fails under CI=true (as zktest.Require,
// which this package cannot import).
func require(t *testing.T) {
	t.Helper()
	if err := Debian().Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: not skipping)", err)
		}
		t.Skipf("%v", err)
	}
}

func TestStartStopDetached(t *testing.T) {
	require(t)
	dir := t.TempDir()
	s, err := Start(context.Background(), Config{Dir: dir, Detach: true, StopTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	if reply, err := FourLetterWord(s.Addr, "ruok", time.Second); err != nil || reply != "imok" {
		t.Fatalf("ruok = %q, %v", reply, err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "zoo.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tickTime=2000\n", "maxSessionTimeout=40000\n", "dataDir=" + filepath.Join(dir, "data") + "\n"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("zoo.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(string(cfg), "forceSync") {
		t.Errorf("zoo.cfg turns fsync off without NoSync:\n%s", cfg)
	}
	pid := s.Pid()
	if pid == 0 {
		t.Fatal("no pid while running")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.Pid() != 0 {
		t.Fatal("running after Stop")
	}
	if _, err := FourLetterWord(s.Addr, "ruok", time.Second); err == nil {
		t.Fatal("ruok answered after Stop")
	}
}

// A server given a host listens there (any 127/8 address is loopback's),
// and not on 127.0.0.1.
func TestHost(t *testing.T) {
	require(t)
	dir := t.TempDir()
	s, err := Start(context.Background(), Config{Dir: dir, Host: "127.0.0.2", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	host, port, _ := net.SplitHostPort(s.Addr)
	if host != "127.0.0.2" {
		t.Errorf("Addr %s, want host 127.0.0.2", s.Addr)
	}
	if mode, err := s.Mode(); err != nil || mode != "standalone" {
		t.Errorf("Mode = %q, %v", mode, err)
	}
	if _, err := FourLetterWord(net.JoinHostPort("127.0.0.1", port), "ruok", time.Second); err == nil {
		t.Errorf("ruok answered on 127.0.0.1:%s; want the server on 127.0.0.2 only", port)
	}
}

func TestStartOnTakenPort(t *testing.T) {
	require(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(context.Background(), Config{Dir: t.TempDir(), Port: ln.Addr().(*net.TCPAddr).Port})
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("Start on a taken port: %v, want ErrPortInUse", err)
	}
}

func TestConfigAndInstallErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want error
		text string
	}{
		{Config{}, nil, "Dir is required"},
		{Config{Dir: "x", Port: 70000}, nil, "out of range"},
		{Config{Dir: "x", Host: "localhost"}, nil, `host "localhost": want an IP address`},
		{Config{Dir: "x", MinSessionTimeout: time.Minute, MaxSessionTimeout: time.Second}, nil, "MaxSessionTimeout"},
		{Config{Dir: t.TempDir(), Install: Install{Java: "java", Classpath: []string{"/no/such/zookeeper.jar"}}}, ErrNotInstalled, "install Debian package zookeeper"},
		{Config{Dir: t.TempDir(), Install: Install{Java: "/no/such/java"}}, ErrNotInstalled, "java"},
	} {
		_, err := New(tc.cfg)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("New(%+v) = %v, want %v containing %q", tc.cfg, err, tc.want, tc.text)
		}
	}
}
