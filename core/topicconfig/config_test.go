package topicconfig

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

func TestNormalizeConfigs(t *testing.T) {
	ok := []map[string]string{
		nil,
		{"retention.ms": "-1"}, {"retention.ms": "0"}, {"retention.ms": "9223372036854775807"},
		{"retention.bytes": "-5"}, {"retention.bytes": "0"}, {"retention.bytes": "1073741824"},
		{"segment.bytes": "1024"}, {"segment.bytes": "2147483647"},
		{"segment.ms": "1"}, {"segment.ms": "9223372036854775807"},
		{"max.message.bytes": "61"}, {"max.message.bytes": "2147483647"},
		{"index.interval.bytes": "0"}, {"index.interval.bytes": "2147483647"},
		{"flush.messages": "1"}, {"flush.messages": "9223372036854775807"},
		{"flush.ms": "0"}, {"flush.ms": " 1000 "},
		{"compression.type": "producer"}, {"compression.type": "uncompressed"}, {"compression.type": "zstd"},
		{"weir.flush.policy": "messages:n=1000"}, {"weir.flush.policy": "every-batch"},
		{"weir.durable.acks": "true"}, {"weir.durable.acks": "FALSE"},
		{"cleanup.policy": "delete"}, {"cleanup.policy": "compact"}, {"cleanup.policy": "compact, delete"},
		{"delete.retention.ms": "0"}, {"min.cleanable.dirty.ratio": "0"}, {"min.cleanable.dirty.ratio": "0.9"},
		{"unclean.leader.election.enable": "TRUE"},
	}
	for _, m := range ok {
		if _, err := Normalize(m, BuiltinPlugins{}); err != nil {
			t.Errorf("Normalize(%v, BuiltinPlugins{}) = %v, want ok", m, err)
		}
	}
	for _, tc := range []struct{ key, value string }{
		{"cleanup.Policy", "delete"},
		{"cleanup.policy", "Delete"},
		{"retention.MS", "1"},
		{"retention.ms", "-2"},
		{"retention.ms", "1h"},
		{"retention.ms", ""},
		{"retention.bytes", "9223372036854775808"},
		{"segment.bytes", "1023"},
		{"segment.bytes", "2147483648"},
		{"segment.ms", "0"},
		{"max.message.bytes", "60"},
		{"max.message.bytes", "0"},
		{"index.interval.bytes", "-1"},
		{"index.interval.bytes", "2147483648"},
		{"flush.messages", "0"},
		{"flush.ms", "-1"},
		{"compression.type", "brotli"},
		{"compression.type", "ZSTD"},
		{"compression.type", "zsdt"},
		{"weir.flush.policy", "sometimes"},
		{"weir.flush.policy", "messages:n=0"},
		{"weir.durable.acks", "yes"},
		{"weir.durable.acks", "1"},
		{"cleanup.policy", ""},
		{"unclean.leader.election.enable", "yes"},
		{"cleanup.policy", "compacted"},
		{"cleanup.policy", "compact,"},
		{"delete.retention.ms", "-1"},
		{"min.cleanable.dirty.ratio", "1.5"},
		{"min.cleanable.dirty.ratio", "NaN"},
	} {
		_, err := Normalize(map[string]string{tc.key: tc.value}, BuiltinPlugins{})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%q: got %v, want ErrInvalidConfig", tc.key, tc.value, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.value) {
			t.Errorf("%s=%q: error %q does not name the key and value", tc.key, tc.value, err)
		}
	}
	m, err := Normalize(map[string]string{"flush.ms": " 1000 "}, BuiltinPlugins{})
	if err != nil || m["flush.ms"] != "1000" {
		t.Errorf("values are not trimmed: %v %v", m, err)
	}
}

