package bench_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/weir-broker/weir/transport/broker"
)

// The broker process: this test binary started again with childDirEnv set
// runs a broker instead of the tests (see TestMain), so that its CPU time can
// be read apart from the client's. For weir, `weir broker` would do, but it
// has no flag for broker.Config.DisableSendfile; kfake has no binary.
const (
	childDirEnv      = "WEIR_BENCH_BROKER_DIR"      // the data directory
	childImplEnv     = "WEIR_BENCH_BROKER_IMPL"     // weir or kfake
	childSendfileEnv = "WEIR_BENCH_BROKER_SENDFILE" // "off": DisableSendfile
	// BrokerProfileEnv, set when running the benchmarks, makes every
	// broker process write a CPU profile to $WEIR_BENCH_BROKER_CPUPROFILE.<pid>.
	brokerProfileEnv = "WEIR_BENCH_BROKER_CPUPROFILE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		err := runChild(dir, os.Getenv(childImplEnv), os.Getenv(childSendfileEnv) == "off", os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench broker: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	removeWeirBinary()
	os.Exit(code)
}

// runChild serves a broker (weir, or a one-broker kfake cluster) until stdin
// ends, logging like `weir broker` (text, info, "listen=" in the start line)
// to stderr. For each line "stats" on stdin it writes "cpu=NS mallocs=N"
// to stdout: its user+system CPU time, all threads, in nanoseconds
// (getrusage, microsecond resolution) and runtime.MemStats.Mallocs.
func runChild(dir, impl string, disableSendfile bool, stdin io.Reader, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if prefix := os.Getenv(brokerProfileEnv); prefix != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", prefix, os.Getpid()))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var stop func() error
	switch impl {
	case "weir":
		b, err := broker.Start(broker.Config{
			DataDir:         dir,
			Listen:          "127.0.0.1:0",
			DisableSendfile: disableSendfile,
			Logger:          logger,
		})
		if err != nil {
			return err
		}
		stop = b.Close
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir))
		if err != nil {
			return err
		}
		logger.Info("kfake started", "listen", c.ListenAddrs()[0])
		stop = func() error { c.Close(); return nil }
	default:
		return fmt.Errorf("%s=%q: want weir or kfake", childImplEnv, impl)
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if sc.Text() == "stats" {
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				return err
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(stdout, "cpu=%d mallocs=%d\n", ru.Utime.Nano()+ru.Stime.Nano(), ms.Mallocs)
		}
	}
	return stop()
}

// brokerProcess is a broker running in a child process.
type brokerProcess struct {
	addr   string
	pid    int
	stdin  io.Writer
	stdout *bufio.Reader
}

// startBrokerProcess starts a broker process of impl (weir or kfake) on a
// fresh data directory and waits for its address. When tb ends the process
// is stopped (its stdin closed), and killed if it has not exited within 30 s.
// disableSendfile applies to weir.
func startBrokerProcess(tb testing.TB, impl string, disableSendfile bool) *brokerProcess {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	sendfile := "on"
	if disableSendfile {
		sendfile = "off"
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childDirEnv+"="+filepath.Join(tb.TempDir(), "data"), childImplEnv+"="+impl, childSendfileEnv+"="+sendfile)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// Ending stdin stops the broker gracefully (and ends a CPU
		// profile); kill it if that takes too long.
		stdin.Close()
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	addr := make(chan string, 1)
	go func() {
		// Find the start line, then keep draining so the broker never
		// blocks on a full pipe.
		sc := bufio.NewScanner(stderr)
		sent := false
		var lines []string
		for sc.Scan() {
			line := sc.Text()
			if !sent {
				if a, ok := logValue(line, "listen"); ok {
					addr <- a
					sent = true
					continue
				}
				lines = append(lines, line)
			}
		}
		if !sent {
			addr <- "error: " + strings.Join(lines, "\n")
		}
	}()
	select {
	case a := <-addr:
		if strings.HasPrefix(a, "error: ") {
			tb.Fatalf("broker process exited before listening:\n%s", a)
		}
		return &brokerProcess{addr: a, pid: cmd.Process.Pid, stdin: stdin, stdout: bufio.NewReader(stdout)}
	case <-time.After(setupTimeout):
		tb.Fatal("broker process did not log its listen address")
		return nil
	}
}

// logValue returns the value of key in a slog text line.
func logValue(line, key string) (string, bool) {
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// statCPU returns the process's user+system CPU time so far, all threads,
// from /proc/<pid>/stat (10 ms resolution): the figure ps and top show, to
// check stats against.
func (p *brokerProcess) statCPU(tb testing.TB) time.Duration {
	tb.Helper()
	return procStatCPU(tb, p.pid)
}

// procStatCPU is process pid's user+system CPU time so far, all threads,
// from /proc/<pid>/stat (10 ms resolution).
func procStatCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		tb.Fatalf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// processStats is what the broker process reports about itself.
type processStats struct {
	cpu     time.Duration // user+system, all threads, from getrusage
	mallocs uint64        // heap allocations, runtime.MemStats.Mallocs
}

// stats asks the broker process for its CPU time and allocations so far.
func (p *brokerProcess) stats(tb testing.TB) processStats {
	tb.Helper()
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil {
		tb.Fatal(err)
	}
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		tb.Fatal(err)
	}
	num := func(key string) uint64 {
		v, ok := logValue(line, key)
		if !ok {
			tb.Fatalf("broker process stats: no %s in %q", key, line)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("broker process stats: %v", err)
		}
		return n
	}
	return processStats{cpu: time.Duration(num("cpu")), mallocs: num("mallocs")}
}
