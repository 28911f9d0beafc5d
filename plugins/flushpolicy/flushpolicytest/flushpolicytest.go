// Package flushpolicytest is the conformance suite for flushpolicy.Policy:
// one body of checks that every implementation runs, the built-ins in
// process and external policies through the go-plugin shim.
//
// A policy is a deterministic function of what it is told, so the suite
// needs no disk and no clock: it drives each policy with a simulated
// partition log over explicit times, the way core/partlog drives it. The
// log is told of each append (Appended), fsyncs when told to (Flush before
// the append returns; FlushBy by a timer that keeps the earliest deadline,
// as partlog's armTimer does), and reports every fsync with its modelled
// duration (Flushed). The simulated log is single-threaded: an fsync runs
// from its start for its duration, and an append that arrives meanwhile
// waits for it, so the state at each acknowledgement is exactly what a
// power cut at that moment would lose.
//
// Workloads (deterministic, seeded): steady small appends on a fast disk,
// bursts and idle gaps, large appends, a disk whose fsyncs turn slow and
// fast again (30 ms, then 0.2 ms), and seconds-long idle gaps: 2250 appends
// in all, so a run through an RPC shim (two calls per append at most) stays
// at a few thousand calls per subtest.
//
// What Run checks (each a subtest):
//
//	valid-input       no errors from Appended or Flushed (a failed fsync included); every
//	                  FlushBy, when set without Flush, is not before OldestUnflushed
//	deterministic     two fresh instances given the same workload make the same decisions
//	loss-bound        for policies implementing flushpolicy.Bounded: the bound is
//	                  well-formed, and right after every acknowledged append the unflushed
//	                  records, bytes and age stay under it, and (with an Age bound) unflushed
//	                  data always has a deadline no later than OldestUnflushed + Age
package flushpolicytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Run runs the conformance suite. newPolicy must return a fresh,
// independent policy each time (the suite compares fresh instances); it may
// register cleanups on t.
func Run(t *testing.T, newPolicy func(t *testing.T) flushpolicy.Policy) {
	t.Helper()
	t.Run("valid-input", func(t *testing.T) {
		for _, w := range workloads() {
			if _, err := simulate(newPolicy(t), w, false); err != nil {
				t.Errorf("workload %s: %v", w.name, err)
			}
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		for _, w := range workloads() {
			a, errA := simulate(newPolicy(t), w, false)
			b, errB := simulate(newPolicy(t), w, false)
			if errA != nil || errB != nil {
				t.Fatalf("workload %s: %v; %v", w.name, errA, errB)
			}
			if i := firstDiff(a, b); i >= 0 {
				t.Errorf("workload %s: two fresh instances diverge at event %d: %q vs %q", w.name, i, at(a, i), at(b, i))
			}
		}
	})
	t.Run("loss-bound", func(t *testing.T) {
		if _, ok := newPolicy(t).(flushpolicy.Bounded); !ok {
			t.Skip("the policy does not implement flushpolicy.Bounded: no bound to check")
		}
		for _, w := range workloads() {
			if _, err := simulate(newPolicy(t), w, true); err != nil {
				t.Errorf("workload %s: %v", w.name, err)
			}
		}
	})
}

func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(end)"
}

// appendEvent is one append of the workload: when it arrives (it may wait
// for an fsync in progress), its records and bytes.
type appendEvent struct {
	at           time.Duration // since the workload's start
	msgs, bytes  int64
	fsyncLatency time.Duration // what an fsync costs at this time, before its per-byte part
}

type workload struct {
	name    string
	events  []appendEvent
	perByte time.Duration // fsync cost per MiB, added to fsyncLatency
	// flushFirst starts with an fsync the policy did not ask for (a log
	// that rolled or was reopened before its first append).
	flushFirst bool
}