func TestParseConfigs(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		want    partlog.Config
		durable bool
	}{
		{nil, partlog.Config{}, false},
		{map[string]string{"retention.ms": "-1"}, partlog.Config{RetentionAge: -1}, false},
		{map[string]string{"retention.ms": "0"}, partlog.Config{RetentionAge: time.Nanosecond}, false},
		{map[string]string{"retention.ms": "86400000"}, partlog.Config{RetentionAge: 24 * time.Hour}, false},
		{map[string]string{"retention.ms": "9223372036854775807"}, partlog.Config{RetentionAge: -1}, false},
		{map[string]string{"retention.bytes": "-7"}, partlog.Config{RetentionBytes: -1}, false},
		{map[string]string{"retention.bytes": "0"}, partlog.Config{RetentionBytes: 1}, false},
		{map[string]string{"retention.bytes": "4096"}, partlog.Config{RetentionBytes: 4096}, false},
		{map[string]string{"segment.bytes": "1048576"}, partlog.Config{SegmentBytes: 1 << 20}, false},
		{map[string]string{"segment.ms": "60000"}, partlog.Config{SegmentAge: time.Minute}, false},
		{map[string]string{"segment.ms": "9223372036854775807"}, partlog.Config{SegmentAge: math.MaxInt64}, false},
		{map[string]string{"max.message.bytes": "1000"}, partlog.Config{MaxBatchBytes: 1000}, false},
		{map[string]string{"index.interval.bytes": "0"}, partlog.Config{IndexIntervalBytes: 1}, false},
		{map[string]string{"index.interval.bytes": "100"}, partlog.Config{IndexIntervalBytes: 100}, false},
		{map[string]string{"weir.durable.acks": "True"}, partlog.Config{}, true},
		{map[string]string{"compression.type": "gzip"}, partlog.Config{}, false},
	} {
		m, err := Normalize(tc.configs, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(m, BuiltinPlugins{})
		if err != nil {
			t.Fatalf("%v: %v", tc.configs, err)
		}
		if got.Log != tc.want || got.DurableAcks != tc.durable {
			t.Errorf("%v: got %+v durable=%v, want %+v durable=%v", tc.configs, got.Log, got.DurableAcks, tc.want, tc.durable)
		}
	}
}

