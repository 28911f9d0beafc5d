package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-broker/weir/node"
)

// Tests of Config.WriteTimeout and Config.MaxIdle: a client that stops
// reading, or stops talking, is closed, and what it held is released.

// dialSmallWindow dials with a 4 KiB receive buffer set before connecting,
// so the kernel cannot buffer much of a response the client does not read.
func (b *testBroker) dialSmallWindow(t *testing.T) *rawConn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// openFilesUnder counts this process's open files under dir (Linux).
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			n++
		}
	}
	return n
}

// A consumer that sends a Fetch for a response larger than the socket
// buffers and never reads it pins the response, and the segment file it is
// sent from, even after its topic is deleted. WriteTimeout closes it and
// releases both; the close is logged once, with the client's address.
func TestWriteTimeoutClosesClientThatStopsReading(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []brokerOpt
	}{
		{"sendfile", nil},
		{"copy", []brokerOpt{withCopyPath}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			dir := t.TempDir()
			opts := append([]brokerOpt{func(c *Config, o *node.Config) {
				c.WriteTimeout = timeout
				o.DataDir = dir
			}}, tc.opts...)
			b := startBroker(t, opts...)
			b.createTopic(t, "t", 1, nil)
			for i := range 24 { // 12 MiB: more than both ends' socket buffers
				b.produce(t, "t", 0, batchOf(t, 16, 32<<10, int64(i)))
			}
			req := fetchReq(4, 0, 0, 64<<20, "t", map[int32]int64{0: 0})
			req.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 20

			rc := b.dialSmallWindow(t)
			start := time.Now()
			rc.write(frame(req, 1, nil))
			st := pollStats(t, b.s, "the response to be written", func(st []ConnStats) bool {
				cs, ok := statsOf(st, rc.c)
				return ok && cs.WritingBytes > 8<<20
			})
			cs, _ := statsOf(st, rc.c)
			// Deleting the topic unlinks the segment; the response keeps it open.
			if _, err := b.node.DeleteTopic(context.Background(), "t"); err != nil {
				t.Fatal(err)
			}
			if n := openFilesUnder(t, filepath.Join(dir, "t-0")); n == 0 {
				t.Fatal("the response being written holds no file of the deleted topic")
			}

			pollStats(t, b.s, "the stalled connection to be closed", func(st []ConnStats) bool {
				_, ok := statsOf(st, rc.c)
				return !ok
			})
			if waited := time.Since(start); waited < timeout {
				t.Errorf("closed %v after the request was sent, before the %v write timeout", waited, timeout)
			}
			pollUntil(t, "the deleted topic's files to be closed after the connection closed", func() bool {
				return openFilesUnder(t, filepath.Join(dir, "t-0")) == 0
			})
			// The client reads what was buffered, then finds the connection cut.
			rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
			got, err := io.Copy(io.Discard, rc.c)
			if errors.Is(err, os.ErrDeadlineExceeded) || got >= cs.WritingBytes {
				t.Errorf("client read %d of %d bytes, then %v; want the response cut", got, cs.WritingBytes, err)
			}
			lines := b.logs.find("not reading")
			if len(lines) != 1 || !strings.Contains(lines[0], rc.c.LocalAddr().String()) {
				t.Errorf("want one line naming %s, logged %q", rc.c.LocalAddr(), lines)
			}
			b.checkAlive(t)
		})
	}
}

