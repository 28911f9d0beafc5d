package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/cmd/internal/ratelimit"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicytest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func newPolicy(t *testing.T, hz string) flushpolicy.Policy {
	t.Helper()
	p, err := ratelimit.New(map[string]string{"hz": hz})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTimeline drives hz=10 (one fsync per 100 ms at most) like a log would.
func TestTimeline(t *testing.T) {
	p := newPolicy(t, "10")
	ctx := context.Background()
	type step struct {
		appendAt int // ms; -1: an fsync finishing at flushAt instead
		flushAt  int
		want     flushpolicy.Decision
	}
	steps := []step{
		{appendAt: 0, want: flushpolicy.Decision{Flush: true}}, // first append: fsync now
		{appendAt: -1, flushAt: 2},                             // that fsync runs 0-2 ms
		{appendAt: 30, want: flushpolicy.Decision{FlushBy: at(100)}},
		{appendAt: 60, want: flushpolicy.Decision{FlushBy: at(100)}}, // same slot
		{appendAt: -1, flushAt: 102},                                 // the log fsyncs at the deadline, 100-102 ms
		{appendAt: 250, want: flushpolicy.Decision{Flush: true}},     // quiet for a while: at once
		{appendAt: -1, flushAt: 252},
		{appendAt: 300, want: flushpolicy.Decision{FlushBy: at(350)}},
	}
	for i, s := range steps {
		if s.appendAt < 0 {
			if err := p.Flushed(ctx, flushpolicy.FlushInfo{Now: at(s.flushAt), Duration: 2 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := p.Appended(ctx, flushpolicy.AppendInfo{Messages: 1, UnflushedMessages: 1, Bytes: 10, UnflushedBytes: 10, OldestUnflushed: at(s.appendAt), Now: at(s.appendAt)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Flush != s.want.Flush || !got.FlushBy.Equal(s.want.FlushBy) {
			t.Errorf("step %d (append at %d ms): %+v, want %+v", i, s.appendAt, got, s.want)
		}
	}
}

// TestLossBound checks the documented bound over a random-ish workload:
// right after each append, nothing unflushed is older than 1/hz plus the
// time since the last fsync ended, and fsyncs never come closer than 1/hz.
func TestLossBound(t *testing.T) {
	const every = 20 * time.Millisecond
	p := newPolicy(t, "50")
	ctx := context.Background()
	now := t0
	var deadline, oldest, lastFsync time.Time
	var unflushed int64
	fsyncs := 0
	fsync := func(at time.Time) {
		if !lastFsync.IsZero() && at.Sub(lastFsync) < every {
			t.Fatalf("fsync at %v, only %v after the last", at.Sub(t0), at.Sub(lastFsync))
		}
		if err := p.Flushed(ctx, flushpolicy.FlushInfo{Messages: unflushed, Now: at}); err != nil {
			t.Fatal(err)
		}
		fsyncs++
		lastFsync, unflushed, deadline, oldest = at, 0, time.Time{}, time.Time{}
	}
	for i := range 2000 {
		now = now.Add(time.Duration(1+(i*7919)%13) * time.Millisecond)
		if !deadline.IsZero() && !deadline.After(now) {
			fsync(deadline)
		}
		if unflushed == 0 {
			oldest = now
		}
		unflushed++
		d, err := p.Appended(ctx, flushpolicy.AppendInfo{Messages: 1, UnflushedMessages: unflushed, OldestUnflushed: oldest, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Flush:
			fsync(now)
		case !d.FlushBy.IsZero():
			if !d.FlushBy.After(now) || d.FlushBy.Sub(oldest) > every {
				t.Fatalf("append %d at %v: FlushBy %v for data since %v", i, now.Sub(t0), d.FlushBy.Sub(t0), oldest.Sub(t0))
			}
			deadline = d.FlushBy
		default:
			t.Fatalf("append %d: no decision", i)
		}
	}
	if fsyncs < 100 {
		t.Errorf("%d fsyncs over %v at 50 Hz: too few", fsyncs, now.Sub(t0))
	}
}

func TestConformance(t *testing.T) {
	flushpolicytest.Run(t, func(t *testing.T) flushpolicy.Policy { return newPolicy(t, "100") })
}

func TestParams(t *testing.T) {
	for _, good := range []string{"1", "0.5", "1000", "1e6"} {
		newPolicy(t, good)
	}
	for _, bad := range []map[string]string{
		{}, {"hz": "0"}, {"hz": "-1"}, {"hz": "x"}, {"hz": "NaN"}, {"hz": "Inf"}, {"hz": "1e7"}, {"hz": "1", "n": "2"},
	} {
		if _, err := ratelimit.New(bad); err == nil {
			t.Errorf("New(%v) accepted it", bad)
		}
	}
}
