package transport

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/node"
)

// A thousand bad connections of one kind log the first, then nothing until
// the interval has passed, then one line counting the ones suppressed; a
// count that no later warning reports is logged by the server's housekeeping.
func TestBadConnectionWarningsRateLimited(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		kind string
		opts brokerOpt
		bad  func(*testBroker, *testing.T)
	}{
		{"request size out of range", func(c *Config, _ *node.Config) { c.MaxRequestBytes = 1 << 20 },
			func(b *testBroker, t *testing.T) {
				rc := b.dial(t)
				rc.write(binary.BigEndian.AppendUint32(nil, 1<<20+1))
				rc.expectClosed()
				rc.c.Close()
			}},
		{"too many connections", func(c *Config, _ *node.Config) { c.MaxConnections = 1 },
			func(b *testBroker, t *testing.T) {
				rc := b.dial(t)
				rc.expectClosed()
				rc.c.Close()
			}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			clk := newFakeClock()
			tick := make(chan time.Time)
			b := startBroker(t, tc.opts, withSeams(&seams{now: clk.Now, tick: tick}))
			if tc.kind == "too many connections" {
				b.dial(t).do(apiVersionsReq(3)) // the one allowed, kept open
			}
			lines := func() []string { return b.logs.find(tc.kind) }
			waitLines := func(want int) []string {
				t.Helper()
				pollUntil(t, fmt.Sprintf("%d %q lines", want, tc.kind), func() bool { return len(lines()) >= want })
				return lines()
			}

			for range n {
				tc.bad(b, t)
			}
			if l := waitLines(1); len(l) != 1 || strings.Contains(l[0], "suppressed") {
				t.Fatalf("%d bad connections within the interval logged %d lines, want 1 (the first): %q", n, len(l), l[:min(len(l), 3)])
			}
			clk.Advance(time.Minute)
			tc.bad(b, t)
			l := waitLines(2)
			if len(l) != 2 || !strings.Contains(l[1], fmt.Sprintf("suppressed=%d", n-1)) || !strings.Contains(l[1], "remote=") {
				t.Fatalf("after the interval: %q, want a second line with its remote and suppressed=%d", l, n-1)
			}

			for range 5 {
				tc.bad(b, t)
			}
			clk.Advance(time.Minute)
			tick <- clk.Now()
			tick <- clk.Now() // received once the first round is done
			if l := lines(); len(l) != 3 || !strings.Contains(l[2], "suppressed=5") {
				t.Fatalf("after a quiet interval: %q, want a third line with suppressed=5", l)
			}
		})
	}
}

// The limiter's rules, with a fake clock: kinds are limited independently,
// an interval after the last line the next one is logged with the count, and
// flush reports counts an interval old (or all of them, when told).
func TestLimitedLog(t *testing.T) {
	rec := &logRecorder{}
	clk := newFakeClock()
	l := newLimitedLog(slog.New(rec), 10*time.Second, clk.Now)
	all := func() []string { return rec.find("") }

	l.warn("a", "remote", "r1")
	l.warn("a", "remote", "r2")
	l.info("b", "remote", "r3")
	l.warn("a", "remote", "r4")
	clk.Advance(10*time.Second - 1)
	l.warn("a", "remote", "r5")
	l.flush(false) // nothing is an interval old
	want := []string{"WARN a remote=r1", "INFO b remote=r3"}
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("within the interval: %q, want %q", got, want)
	}
	clk.Advance(1)
	l.warn("a", "remote", "r6")
	l.info("b", "remote", "r7") // nothing suppressed: no count
	want = append(want, "WARN a remote=r6 suppressed=3", "INFO b remote=r7")
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("after the interval: %q, want %q", got, want)
	}
	l.warn("a", "remote", "r8")
	l.warn("a", "remote", "r9")
	l.flush(false)
	clk.Advance(10 * time.Second)
	l.flush(false)
	l.flush(false) // reported once
	want = append(want, "WARN a suppressed=2")
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("flushed: %q, want %q", got, want)
	}
	l.warn("a", "remote", "r10") // within the interval of the flushed line
	l.flush(true)
	want = append(want, "WARN a suppressed=1")
	if got := all(); !slices.Equal(got, want) {
		t.Fatalf("flushed all: %q, want %q", got, want)
	}
}
