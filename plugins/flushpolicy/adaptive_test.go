package flushpolicy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// flushed tells p that an fsync of d finished at nowMS.
func flushed(t *testing.T, p Policy, d time.Duration, nowMS int64) {
	t.Helper()
	if err := p.Flushed(context.Background(), FlushInfo{Messages: 1, Bytes: 100, Duration: d, Now: at(nowMS)}); err != nil {
		t.Fatalf("Flushed: %v", err)
	}
}

func TestAdaptiveDecisions(t *testing.T) {
	type flushStep struct {
		d      time.Duration
		failed bool
	}
	tests := []struct {
		name    string
		p       Policy
		flushes []flushStep // fed to Flushed first
		steps   []step
	}{
		{"unmeasured-flushes-every-append", Adaptive(2*time.Millisecond, 50*time.Millisecond), nil, []step{
			{app(1, 100, 1, 100, 0, 0), flush},
			{app(1, 100, 1, 100, 5, 5), flush},
		}},
		{"within-budget-flushes", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{500 * time.Microsecond, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), flush},
			{app(1000, 1<<20, 1000, 1<<20, 1, 1), flush},
		}},
		{"exactly-budget-flushes", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{2 * time.Millisecond, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), flush},
		}},
		{"over-budget-defers-4x-cost", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{10 * time.Millisecond, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), by(40)},   // window 4 x 10ms
			{app(1, 100, 2, 200, 0, 39), by(40)},  // same deadline
			{app(1, 100, 3, 300, 0, 40), flush},   // 40ms old: flush now
			{app(1, 100, 1, 100, 45, 45), by(85)}, // a new window
		}},
		{"window-capped-at-max", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{30 * time.Millisecond, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), by(50)},
			{app(1, 100, 2, 200, 0, 49), by(50)},
			{app(1, 100, 3, 300, 0, 50), flush},
		}},
		{"fsync-slower-than-max", Adaptive(time.Millisecond, 5*time.Millisecond), []flushStep{{time.Second, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), by(5)},
		}},
		{"failed-fsyncs-ignored", Adaptive(2*time.Millisecond, 50*time.Millisecond),
			[]flushStep{{500 * time.Microsecond, false}, {time.Second, true}, {time.Second, true}}, []step{
				{app(1, 100, 1, 100, 0, 0), flush},
			}},
		{"first-measure-failed-still-unmeasured", Adaptive(2*time.Millisecond, 50*time.Millisecond),
			[]flushStep{{time.Second, true}}, []step{
				{app(1, 100, 1, 100, 0, 0), flush},
			}},
		{"negative-duration-is-zero", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{-time.Hour, false}}, []step{
			{app(1, 100, 1, 100, 0, 0), flush},
		}},
		{"zero-oldest-flushes", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{10 * time.Millisecond, false}}, []step{
			{AppendInfo{Messages: 1, UnflushedMessages: 1, Now: t0}, flush},
		}},
		{"oldest-after-now-is-capped", Adaptive(2*time.Millisecond, 50*time.Millisecond), []flushStep{{10 * time.Millisecond, false}}, []step{
			{app(1, 1, 1, 1, 1000, 0), by(40)}, // not by(1040)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			for _, f := range tc.flushes {
				if err := tc.p.Flushed(ctx, FlushInfo{Duration: f.d, Failed: f.failed, Now: t0}); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range tc.steps {
				got, err := tc.p.Appended(ctx, s.a)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got.Flush != s.want.Flush || !got.FlushBy.Equal(s.want.FlushBy) {
					t.Errorf("step %d: Appended(%+v) = %s, want %s", i, s.a, fmtDecision(got), fmtDecision(s.want))
				}
			}
		})
	}
}

// TestAdaptiveEstimate: the estimate is an EWMA with weight 1/4 in whole
// nanoseconds; from 10ms, 0.5ms fsyncs bring it under a 2ms budget on the
// 7th: 7.625, 5.844, 4.508, 3.506, 2.755, 2.191, 1.768 ms.
func TestAdaptiveEstimate(t *testing.T) {
	p := Adaptive(2*time.Millisecond, 50*time.Millisecond).(*adaptive)
	flushed(t, p, 10*time.Millisecond, 0)
	want := []time.Duration{7_625_000, 5_843_750, 4_507_813, 3_505_860, 2_754_395, 2_190_797, 1_768_098}
	for i, w := range want {
		d, _ := p.Appended(context.Background(), app(1, 1, 1, 1, int64(i), int64(i)))
		if d.Flush {
			t.Fatalf("after %d fast fsyncs (estimate %v): flushing already", i, p.cost)
		}
		flushed(t, p, 500*time.Microsecond, int64(i))
		if p.cost != w {
			t.Errorf("after fast fsync %d: estimate %d, want %d", i+1, p.cost, w)
		}
	}
	if d, _ := p.Appended(context.Background(), app(1, 1, 1, 1, 99, 99)); !d.Flush {
		t.Errorf("estimate %v within the 2ms budget, but %s", p.cost, fmtDecision(d))
	}
}

