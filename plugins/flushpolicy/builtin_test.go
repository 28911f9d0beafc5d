package flushpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus ms milliseconds.
func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// app builds an AppendInfo: this append's messages and bytes, the unflushed
// totals including it, the oldest unflushed append's time and now, in ms.
func app(msgs, bytes, unMsgs, unBytes, oldestMS, nowMS int64) AppendInfo {
	return AppendInfo{
		Messages: msgs, Bytes: bytes,
		UnflushedMessages: unMsgs, UnflushedBytes: unBytes,
		OldestUnflushed: at(oldestMS), Now: at(nowMS),
	}
}

var (
	flush   = Decision{Flush: true}
	nothing = Decision{}
)

func by(ms int64) Decision { return Decision{FlushBy: at(ms)} }

type step struct {
	a    AppendInfo
	want Decision
}

func TestBuiltinDecisions(t *testing.T) {
	tests := []struct {
		name  string
		p     Policy
		steps []step
	}{
		{"every-batch/always", EveryBatch(), []step{
			{app(1, 100, 1, 100, 0, 0), flush},
			{app(500, 50000, 500, 50000, 10, 10), flush},
			{app(0, 0, 0, 0, 20, 20), flush}, // even an empty append
		}},
		{"messages/below-at-above", EveryMessages(10), []step{
			{app(4, 400, 4, 400, 0, 0), nothing},
			{app(5, 500, 9, 900, 0, 1), nothing}, // one short
			{app(1, 100, 10, 1000, 0, 2), flush}, // exactly n
			{app(3, 300, 3, 300, 3, 3), nothing}, // counters reset by the log
			{app(50, 5000, 53, 5300, 3, 4), flush},
		}},
		{"messages/one", EveryMessages(1), []step{
			{app(1, 10, 1, 10, 0, 0), flush},
			{app(0, 0, 0, 0, 1, 1), nothing}, // nothing unflushed
		}},
		{"messages/big-single-append", EveryMessages(1000), []step{
			{app(5000, 1, 5000, 1, 0, 0), flush},
		}},
		{"messages/ignores-bytes-and-time", EveryMessages(100), []step{
			{app(1, 1<<40, 1, 1<<40, 0, 0), nothing},
			{app(1, 1, 2, 1<<40+1, 0, 3_600_000), nothing},
		}},
		{"bytes/below-at-above", EveryBytes(1 << 20), []step{
			{app(1, 1<<19, 1, 1<<19, 0, 0), nothing},
			{app(1, 1<<19-1, 2, 1<<20-1, 0, 1), nothing}, // one byte short
			{app(1, 1, 3, 1<<20, 0, 2), flush},           // exactly n
			{app(1, 10, 1, 10, 3, 3), nothing},
			{app(1, 4<<20, 2, 4<<20+10, 3, 4), flush},
		}},
		{"bytes/ignores-messages-and-time", EveryBytes(1000), []step{
			{app(1_000_000, 999, 1_000_000, 999, 0, 3_600_000), nothing},
		}},
		{"interval/deadline-then-flush", EveryInterval(50 * time.Millisecond), []step{
			{app(1, 10, 1, 10, 0, 0), by(50)},    // first append starts the clock
			{app(1, 10, 2, 20, 0, 20), by(50)},   // same deadline
			{app(1, 10, 3, 30, 0, 49), by(50)},   // 1ms before
			{app(1, 10, 4, 40, 0, 50), flush},    // exactly d old
			{app(1, 10, 1, 10, 70, 70), by(120)}, // clock restarts after the fsync
			{app(1, 10, 2, 20, 70, 500), flush},  // deadline missed: flush now
		}},
		{"interval/the-doc-timeline", EveryInterval(50 * time.Millisecond), []step{
			{app(1, 1, 1, 1, 0, 0), by(50)},
			{app(1, 1, 2, 2, 0, 20), by(50)},
			{app(1, 1, 3, 3, 0, 45), by(50)},
			{app(1, 1, 1, 1, 70, 70), by(120)},
			{app(1, 1, 2, 2, 70, 120), flush},
		}},
		{"interval/sub-millisecond", EveryInterval(1500 * time.Microsecond), []step{
			{AppendInfo{Messages: 1, UnflushedMessages: 1, OldestUnflushed: t0, Now: t0}, Decision{FlushBy: t0.Add(1500 * time.Microsecond)}},
			{AppendInfo{Messages: 1, UnflushedMessages: 2, OldestUnflushed: t0, Now: t0.Add(1499 * time.Microsecond)}, Decision{FlushBy: t0.Add(1500 * time.Microsecond)}},
			{AppendInfo{Messages: 1, UnflushedMessages: 3, OldestUnflushed: t0, Now: t0.Add(1500 * time.Microsecond)}, flush},
		}},
		{"interval/zero-oldest-flushes", EveryInterval(time.Hour), []step{
			{AppendInfo{Messages: 1, UnflushedMessages: 1, Now: t0}, flush},
		}},
		{"interval/oldest-after-now-is-capped", EveryInterval(50 * time.Millisecond), []step{
			{app(1, 1, 1, 1, 1000, 0), by(50)}, // not by(1050)
		}},
		{"never/never", Never(), []step{
			{app(1, 1, 1, 1, 0, 0), nothing},
			{app(1<<30, 1<<40, 1<<40, 1<<50, 0, 86_400_000), nothing},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			for i, s := range tc.steps {
				got, err := tc.p.Appended(ctx, s.a)
				if err != nil {
					t.Fatalf("step %d: Appended: %v", i, err)
				}
				if got.Flush != s.want.Flush || !got.FlushBy.Equal(s.want.FlushBy) {
					t.Errorf("step %d: Appended(%+v) = %s, want %s", i, s.a, fmtDecision(got), fmtDecision(s.want))
				}
			}
		})
	}
}