var start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// workloads returns the suite's workloads, the same on every call.
func workloads() []workload {
	rng := rand.New(rand.NewPCG(42, 43))
	gen := func(name string, n int, perByte time.Duration, next func(i int) (gap time.Duration, msgs, bytes int64, lat time.Duration)) workload {
		w := workload{name: name, perByte: perByte}
		var now time.Duration
		for i := range n {
			gap, msgs, bytes, lat := next(i)
			now += gap
			w.events = append(w.events, appendEvent{at: now, msgs: msgs, bytes: bytes, fsyncLatency: lat})
		}
		return w
	}
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	steady := gen("steady-fast-disk", 500, 2*time.Millisecond, func(int) (time.Duration, int64, int64, time.Duration) {
		m := 1 + rng.Int64N(100)
		return us(rng.IntN(5000)), m, m * (50 + rng.Int64N(950)), us(300 + rng.IntN(400))
	})
	bursty := gen("bursts-and-gaps", 600, 5*time.Millisecond, func(i int) (time.Duration, int64, int64, time.Duration) {
		gap := us(rng.IntN(200))
		if i%50 == 0 {
			gap = us(200_000 + rng.IntN(1_800_000))
		}
		m := 1 + rng.Int64N(500)
		return gap, m, m * 200, 5 * time.Millisecond
	})
	large := gen("large-appends", 150, 10*time.Millisecond, func(int) (time.Duration, int64, int64, time.Duration) {
		return us(rng.IntN(100_000)), 1 + rng.Int64N(10), (1 + rng.Int64N(16)) << 20, us(1000 + rng.IntN(2000))
	})
	phases := gen("disk-turns-slow-and-fast", 900, 2*time.Millisecond, func(i int) (time.Duration, int64, int64, time.Duration) {
		lat := us(200)
		if i >= 200 && i < 600 {
			lat = 30 * time.Millisecond
		}
		m := 1 + rng.Int64N(20)
		return us(500 + rng.IntN(1500)), m, m * 100, lat
	})
	phases.flushFirst = true
	idle := gen("idle", 100, time.Millisecond, func(int) (time.Duration, int64, int64, time.Duration) {
		return us(1_000_000 + rng.IntN(9_000_000)), 1, 100, us(500)
	})
	return []workload{steady, bursty, large, phases, idle}
}

// log is the simulated partition log.
type log struct {
	p     flushpolicy.Policy
	w     workload
	check bool              // check the loss bound
	bound flushpolicy.Bound // when check
	trace []string

	now              time.Time // when the log is next free
	unMsgs, unBytes  int64
	oldest, deadline time.Time // deadline zero: none armed
}

// simulate runs w against p and returns the trace of decisions and fsyncs,
// or the first violation.
func simulate(p flushpolicy.Policy, w workload, checkBound bool) ([]string, error) {
	l := &log{p: p, w: w, check: checkBound, now: start}
	if checkBound {
		l.bound = p.(flushpolicy.Bounded).LossBound()
		if b := l.bound; b.Messages < 0 || b.Bytes < 0 || b.Age < 0 {
			return nil, fmt.Errorf("LossBound() = %+v: negative fields", b)
		}
	}
	if w.flushFirst {
		if err := l.fsync(start, "unasked"); err != nil {
			return l.trace, err
		}
	}
	ctx := context.Background()
	for i, e := range w.events {
		arrive := start.Add(e.at)
		now := later(arrive, l.now) // an append waits for the fsync in progress
		// A deadline that passes before this append fires first.
		if !l.deadline.IsZero() && !l.deadline.After(now) {
			if err := l.fsync(l.deadline, "deadline"); err != nil {
				return l.trace, err
			}
			now = later(arrive, l.now)
		}
		if l.unMsgs == 0 && l.unBytes == 0 {
			l.oldest = now
		}
		l.unMsgs += e.msgs
		l.unBytes += e.bytes
		a := flushpolicy.AppendInfo{Messages: e.msgs, Bytes: e.bytes, UnflushedMessages: l.unMsgs,
			UnflushedBytes: l.unBytes, OldestUnflushed: l.oldest, Now: now}
		d, err := l.p.Appended(ctx, a)
		if err != nil {
			return l.trace, fmt.Errorf("append %d: Appended(%+v): %w", i, a, err)
		}
		l.trace = append(l.trace, fmt.Sprintf("append %d at %v: flush=%v by=%v", i, now.Sub(start), d.Flush, sinceStart(d.FlushBy)))
		l.now = now
		switch {
		case d.Flush:
			if err := l.fsync(now, "asked"); err != nil {
				return l.trace, err
			}
		case !d.FlushBy.IsZero():
			if d.FlushBy.Before(a.OldestUnflushed) {
				return l.trace, fmt.Errorf("append %d: FlushBy %v is before OldestUnflushed %v: a deadline for data that did not exist yet",
					i, sinceStart(d.FlushBy), sinceStart(a.OldestUnflushed))
			}
			if l.deadline.IsZero() || d.FlushBy.Before(l.deadline) {
				l.deadline = d.FlushBy
			}
		}
		// The append is acknowledged now, with what is still unflushed.
		if err := l.checkAck(i); err != nil {
			return l.trace, err
		}
		if !l.deadline.IsZero() && !l.deadline.After(now) {
			if err := l.fsync(now, "asap"); err != nil { // "as soon as possible"
				return l.trace, err
			}
		}
	}
	if !l.deadline.IsZero() {
		if err := l.fsync(l.deadline, "deadline"); err != nil {
			return l.trace, err
		}
	}
	if err := l.fsync(l.now, "close"); err != nil {
		return l.trace, err
	}
	// The log fails its last fsync: the policy is told, and must not fail.
	f := flushpolicy.FlushInfo{Duration: time.Millisecond, Now: l.now.Add(time.Millisecond), Failed: true}
	if err := l.p.Flushed(ctx, f); err != nil {
		return l.trace, fmt.Errorf("Flushed(%+v) of a failed fsync: %w", f, err)
	}
	return l.trace, nil
}