// cleanup.policy=compact turns the cleaner on and retention by time and
// size off; with delete too, retention stays; the cleaner's settings default
// to Kafka's.
func TestCompactionConfigs(t *testing.T) {
	for _, tc := range []struct {
		configs         map[string]string
		compact         bool
		retention       time.Duration
		deleteRetention time.Duration
		minCleanable    float64
	}{
		{nil, false, 0, DefaultDeleteRetention, DefaultMinCleanableRatio},
		{map[string]string{"cleanup.policy": "delete", "retention.ms": "1000"}, false, time.Second, DefaultDeleteRetention, 0.5},
		{map[string]string{"cleanup.policy": "compact", "retention.ms": "1000"}, true, -1, DefaultDeleteRetention, 0.5},
		{map[string]string{"cleanup.policy": "delete,compact", "retention.ms": "1000"}, true, time.Second, DefaultDeleteRetention, 0.5},
		{map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "60000", "min.cleanable.dirty.ratio": "0.25"},
			true, -1, time.Minute, 0.25},
	} {
		m, err := Normalize(tc.configs, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(m, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Compact != tc.compact || got.Log.RetentionAge != tc.retention || got.DeleteRetention != tc.deleteRetention ||
			got.MinCleanableRatio != tc.minCleanable {
			t.Errorf("%v: compact=%v retention=%v delete.retention=%v min.cleanable=%v", tc.configs, got.Compact,
				got.Log.RetentionAge, got.DeleteRetention, got.MinCleanableRatio)
		}
		if tc.compact && tc.retention < 0 && got.Log.RetentionBytes != -1 {
			t.Errorf("%v: retention.bytes %d with cleanup.policy=compact", tc.configs, got.Log.RetentionBytes)
		}
	}
}

// min.compaction.lag.ms and max.compaction.lag.ms reach the cleaner's
// settings with Kafka's defaults (0, none) and bounds; on a compacted topic
// the max lag also caps segment.ms (Kafka rolls the active segment by it).
func TestCompactionLagConfigs(t *testing.T) {
	for _, bad := range []map[string]string{{"min.compaction.lag.ms": "-1"}, {"max.compaction.lag.ms": "0"}, {"max.compaction.lag.ms": "x"}} {
		if _, err := Normalize(bad, BuiltinPlugins{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v accepted: %v", bad, err)
		}
	}
	for _, tc := range []struct {
		configs    map[string]string
		minLag     time.Duration
		maxLag     time.Duration
		segmentAge time.Duration
	}{
		{nil, 0, math.MaxInt64, 0},
		{map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "5000"}, 5 * time.Second, math.MaxInt64, 0},
		{map[string]string{"cleanup.policy": "compact", "max.compaction.lag.ms": "60000"}, 0, time.Minute, time.Minute},
		{map[string]string{"cleanup.policy": "compact", "max.compaction.lag.ms": "60000", "segment.ms": "1000"}, 0, time.Minute, time.Second},
		{map[string]string{"cleanup.policy": "delete", "max.compaction.lag.ms": "60000"}, 0, time.Minute, 0},
		{map[string]string{"max.compaction.lag.ms": "9223372036854775807"}, 0, math.MaxInt64, 0},
	} {
		m, err := Normalize(tc.configs, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(m, BuiltinPlugins{})
		if err != nil {
			t.Fatal(err)
		}
		if got.MinCompactionLag != tc.minLag || got.MaxCompactionLag != tc.maxLag || got.Log.SegmentAge != tc.segmentAge {
			t.Errorf("%v: min lag %v, max lag %v, segment age %v", tc.configs, got.MinCompactionLag, got.MaxCompactionLag, got.Log.SegmentAge)
		}
	}
}

// TestFlushPolicyConfig checks which policy the flush keys select, by asking
// the policy about appends.
func TestFlushPolicyConfig(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	// ask returns the decision for one append of msgs records with the oldest
	// unflushed append age old.
	ask := func(p flushpolicy.Policy, msgs int64, age time.Duration) flushpolicy.Decision {
		d, err := p.Appended(context.Background(), flushpolicy.AppendInfo{Messages: 1, Bytes: 100,
			UnflushedMessages: msgs, UnflushedBytes: 100 * msgs, OldestUnflushed: now.Add(-age), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name              string
		explicit, def     map[string]string
		none              bool
		flushAt10, flush1 bool          // Flush for 10 unflushed messages / for 1
		by                time.Duration // FlushBy relative to the oldest append, for 1 fresh message
	}{
		{name: "nothing", none: true},
		{name: "kafka never", explicit: map[string]string{"flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807"}, none: true},
		{name: "flush.messages=10", explicit: map[string]string{"flush.messages": "10"}, flushAt10: true},
		{name: "flush.messages=1", explicit: map[string]string{"flush.messages": "1"}, flushAt10: true, flush1: true},
		{name: "flush.ms=0", explicit: map[string]string{"flush.ms": "0"}, flushAt10: true, flush1: true},
		{name: "flush.ms=50", explicit: map[string]string{"flush.ms": "50"}, by: 50 * time.Millisecond},
		{name: "both", explicit: map[string]string{"flush.messages": "10", "flush.ms": "50"}, flushAt10: true, by: 50 * time.Millisecond},
		{name: "weir.flush.policy wins", explicit: map[string]string{"flush.messages": "10", "weir.flush.policy": "every-batch"}, flushAt10: true, flush1: true},
		{name: "default policy", def: map[string]string{"weir.flush.policy": "messages:n=10"}, flushAt10: true},
		{name: "topic flush keys beat default policy", explicit: map[string]string{"flush.ms": "50"},
			def: map[string]string{"weir.flush.policy": "every-batch"}, by: 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, _ := Normalize(tc.explicit, BuiltinPlugins{})
			def, _ := Normalize(tc.def, BuiltinPlugins{})
			tcfg, err := Parse(Resolve(ex, def), BuiltinPlugins{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.none {
				if tcfg.Policy != nil {
					t.Fatal("got a flush policy, want the log's default")
				}
				return
			}
			if tcfg.Policy == nil {
				t.Fatal("no flush policy")
			}
			p, err := tcfg.Policy()
			if err != nil {
				t.Fatal(err)
			}
			if d := ask(p, 10, 0); d.Flush != tc.flushAt10 {
				t.Errorf("10 unflushed: Flush=%v, want %v", d.Flush, tc.flushAt10)
			}
			d := ask(p, 1, 0)
			if d.Flush != tc.flush1 {
				t.Errorf("1 unflushed: Flush=%v, want %v", d.Flush, tc.flush1)
			}
			if !d.Flush {
				var by time.Duration
				if !d.FlushBy.IsZero() {
					by = d.FlushBy.Sub(now)
				}
				if by != tc.by {
					t.Errorf("1 unflushed: FlushBy in %v, want %v", by, tc.by)
				}
			}
		})
	}
}

func TestResolveConfigs(t *testing.T) {
	def := map[string]string{"retention.ms": "1000", "compression.type": "lz4", "flush.ms": "10", "weir.flush.policy": "never"}
	ex := map[string]string{"retention.ms": "2000", "flush.messages": "5"}
	got := Resolve(ex, def)
	want := map[string]string{"retention.ms": "2000", "compression.type": "lz4", "flush.messages": "5"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (got %v)", k, got[k], v, got)
		}
	}
	got = Resolve(map[string]string{"segment.ms": "5"}, def)
	if got["flush.ms"] != "10" || got["weir.flush.policy"] != "never" || got["segment.ms"] != "5" {
		t.Errorf("defaults' flush keys lost: %v", got)
	}
}