// TestAdaptivePhases drives the policy through a fast disk, a slow one and a
// fast one again, with the fake log: per-append fsyncs while fast, grouped
// fsyncs (and the max bound) while slow, per-append again after.
func TestAdaptivePhases(t *testing.T) {
	const maxWait = 50 * time.Millisecond
	l := &fakeLog{p: Adaptive(2*time.Millisecond, maxWait)}
	now := t0
	phase := func(n int, fsync time.Duration) (appends, fsyncs int) {
		l.fsyncDur = fsync
		before := l.fsyncs
		for range n {
			now = now.Add(time.Millisecond)
			l.append(t, now, 10, 1000)
			if l.unMsgs > 0 && now.Sub(l.oldest) >= maxWait {
				t.Fatalf("at %v: unflushed data %v old, bound %v", now.Sub(t0), now.Sub(l.oldest), maxWait)
			}
		}
		return n, l.fsyncs - before
	}
	if a, f := phase(300, 500*time.Microsecond); f != a {
		t.Errorf("fast disk: %d fsyncs for %d appends, want one each", f, a)
	}
	if a, f := phase(300, 10*time.Millisecond); f > a/10 || f < a/50 {
		t.Errorf("slow disk (10ms fsyncs): %d fsyncs for %d appends 1ms apart, want grouped (~1 per 40ms)", f, a)
	}
	phase(200, 300*time.Microsecond) // relearn: ~7 grouped fsyncs, ~150 appends
	if a, f := phase(100, 300*time.Microsecond); f != a {
		t.Errorf("fast again: %d fsyncs for %d appends, want one each", f, a)
	}
}

func TestAdaptiveSpecs(t *testing.T) {
	tests := []struct {
		spec string
		want Policy
		str  string
	}{
		{"adaptive", Adaptive(time.Millisecond, 50*time.Millisecond), "adaptive"},
		{"adaptive:budget=2ms", Adaptive(2*time.Millisecond, 50*time.Millisecond), "adaptive:budget=2ms"},
		{"adaptive:max=1s", Adaptive(time.Millisecond, time.Second), "adaptive:max=1s"},
		{"adaptive:max=50ms,budget=500us", Adaptive(500*time.Microsecond, 50*time.Millisecond), "adaptive:budget=500µs"},
		{"adaptive:budget=3ms,max=3ms", Adaptive(3*time.Millisecond, 3*time.Millisecond), "adaptive:budget=3ms,max=3ms"},
		{"adaptive:budget=1.5ms,max=2m", Adaptive(1500*time.Microsecond, 2*time.Minute), "adaptive:budget=1.5ms,max=2m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := New(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p, tc.want) || fmt.Sprint(p) != tc.str {
				t.Errorf("New(%q) = %#v (%v), want %#v (%s)", tc.spec, p, p, tc.want, tc.str)
			}
			q, err := New(tc.str)
			if err != nil || !reflect.DeepEqual(p, q) {
				t.Errorf("New(%q) of the String = %v, %v; want %v", tc.str, q, err, p)
			}
		})
	}
	for spec, msg := range map[string]string{
		"adaptive:budget=0s":           `flushpolicy: invalid spec "adaptive:budget=0s": budget="0s": want a positive duration such as 2ms or 500us`,
		"adaptive:budget=2":            `flushpolicy: invalid spec "adaptive:budget=2": budget="2": want a positive duration such as 2ms or 500us`,
		"adaptive:max=-1ms":            `flushpolicy: invalid spec "adaptive:max=-1ms": max="-1ms": want a positive duration such as 2ms or 500us`,
		"adaptive:budget=10ms,max=5ms": `flushpolicy: invalid spec "adaptive:budget=10ms,max=5ms": max=5ms is below budget=10ms: want budget <= max`,
		"adaptive:max=500us":           `flushpolicy: invalid spec "adaptive:max=500us": max=500µs is below budget=1ms: want budget <= max`,
		"adaptive:ms=5":                `flushpolicy: invalid spec "adaptive:ms=5": unknown parameter "ms" (known: budget, max)`,
	} {
		p, err := New(spec)
		if p != nil || !errors.Is(err, ErrInvalidSpec) || err.Error() != msg {
			t.Errorf("New(%q) = %v, %v\nwant error %s", spec, p, err, msg)
		}
	}
	for _, args := range [][2]time.Duration{{0, time.Second}, {time.Second, 0}, {-1, time.Second}, {2 * time.Second, time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Adaptive(%v, %v) did not panic", args[0], args[1])
				}
			}()
			Adaptive(args[0], args[1])
		}()
	}
}

func TestLossBoundsOfBuiltins(t *testing.T) {
	tests := []struct {
		p    Policy
		want Bound
		str  string
	}{
		{EveryBatch(), Bound{Messages: 1, Bytes: 1}, "nothing"},
		{EveryMessages(1000), Bound{Messages: 1000}, "< 1000 messages"},
		{EveryBytes(1 << 20), Bound{Bytes: 1 << 20}, "< 1048576 bytes"},
		{EveryInterval(50 * time.Millisecond), Bound{Age: 50 * time.Millisecond}, "< 50ms old"},
		{Adaptive(time.Millisecond, time.Second), Bound{Age: time.Second}, "< 1s old"},
		{Never(), Bound{}, "unbounded"},
	}
	for _, tc := range tests {
		b, ok := tc.p.(Bounded)
		if !ok {
			t.Errorf("%v does not implement Bounded", tc.p)
			continue
		}
		if got := b.LossBound(); got != tc.want || got.String() != tc.str {
			t.Errorf("%v.LossBound() = %+v (%v), want %+v (%s)", tc.p, got, got, tc.want, tc.str)
		}
	}
	if s := (Bound{Messages: 5, Bytes: 10, Age: time.Second}).String(); s != "< 5 messages, < 10 bytes, < 1s old" {
		t.Errorf("Bound.String() = %q", s)
	}
}