func sinceStart(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(start).String()
}

// fsync runs an fsync from at (or when the log is free) covering everything
// unflushed, and tells the policy.
func (l *log) fsync(at time.Time, why string) error {
	at = later(at, l.now)
	lat := time.Millisecond
	if i := l.eventIndex(at); i >= 0 {
		lat = l.w.events[i].fsyncLatency
	}
	dur := lat + time.Duration(l.unBytes*int64(l.w.perByte)/(1<<20))
	f := flushpolicy.FlushInfo{Messages: l.unMsgs, Bytes: l.unBytes, Duration: dur, Now: at.Add(dur)}
	l.trace = append(l.trace, fmt.Sprintf("fsync (%s) at %v: %d msgs %d bytes %v", why, at.Sub(start), f.Messages, f.Bytes, dur))
	l.unMsgs, l.unBytes, l.oldest, l.deadline = 0, 0, time.Time{}, time.Time{}
	l.now = f.Now
	if err := l.p.Flushed(context.Background(), f); err != nil {
		return fmt.Errorf("Flushed(%+v): %w", f, err)
	}
	return nil
}

// eventIndex returns the last event at or before t (the disk's state
// then), or -1.
func (l *log) eventIndex(t time.Time) int {
	d := t.Sub(start)
	return sort.Search(len(l.w.events), func(i int) bool { return l.w.events[i].at > d }) - 1
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkAck checks the bound right after append i is acknowledged.
func (l *log) checkAck(i int) error {
	if !l.check || l.unMsgs == 0 && l.unBytes == 0 {
		return nil
	}
	b := l.bound
	var bad []string
	if b.Messages > 0 && l.unMsgs >= b.Messages {
		bad = append(bad, fmt.Sprintf("%d records unflushed", l.unMsgs))
	}
	if b.Bytes > 0 && l.unBytes >= b.Bytes {
		bad = append(bad, fmt.Sprintf("%d bytes unflushed", l.unBytes))
	}
	if b.Age > 0 {
		if age := l.now.Sub(l.oldest); age >= b.Age {
			bad = append(bad, fmt.Sprintf("unflushed data %v old", age))
		}
		if l.deadline.IsZero() {
			bad = append(bad, "unflushed data with no fsync deadline")
		} else if late := l.deadline.Sub(l.oldest); late > b.Age {
			bad = append(bad, fmt.Sprintf("fsync deadline %v after the oldest unflushed append", late))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("append %d acknowledged at %v with %s: LossBound promises %v", i, l.now.Sub(start), strings.Join(bad, ", "), b)
	}
	return nil
}
