package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// cliWait bounds every CLI run and every wait for a client in these tests:
// generous for a shared 2-core machine, far below go test's -timeout.
const cliWait = 30 * time.Second

// startTestBroker starts a broker for the test (package brokertest) and
// returns its address. mods adjust the config.
func startTestBroker(t testing.TB, mods ...func(*broker.Config)) string {
	t.Helper()
	return brokertest.Start(t, "", mods...).Addr()
}

// cli runs the weir command line in-process with stdin, like main would,
// bounded by cliWait.
func cli(t testing.TB, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliWait)
	defer cancel()
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	err = root.ExecuteContext(ctx)
	if ctx.Err() != nil {
		t.Fatalf("weir %s: still running after %v", strings.Join(args, " "), cliWait)
	}
	return o.String(), e.String(), err
}

// mustCLI is cli that fails the test on an error.
func mustCLI(t testing.TB, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := cli(t, stdin, args...)
	if err != nil {
		t.Fatalf("weir %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout, stderr
}

// newTestClient and waitContext come from package brokertest.
var (
	newTestClient = brokertest.Client
	waitContext   = brokertest.Context
)

// createTestTopic creates a topic with configs through CreateTopics.
var createTestTopic = brokertest.CreateTopic

// readAll reads n records from the start of every partition of topic with
// a franz-go consumer (an oracle independent of weir consume), failing if
// more arrive in the same fetches.
func readAll(t testing.TB, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newTestClient(t, addr, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	ctx := waitContext(t)
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go: %d of %d records of %s before the deadline", len(recs), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("franz-go: fetch %s/%d: %v", topic, p, err)
		})
		recs = append(recs, fs.Records()...)
	}
	if len(recs) != n {
		t.Fatalf("franz-go: %d records in %s, want %d", len(recs), topic, n)
	}
	return recs
}

// closedAddr returns an address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestClientGoldenHelp(t *testing.T) {
	for _, name := range []string{"produce", "consume"} {
		t.Run(name, func(t *testing.T) { checkGolden(t, name+"-help", []string{name, "--help"}) })
	}
}

// TestClientBadFlags checks that every bad flag is refused with a clear
// error before anything connects: the broker address is closed, so an
// attempt to connect would fail differently (errUnreachable).
func TestClientBadFlags(t *testing.T) {
	addr := closedAddr(t)
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
		is   error // besides errBadFlag
	}{
		{[]string{"produce", "-b", addr}, "-t: a topic is required", nil},
		{[]string{"produce", "-b", addr, "-t", "a/b"}, `-t "a/b": topic names hold only`, nil},
		{[]string{"produce", "-b", "nohost", "-t", "x"}, `-b "nohost": want host:port`, nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--timeout", "0s"}, "--timeout 0s", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--codec", "nosuch"}, `--codec "nosuch"`, codec.ErrUnknownCodec},
		{[]string{"produce", "-b", addr, "-t", "x", "--codec", "gzip:level=99"}, `--codec "gzip:level=99"`, codec.ErrInvalidSpec},
		{[]string{"produce", "-b", addr, "-t", "x", "--partitioner", "nosuch"}, `--partitioner "nosuch"`, partitioner.ErrUnknownPartitioner},
		{[]string{"produce", "-b", addr, "-t", "x", "--acks", "2"}, `--acks "2": want 0, 1 or all`, nil},
		{[]string{"produce", "-b", addr, "-t", "x", "-H", "novalue"}, `-H "novalue": want key=value`, nil},
		{[]string{"produce", "-b", addr, "-t", "x", "-H", "=v"}, `-H "=v": want key=value`, nil},
		{[]string{"produce", "-b", addr, "-t", "x", "-D", ""}, "-D: the delimiter cannot be empty", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "-K", `\q`}, `unknown escape \q`, nil},
		{[]string{"produce", "-b", addr, "-t", "x", "-p", "-2"}, "-p -2", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--linger", "-1s"}, "--linger -1s", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--batch-max-bytes", "511"}, "--batch-max-bytes 511: want at least 512", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--create-topic", "-1"}, "--create-topic -1", nil},
		{[]string{"produce", "-b", addr, "-t", "x", "--file-per-record", "-K", ":"}, "--file-per-record: -D and -K", nil},
		{[]string{"produce", "-b", addr, "-t", "x", filepath.Join(dir, "missing.txt")}, "missing.txt: no such file", os.ErrNotExist},
		{[]string{"produce", "-b", addr, "-t", "x", dir}, "is a directory", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-o", "middle"}, `-o "middle": want beginning, end, an offset, or -N`, nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-o", "1.5"}, `-o "1.5"`, nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-f", "%z"}, "unknown directive %z", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-f", "%s%"}, "a lone % at the end", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-f", `\x4`}, `\x needs two hex digits`, nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-c", "-1"}, "-c -1", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-p", "-3"}, "-p -3", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "-G", "g", "-p", "0"}, "-p with -G", nil},
		{[]string{"consume", "-b", addr, "-t", "x", "--codec", "nosuch"}, `--codec "nosuch"`, codec.ErrUnknownCodec},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, err := cli(t, "", tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, errBadFlag) {
				t.Errorf("err = %v, want errBadFlag (refused before connecting)", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.is)
			}
			if stdout != "" || stderr != "" {
				t.Errorf("printed stdout %q, stderr %q; want nothing", stdout, stderr)
			}
		})
	}
}

