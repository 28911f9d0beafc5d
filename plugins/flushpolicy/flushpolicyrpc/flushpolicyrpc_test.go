package flushpolicyrpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicytest"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc/pluginrpctest"
	"github.com/weir-broker/weir/plugins/spec"
)

func open(t *testing.T, f flushpolicyrpc.Factory, params map[string]string) (*flushpolicyrpc.Client, error) {
	t.Helper()
	sup := pluginrpctest.Connect(t, pluginrpc.KindFlushPolicy, "inproc-policy", flushpolicyrpc.Plugin(f), pluginrpc.Config{})
	return flushpolicyrpc.Open(context.Background(), sup, params)
}

func builtin(name string) flushpolicyrpc.Factory {
	return func(params map[string]string) (flushpolicy.Policy, error) {
		return flushpolicy.New(spec.Spec{Name: name, Params: params}.String())
	}
}

// examples are specs of every built-in, for the differential test.
func examples() []string {
	var out []string
	for _, info := range flushpolicy.Infos() {
		if info.Example == "" {
			info.Example = info.Name
		}
		out = append(out, info.Example)
	}
	return out
}

// TestBuiltinsThroughShim runs the conformance suite against every built-in
// policy served over go-plugin's gRPC in process; loss bounds cross at Open.
//
// The suite makes one call per simulated append and fsync, ~40,000 per
// policy: about 2 s each here, but 15-30 s each under the race detector. So
// under -race it runs against interval alone (the built-in whose answers
// carry times); TestBuiltinsAnswerAlike still compares every built-in with
// its shimmed self, and package host runs the suite against a subprocess.
func TestBuiltinsThroughShim(t *testing.T) {
	for _, ex := range examples() {
		t.Run(ex, func(t *testing.T) {
			if raceEnabled && !strings.HasPrefix(ex, "interval") {
				t.Skip("under -race only interval runs the whole suite through the shim; run without -race for every built-in")
			}
			sp, err := spec.Parse(ex)
			if err != nil {
				t.Fatal(err)
			}
			flushpolicytest.Run(t, func(t *testing.T) flushpolicy.Policy {
				p, err := open(t, builtin(sp.Name), sp.Params)
				if err != nil {
					t.Fatalf("Open %s: %v", ex, err)
				}
				t.Cleanup(func() { _ = p.Close() })
				return p
			})
		})
	}
}

func TestLossBoundCrosses(t *testing.T) {
	for _, ex := range examples() {
		direct, err := flushpolicy.New(ex)
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := spec.Parse(ex)
		remote, err := open(t, builtin(sp.Name), sp.Params)
		if err != nil {
			t.Fatal(err)
		}
		var want flushpolicy.Bound
		if b, ok := direct.(flushpolicy.Bounded); ok {
			want = b.LossBound()
		}
		if got := remote.LossBound(); got != want {
			t.Errorf("%s through the shim: LossBound() = %v, want %v", ex, got, want)
		}
	}
}

// TestBuiltinsAnswerAlike drives each built-in directly and through the shim
// with the same appends and fsyncs, and compares every decision.
func TestBuiltinsAnswerAlike(t *testing.T) {
	for _, ex := range examples() {
		t.Run(ex, func(t *testing.T) {
			sp, err := spec.Parse(ex)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := flushpolicy.New(ex)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := open(t, builtin(sp.Name), sp.Params)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			t0 := time.Now()
			var unMsgs, unBytes int64
			oldest := t0
			for i := range 200 {
				now := t0.Add(time.Duration(i) * 7 * time.Millisecond)
				if unMsgs == 0 {
					oldest = now
				}
				msgs, bytes := int64(1+i%37), int64(100+i*13%5000)
				unMsgs, unBytes = unMsgs+msgs, unBytes+bytes
				a := flushpolicy.AppendInfo{Messages: msgs, Bytes: bytes, UnflushedMessages: unMsgs, UnflushedBytes: unBytes, OldestUnflushed: oldest, Now: now}
				want, err1 := direct.Appended(ctx, a)
				got, err2 := remote.Appended(ctx, a)
				if err1 != nil || err2 != nil {
					t.Fatalf("append %d: errors %v, %v", i, err1, err2)
				}
				if got.Flush != want.Flush || !got.FlushBy.Equal(want.FlushBy) {
					t.Fatalf("append %d (%+v): through the shim %+v, directly %+v", i, a, got, want)
				}
				if want.Flush || i%10 == 9 {
					f := flushpolicy.FlushInfo{Messages: unMsgs, Bytes: unBytes, Duration: 500 * time.Microsecond, Now: now, Failed: i%20 == 19}
					if err1, err2 := direct.Flushed(ctx, f), remote.Flushed(ctx, f); err1 != nil || err2 != nil {
						t.Fatalf("Flushed: %v, %v", err1, err2)
					}
					unMsgs, unBytes = 0, 0
				}
			}
		})
	}
}

