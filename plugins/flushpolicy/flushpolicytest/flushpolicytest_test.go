package flushpolicytest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// specs are the built-ins as the suite runs them: every registered policy's
// example, and the edges of their parameters.
func specs() []string {
	var out []string
	for _, info := range flushpolicy.Infos() {
		out = append(out, info.Example)
	}
	return append(out, "messages:n=1", "bytes:n=1", "interval:d=1ms", "interval:d=1s",
		"adaptive", "adaptive:budget=100us,max=5ms", "adaptive:budget=1s,max=1s", "adaptive:budget=10ms")
}

func TestBuiltins(t *testing.T) {
	for _, spec := range specs() {
		t.Run(spec, func(t *testing.T) {
			Run(t, func(t *testing.T) flushpolicy.Policy {
				p, err := flushpolicy.New(spec)
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

// TestWorkloadsExercisePolicies: the workloads make each kind of policy do
// each kind of thing, or the checks above would pass vacuously.
func TestWorkloadsExercisePolicies(t *testing.T) {
	count := func(spec, what string) int {
		p, err := flushpolicy.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range workloads() {
			trace, err := simulate(p, w, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range trace {
				if strings.Contains(e, what) {
					n++
				}
			}
		}
		return n
	}
	for _, tc := range []struct{ spec, what string }{
		{"interval:ms=50", "fsync (deadline)"},
		{"messages:n=1000", "fsync (asked)"},
		{"adaptive:budget=2ms", "fsync (deadline)"}, // the slow phase groups
		{"adaptive:budget=2ms", "flush=true"},       // the fast phases do not
		{"adaptive", "fsync (unasked)"},
	} {
		if n := count(tc.spec, tc.what); n == 0 {
			t.Errorf("%s: no %q in any workload", tc.spec, tc.what)
		}
	}
}

// Policies that break one rule each, to show the suite catches it.
type (
	liar         struct{ flushpolicy.Policy } // claims a message bound, never flushes
	noDeadline   struct{ flushpolicy.Policy } // claims an age bound, never flushes
	lateDeadline struct{ d time.Duration }    // deadlines beyond its age bound
	earlyBy      struct{}                     // deadline before the data
	failsFlushed struct{}
)

func (liar) LossBound() flushpolicy.Bound       { return flushpolicy.Bound{Messages: 10} }
func (noDeadline) LossBound() flushpolicy.Bound { return flushpolicy.Bound{Age: time.Second} }

func (p lateDeadline) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	return flushpolicy.Decision{FlushBy: a.OldestUnflushed.Add(2 * p.d)}, nil
}
func (lateDeadline) Flushed(context.Context, flushpolicy.FlushInfo) error { return nil }
func (p lateDeadline) LossBound() flushpolicy.Bound                       { return flushpolicy.Bound{Age: p.d} }

func (earlyBy) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	return flushpolicy.Decision{FlushBy: a.OldestUnflushed.Add(-time.Millisecond)}, nil
}
func (earlyBy) Flushed(context.Context, flushpolicy.FlushInfo) error { return nil }

func (failsFlushed) Appended(context.Context, flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	return flushpolicy.Decision{Flush: true}, nil
}
func (failsFlushed) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	if f.Failed {
		return errors.New("cannot handle a failed fsync")
	}
	return nil
}

// drifting decides from a counter shared by all instances (500 appends a
// run, not a multiple of 7): not deterministic.
var drift int

type drifting struct{}

func (drifting) Appended(context.Context, flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	drift++
	return flushpolicy.Decision{Flush: drift%7 == 0}, nil
}
func (drifting) Flushed(context.Context, flushpolicy.FlushInfo) error { return nil }

func TestSuiteCatches(t *testing.T) {
	w := workloads()[0]
	for _, tc := range []struct {
		name  string
		p     flushpolicy.Policy
		check bool
		want  string
	}{
		{"message bound", liar{flushpolicy.Never()}, true, "records unflushed: LossBound promises < 10 messages"},
		{"age bound without deadline", noDeadline{flushpolicy.Never()}, true, "no fsync deadline"},
		{"late deadline", lateDeadline{50 * time.Millisecond}, true, "fsync deadline 100ms after the oldest"},
		{"deadline before data", earlyBy{}, false, "before OldestUnflushed"},
		{"failed fsync", failsFlushed{}, false, "cannot handle a failed fsync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := simulate(tc.p, w, tc.check)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("simulate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	a, _ := simulate(drifting{}, w, false)
	b, _ := simulate(drifting{}, w, false)
	if firstDiff(a, b) < 0 {
		t.Error("two runs of a drifting policy look identical")
	}
}