// TestClientUnreachableBroker: nothing listens at -b, so both commands fail
// with errUnreachable, naming the dial error, after --timeout rather than
// hanging (cli fails the test if a run outlives cliWait).
func TestClientUnreachableBroker(t *testing.T) {
	addr := closedAddr(t)
	for _, args := range [][]string{
		{"produce", "-b", addr, "-t", "x", "--timeout", "1s", "-q"},
		{"consume", "-b", addr, "-t", "x", "--timeout", "1s", "-e"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, _, err := cli(t, "a line\n", args...)
			if !errors.Is(err, errUnreachable) {
				t.Fatalf("err = %v, want errUnreachable", err)
			}
			for _, want := range []string{addr, "waited up to 1s", "connection refused"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to mention %q", err, want)
				}
			}
		})
	}
}

// TestClientSilentBroker: a broker that accepts connections but never
// answers makes both commands give up after --timeout with errUnreachable.
func TestClientSilentBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan []net.Conn, 1)
	go func() {
		var conns []net.Conn // held open, unanswered
		for {
			c, err := ln.Accept()
			if err != nil {
				accepted <- conns
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for _, c := range <-accepted {
			c.Close()
		}
	})
	for _, args := range [][]string{
		{"produce", "-b", ln.Addr().String(), "-t", "x", "--timeout", "1s", "-q"},
		{"consume", "-b", ln.Addr().String(), "-t", "x", "--timeout", "1s", "-e"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, _, err := cli(t, "a line\n", args...)
			if !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "waited up to 1s") {
				t.Fatalf("err = %v, want errUnreachable after 1s", err)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  string
	}{
		{`plain`, "plain", ""},
		{`\n`, "\n", ""},
		{`a\tb\r\n`, "a\tb\r\n", ""},
		{`\0\\\x41\x7e`, "\x00\\A~", ""},
		{`\xff`, "\xff", ""},
		{`|\x00|`, "|\x00|", ""},
		{`\`, "", "trailing backslash"},
		{`\q`, "", `unknown escape \q`},
		{`\x`, "", `\x needs two hex digits`},
		{`\xg1`, "", `\x needs two hex digits`},
		{`\x1`, "", `\x needs two hex digits`},
	}
	for _, tc := range tests {
		got, err := unescape("-D", tc.in)
		if tc.err != "" {
			if !errors.Is(err, errBadFlag) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("unescape(%q) error = %v, want errBadFlag containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("unescape(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckTopicName(t *testing.T) {
	for _, ok := range []string{"a", "events.v1", "A_b-C", strings.Repeat("x", 249)} {
		if err := checkTopicName(ok); err != nil {
			t.Errorf("checkTopicName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{".", "..", "a b", "a/b", "é", strings.Repeat("x", 250)} {
		if err := checkTopicName(bad); !errors.Is(err, errBadFlag) {
			t.Errorf("checkTopicName(%q) = %v, want errBadFlag", bad, err)
		}
	}
}

// lines splits s into its lines, without the newlines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