func fmtDecision(d Decision) string {
	if d.Flush {
		return fmt.Sprintf("{Flush, FlushBy: %v}", d.FlushBy)
	}
	if d.FlushBy.IsZero() {
		return "{}"
	}
	return fmt.Sprintf("{FlushBy: t0+%v}", d.FlushBy.Sub(t0))
}

func TestConstructorsPanicOnNonPositive(t *testing.T) {
	tests := []struct {
		name string
		make func() Policy
	}{
		{"EveryMessages(0)", func() Policy { return EveryMessages(0) }},
		{"EveryMessages(-1)", func() Policy { return EveryMessages(-1) }},
		{"EveryBytes(0)", func() Policy { return EveryBytes(0) }},
		{"EveryBytes(-5)", func() Policy { return EveryBytes(-5) }},
		{"EveryInterval(0)", func() Policy { return EveryInterval(0) }},
		{"EveryInterval(-1ms)", func() Policy { return EveryInterval(-time.Millisecond) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tc.name)
				}
			}()
			tc.make()
		})
	}
}

// fakeLog drives a Policy the way a partition log does, over explicit times,
// so tests can check each built-in's documented loss bound: the unflushed
// state right after an append returns is what a power cut would lose.
type fakeLog struct {
	p                         Policy
	unMsgs, unBytes           int64
	oldest                    time.Time
	deadline                  time.Time // zero: none
	fsyncs                    int
	fsyncDur                  time.Duration
	lastFlushMsgs, lastFlushB int64
}

func (l *fakeLog) fsync(t *testing.T, now time.Time) {
	t.Helper()
	if err := l.p.Flushed(context.Background(), FlushInfo{Messages: l.unMsgs, Bytes: l.unBytes, Duration: l.fsyncDur, Now: now}); err != nil {
		t.Fatalf("Flushed: %v", err)
	}
	l.fsyncs++
	l.lastFlushMsgs, l.lastFlushB = l.unMsgs, l.unBytes
	l.unMsgs, l.unBytes, l.oldest, l.deadline = 0, 0, time.Time{}, time.Time{}
}

// advance fires a pending deadline that falls at or before now.
func (l *fakeLog) advance(t *testing.T, now time.Time) {
	t.Helper()
	if !l.deadline.IsZero() && !l.deadline.After(now) {
		l.fsync(t, l.deadline)
	}
}

func (l *fakeLog) append(t *testing.T, now time.Time, msgs, bytes int64) Decision {
	t.Helper()
	l.advance(t, now)
	if l.unMsgs == 0 && l.unBytes == 0 {
		l.oldest = now
	}
	l.unMsgs += msgs
	l.unBytes += bytes
	d, err := l.p.Appended(context.Background(), AppendInfo{
		Messages: msgs, Bytes: bytes,
		UnflushedMessages: l.unMsgs, UnflushedBytes: l.unBytes,
		OldestUnflushed: l.oldest, Now: now,
	})
	if err != nil {
		t.Fatalf("Appended: %v", err)
	}
	switch {
	case d.Flush:
		l.fsync(t, now)
	case !d.FlushBy.IsZero():
		if !d.FlushBy.After(now) {
			t.Fatalf("FlushBy %v is not after Now %v without Flush", d.FlushBy, now)
		}
		l.deadline = d.FlushBy
	default:
		l.deadline = time.Time{}
	}
	return d
}