// recorder remembers what crossed the boundary.
type recorder struct {
	appended []flushpolicy.AppendInfo
	flushed  []flushpolicy.FlushInfo
	answer   flushpolicy.Decision
	err      error
}

func (r *recorder) Appended(_ context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	r.appended = append(r.appended, a)
	return r.answer, r.err
}

func (r *recorder) Flushed(_ context.Context, f flushpolicy.FlushInfo) error {
	r.flushed = append(r.flushed, f)
	return r.err
}

// TestFieldsCross checks every field, zero times included, arrives intact.
func TestFieldsCross(t *testing.T) {
	rec := &recorder{}
	p, err := open(t, func(map[string]string) (flushpolicy.Policy, error) { return rec, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	inputs := []flushpolicy.AppendInfo{
		{Messages: 3, Bytes: 300, UnflushedMessages: 5, UnflushedBytes: 500, OldestUnflushed: now.Add(-time.Second), Now: now},
		{Messages: 1}, // zero times
	}
	answers := []flushpolicy.Decision{{FlushBy: now.Add(time.Millisecond)}, {Flush: true}}
	for i, a := range inputs {
		rec.answer = answers[i]
		d, err := p.Appended(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if d.Flush != answers[i].Flush || !d.FlushBy.Equal(answers[i].FlushBy) || d.FlushBy.IsZero() != answers[i].FlushBy.IsZero() {
			t.Errorf("decision %d: %+v, want %+v", i, d, answers[i])
		}
		got := rec.appended[i]
		if got.Messages != a.Messages || got.Bytes != a.Bytes || got.UnflushedMessages != a.UnflushedMessages || got.UnflushedBytes != a.UnflushedBytes ||
			!got.Now.Equal(a.Now) || !got.OldestUnflushed.Equal(a.OldestUnflushed) || got.Now.IsZero() != a.Now.IsZero() {
			t.Errorf("append %d arrived as %+v, sent %+v", i, got, a)
		}
	}
	f := flushpolicy.FlushInfo{Messages: 9, Bytes: 900, Duration: 1234567 * time.Nanosecond, Now: now, Failed: true}
	if err := p.Flushed(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got := rec.flushed[0]; got.Messages != 9 || got.Bytes != 900 || got.Duration != f.Duration || !got.Now.Equal(now) || !got.Failed {
		t.Errorf("fsync arrived as %+v, sent %+v", got, f)
	}
	if s := p.String(); s != "inproc-policy" {
		t.Errorf("String() = %q", s)
	}
}

func TestErrors(t *testing.T) {
	rec := &recorder{err: fmt.Errorf("cannot decide")}
	p, err := open(t, func(map[string]string) (flushpolicy.Policy, error) { return rec, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Appended(context.Background(), flushpolicy.AppendInfo{Messages: 1})
	if !errors.Is(err, flushpolicy.ErrPluginFailed) || !strings.Contains(err.Error(), "cannot decide") || !strings.Contains(err.Error(), "inproc-policy: Appended") {
		t.Errorf("Appended error: %v", err)
	}
	if err := p.Flushed(context.Background(), flushpolicy.FlushInfo{}); !errors.Is(err, flushpolicy.ErrPluginFailed) {
		t.Errorf("Flushed error: %v", err)
	}
	_, err = open(t, builtin("messages"), map[string]string{"n": "0"})
	if !errors.Is(err, flushpolicy.ErrInvalidSpec) || !strings.Contains(err.Error(), `n="0"`) {
		t.Errorf("Open messages:n=0: %v", err)
	}
}
