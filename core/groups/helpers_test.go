package groups

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// fakeClock is a manual Clock: time moves only on Advance, which runs due
// timers in the caller's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	clock   *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) partlog.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the time on by d and runs the timers due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			kept = append(kept, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// counterIDs returns a newMemberID that numbers ids: "<prefix>-1", ...
func counterIDs() func(string) string {
	var mu sync.Mutex
	n := 0
	return func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testOptions are valid Options for the state machine: sessions 6s..30m,
// no initial delay, numbered member ids.
func testOptions() *Options {
	o, err := Options{Dir: "/unused", Logger: quietLogger(), newMemberID: counterIDs()}.validate()
	if err != nil {
		panic(err)
	}
	return &o
}

func str(s string) *string { return &s }

func protos(names ...string) []Protocol {
	ps := make([]Protocol, len(names))
	for i, n := range names {
		ps[i] = Protocol{Name: n, Metadata: []byte("meta-" + n)}
	}
	return ps
}

// wantErr fails unless errors.Is(err, want) (want nil: err nil).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}