func TestLossBounds(t *testing.T) {
	const n = 1000
	const d = 50 * time.Millisecond
	tests := []struct {
		name string
		p    Policy
		// check is called right after each append returns.
		check func(t *testing.T, l *fakeLog, now time.Time)
		// minFsyncs and maxFsyncs bound the fsyncs over the whole run.
		minFsyncs, maxFsyncs int
	}{
		{"every-batch", EveryBatch(), func(t *testing.T, l *fakeLog, _ time.Time) {
			if l.unMsgs != 0 || l.unBytes != 0 {
				t.Fatalf("after append: %d records / %d bytes unflushed, want 0", l.unMsgs, l.unBytes)
			}
		}, 2000, 2000},
		{"messages", EveryMessages(n), func(t *testing.T, l *fakeLog, _ time.Time) {
			if l.unMsgs >= n {
				t.Fatalf("after append: %d records unflushed, want < %d", l.unMsgs, n)
			}
		}, 1, 1999},
		{"bytes", EveryBytes(n * 100), func(t *testing.T, l *fakeLog, _ time.Time) {
			if l.unBytes >= n*100 {
				t.Fatalf("after append: %d bytes unflushed, want < %d", l.unBytes, n*100)
			}
		}, 1, 1999},
		{"interval", EveryInterval(d), func(t *testing.T, l *fakeLog, now time.Time) {
			if l.unMsgs == 0 {
				return
			}
			if age := now.Sub(l.oldest); age >= d {
				t.Fatalf("after append: oldest unflushed is %v old, want < %v", age, d)
			}
			if l.deadline.IsZero() || l.deadline.Sub(l.oldest) > d {
				t.Fatalf("deadline %v for data since %v, want within %v", l.deadline, l.oldest, d)
			}
		}, 1, 1999},
		{"never", Never(), func(t *testing.T, l *fakeLog, _ time.Time) {
			if l.fsyncs != 0 || !l.deadline.IsZero() {
				t.Fatalf("never: %d fsyncs, deadline %v; want none", l.fsyncs, l.deadline)
			}
		}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			l := &fakeLog{p: tc.p, fsyncDur: time.Millisecond}
			now := t0
			for range 2000 {
				now = now.Add(time.Duration(rng.IntN(20_000)) * time.Microsecond)
				msgs := 1 + rng.Int64N(100)
				l.append(t, now, msgs, msgs*(50+rng.Int64N(150)))
				tc.check(t, l, now)
			}
			if l.fsyncs < tc.minFsyncs || l.fsyncs > tc.maxFsyncs {
				t.Errorf("%d fsyncs over 2000 appends, want %d..%d", l.fsyncs, tc.minFsyncs, tc.maxFsyncs)
			}
		})
	}
}

func TestBuiltinsFlushedReturnsNil(t *testing.T) {
	for _, p := range []Policy{EveryBatch(), EveryMessages(3), EveryBytes(3), EveryInterval(time.Second), Never()} {
		for _, f := range []FlushInfo{{}, {Messages: 3, Bytes: 9, Duration: time.Millisecond, Now: t0}, {Failed: true, Now: t0}} {
			if err := p.Flushed(context.Background(), f); err != nil {
				t.Errorf("%v.Flushed(%+v) = %v, want nil", p, f, err)
			}
		}
	}
}

func BenchmarkAppended(b *testing.B) {
	policies := []Policy{EveryBatch(), EveryMessages(1000), EveryBytes(1 << 20), EveryInterval(50 * time.Millisecond), Never()}
	for _, p := range policies {
		b.Run("policy="+fmt.Sprint(p), func(b *testing.B) {
			ctx := context.Background()
			a := AppendInfo{Messages: 10, Bytes: 1000, UnflushedMessages: 500, UnflushedBytes: 50000, OldestUnflushed: t0, Now: t0.Add(10 * time.Millisecond)}
			b.ReportAllocs()
			var flushes int
			for b.Loop() {
				d, err := p.Appended(ctx, a)
				if err != nil {
					b.Fatal(err)
				}
				if d.Flush {
					flushes++
				}
			}
			_ = flushes
		})
	}
}