// The write timeout starts when writing does: a long poll that waits longer
// than it is answered.
func TestWriteTimeoutSparesLongPoll(t *testing.T) {
	const timeout = 100 * time.Millisecond
	b := startBroker(t, func(c *Config, _ *node.Config) { c.WriteTimeout = timeout })
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	start := time.Now()
	resp := rc.do(fetchReq(4, 5*timeout, 1, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 5*timeout || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("long poll answered after %v with error %d, want after its MaxWait (%v)", waited,
			resp.Topics[0].Partitions[0].ErrorCode, 5*timeout)
	}
	rc.do(apiVersionsReq(3)) // the connection is still served
}

// A connection idle for MaxIdle (nothing in flight, nothing received) is
// closed; one with a request in flight, or one that spoke more recently, is
// not. Time and the idle checks are driven by the test.
func TestMaxIdle(t *testing.T) {
	const idle = time.Minute
	clk := newFakeClock()
	tick := make(chan time.Time)
	waiting := setFetchHook(t)
	b := startBroker(t, withSeams(&seams{now: clk.Now, tick: tick}), func(c *Config, _ *node.Config) { c.MaxIdle = idle })
	b.createTopic(t, "t", 1, nil)
	// sweep runs one round of the idle check and returns once it is done
	// (the second tick is received only after the first round).
	sweep := func() {
		t.Helper()
		for range 2 {
			select {
			case tick <- clk.Now():
			case <-time.After(20 * time.Second):
				t.Fatal("the server does not check for idle connections")
			}
		}
	}
	// settled waits until the server is done answering rc (the client may
	// read an answer before the server notes it sent it): then only the
	// reader's slot, for the next request, is taken.
	settled := func(rc *rawConn) {
		t.Helper()
		pollStats(t, b.s, "the answer to be done", func(st []ConnStats) bool {
			cs, ok := statsOf(st, rc.c)
			return ok && cs.InFlight == 1
		})
	}
	// closedIdle: the server closed rc (it is gone, or marked closing, which
	// an idle check does before it returns).
	closedIdle := func(rc *rawConn) bool {
		b.s.mu.Lock()
		defer b.s.mu.Unlock()
		for c := range b.s.conns {
			if c.nc.RemoteAddr().String() == rc.c.LocalAddr().String() {
				return c.closing.Load()
			}
		}
		return true
	}

	quiet := b.dial(t)
	quiet.do(apiVersionsReq(3))
	settled(quiet)
	polling := b.dial(t)
	polling.send(fetchReq(4, time.Minute, 1, 1<<20, "t", map[int32]int64{0: 0}))
	<-waiting
	talker := b.dial(t)
	talker.do(apiVersionsReq(3))
	settled(talker)
	never := b.dial(t) // connects, never sends
	pollStats(t, b.s, "four connections", func(st []ConnStats) bool { return len(st) == 4 })

	clk.Advance(idle / 2)
	talker.do(apiVersionsReq(3))
	settled(talker)
	clk.Advance(idle/2 - time.Second)
	sweep()
	for _, rc := range []*rawConn{quiet, polling, talker, never} {
		if closedIdle(rc) {
			t.Fatalf("%s closed before it was idle for %v", rc.c.LocalAddr(), idle)
		}
	}
	clk.Advance(time.Second)
	sweep()
	quiet.expectClosed()
	never.expectClosed()
	// Logged with the address (one of the two: the log is rate-limited).
	if l := b.logs.find("closing idle connection"); len(l) != 1 || !strings.Contains(l[0], quiet.c.LocalAddr().String()) &&
		!strings.Contains(l[0], never.c.LocalAddr().String()) {
		t.Errorf("idle closes logged %q, want one line naming %s or %s", l, quiet.c.LocalAddr(), never.c.LocalAddr())
	}
	if closedIdle(polling) || closedIdle(talker) {
		t.Fatalf("closed a connection in a long poll or one that spoke %v ago", idle/2)
	}

	clk.Advance(idle / 2)
	sweep()
	talker.expectClosed()
	if closedIdle(polling) {
		t.Fatal("closed a connection whose long poll is in flight")
	}
	// The long poll ends; its connection is idle from then on.
	other := b.dial(t)
	if r := other.do(produceReq(7, 1, "t", 0, batch(t, "wake", 1))).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	polling.recv(fetchReq(4, time.Minute, 1, 1<<20, "t", map[int32]int64{0: 0}), 1)
	settled(polling)
	clk.Advance(idle)
	sweep()
	polling.expectClosed()
}

// With the system clock: a client that connects and says nothing is closed
// after MaxIdle.
func TestMaxIdleSystemClock(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxIdle = 100 * time.Millisecond })
	rc := b.dial(t)
	rc.expectClosed()
	if l := b.logs.find("idle"); len(l) != 1 || !strings.Contains(l[0], rc.c.LocalAddr().String()) {
		t.Errorf("want one idle close naming %s, logged %q", rc.c.LocalAddr(), l)
	}
}
