package brokerproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeBrokerEnv makes the test binary, started as a broker, listen on its
// --listen address until SIGTERM, then exit 0: a broker for tests of the
// process handling that need no weir build.
const fakeBrokerEnv = "BROKERPROC_FAKE_BROKER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeBrokerEnv) == "1" {
		fakeBroker()
		return
	}
	os.Exit(m.Run())
}

func fakeBroker() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for i, a := range os.Args {
		if a == "--listen" && i+1 < len(os.Args) {
			ln, err := net.Listen("tcp", os.Args[i+1])
			if err != nil {
				os.Exit(3)
			}
			defer ln.Close()
		}
	}
	<-term
}

// A broker's DeathSignal comes when the thread that forked it exits: the
// thread that called Start being retired later (Go retires a thread when a
// goroutine locked to it ends, as zkserver's does when ZooKeeper stops, and
// any thread may be locked after it ran a Start) must not take the broker
// with it.
func TestBrokerOutlivesTheStartingThread(t *testing.T) {
	t.Setenv(fakeBrokerEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type started struct {
		p   *Process
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go retires the thread when this ends
		p, err := Start(ctx, Options{Weir: os.Args[0], DataDir: t.TempDir(), DeathSignal: syscall.SIGKILL})
		ch <- started{p, err}
	}()
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	// Stop finds a killed broker (its exit is an error); a running one
	// exits cleanly on SIGTERM.
	if err := s.p.Stop(); err != nil {
		t.Fatalf("the broker did not outlive the thread that started it: %v", err)
	}
}

// OpenFilesLimit is the broker's own RLIMIT_NOFILE, soft and hard, from its
// first instruction (the shell that sets it execs the broker, so the
// process is the broker's); Env reaches its environment, Pprof its flags.
func TestLimitEnvAndPprof(t *testing.T) {
	t.Setenv(fakeBrokerEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Start(ctx, Options{Weir: os.Args[0], DataDir: t.TempDir(), OpenFilesLimit: 1234, Env: []string{"WEIR_TEST_MARK=scale"}, Pprof: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^Max open files\s+1234\s+1234\s+files`).Match(limits) {
		t.Errorf("limits of the broker:\n%s", limits)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(environ), "\x00"), "WEIR_TEST_MARK=scale") {
		t.Errorf("WEIR_TEST_MARK=scale not in the broker's environment")
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if p.PprofAddr == "" || !strings.Contains(string(cmdline), "--pprof-listen\x00"+p.PprofAddr+"\x00") {
		t.Errorf("pprof address %q not on the command line %q", p.PprofAddr, cmdline)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}
