package topicconfig

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/spec"
)

// Topic config keys: Kafka's names, plus two of weir's own.
const (
	RetentionMs        = "retention.ms"         // -1 (forever) or >= 0; default 7 days
	RetentionBytes     = "retention.bytes"      // any; negative: unlimited (default -1)
	SegmentBytes       = "segment.bytes"        // 1024..2^31-1; default 1 GiB
	SegmentMs          = "segment.ms"           // >= 1; default 7 days
	MaxMessageBytes    = "max.message.bytes"    // 61..2^31-1; default 1048588
	IndexIntervalBytes = "index.interval.bytes" // 0..2^31-1; default 4096
	FlushMessages      = "flush.messages"       // >= 1; default 2^63-1 (never)
	FlushMs            = "flush.ms"             // >= 0; default 2^63-1 (never)
	CompressionType    = "compression.type"     // producer|uncompressed|gzip|snappy|lz4|zstd; default producer
	FlushPolicy        = "weir.flush.policy"    // a flushpolicy spec; wins over flush.*
	DurableAcks        = "weir.durable.acks"    // true|false; default false
	MinInsyncReplicas  = "min.insync.replicas"  // >= 1; default 1 (one node: above 1, acks=all fails)
	// Compaction (see the package doc).
	UncleanLeaderElection  = "unclean.leader.election.enable" // true|false; default false (the controller's)
	CleanupPolicy          = "cleanup.policy"                 // delete|compact|compact,delete; default delete
	DeleteRetentionMs      = "delete.retention.ms"            // >= 0; default 1 day
	MinCleanableDirtyRatio = "min.cleanable.dirty.ratio"      // 0..1; default 0.5
	MinCompactionLagMs     = "min.compaction.lag.ms"          // >= 0; default 0
	MaxCompactionLagMs     = "max.compaction.lag.ms"          // >= 1; default 2^63-1 (none)
)

// cleanup.policy values.
const (
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
)

// Compaction defaults (Kafka's log.cleaner.delete.retention.ms and
// log.cleaner.min.cleanable.ratio).
const (
	DefaultDeleteRetention   = 24 * time.Hour
	DefaultMinCleanableRatio = 0.5
)

// Keys lists every key a topic accepts, sorted.
func Keys() []string { return slices.Sorted(maps.Keys(byName)) }

// compression.type values besides codec specs.
const (
	CompressionProducer     = "producer"     // keep batches as producers compressed them (the default)
	CompressionUncompressed = "uncompressed" // store every batch uncompressed
)

// CompressionTypes are Kafka's compression.type values. weir also accepts
// any codec spec (zstd:level=4, a plugin path or name), see the package doc.
var CompressionTypes = []string{CompressionProducer, CompressionUncompressed, "gzip", "snappy", "lz4", "zstd"}

// flushKeys decide the flush policy together; they come as a group from the
// most specific layer that sets any of them (see Resolve).
var flushKeys = []string{FlushMessages, FlushMs, FlushPolicy}

// kafkaNever is Kafka's "no limit" default of flush.messages and flush.ms.
const kafkaNever = math.MaxInt64

// parseCleanup parses cleanup.policy: a comma-separated list of delete and
// compact (Kafka's list syntax; white space around items allowed), not empty.
func parseCleanup(v string) (del, compact bool, err error) {
	for item := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(item) {
		case CleanupDelete:
			del = true
		case CleanupCompact:
			compact = true
		default:
			return false, false, fmt.Errorf("must be %s, %s or both, comma-separated", CleanupDelete, CleanupCompact)
		}
	}
	return del, compact, nil
}

// pluginCheckers validate the values that name plugins, by building one.
var pluginCheckers = map[string]func(v string, pl Plugins) error{
	CompressionType: func(v string, pl Plugins) error {
		if v == CompressionProducer || v == CompressionUncompressed {
			return nil
		}
		c, err := pl.Codec(v)
		if err != nil {
			return fmt.Errorf("must be %s, %s or a codec spec (%s, or a plugin): %w",
				CompressionProducer, CompressionUncompressed, strings.Join(CompressionTypes[2:], ", "), err)
		}
		ClosePlugin(c)
		return nil
	},
	FlushPolicy: func(v string, pl Plugins) error {
		p, err := pl.FlushPolicy(v)
		if err != nil {
			return err
		}
		ClosePlugin(p)
		return nil
	},
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			switch {
			case lo == math.MinInt64:
				return fmt.Errorf("must be an integer")
			case hi == math.MaxInt64:
				return fmt.Errorf("must be an integer >= %d", lo)
			}
			return fmt.Errorf("must be an integer in [%d, %d]", lo, hi)
		}
		return nil
	}
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("must be true or false")
}

// Normalize validates every key and value of m and returns a copy with
// the values trimmed of white space (as Kafka parses them). Errors wrap
// ErrInvalidConfig and name the key and value; with several bad keys the
// first in sorted order is reported. Values naming plugins are checked by
// building one with pl; with pl nil (configs already accepted once, read back
// from the metadata) only their syntax is checked, so a plugin that is gone
// does not keep the registry from opening.
func Normalize(m map[string]string, pl Plugins) (map[string]string, error) {
	out := make(map[string]string, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key, ok := byName[k]
		if !ok {
			return nil, fmt.Errorf("%w: %s=%q: unknown key (known: %s)", ErrInvalidConfig, k, m[k], strings.Join(Keys(), ", "))
		}
		v := strings.TrimSpace(m[k])
		var err error
		if pcheck, ok := pluginCheckers[k]; ok {
			if pl != nil {
				err = pcheck(v, pl)
			} else if _, perr := spec.Parse(v); perr != nil {
				err = perr
			}
		} else {
			err = key.check(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%q: %w", ErrInvalidConfig, k, m[k], err)
		}
		out[k] = v
	}
	if err := checkCombination(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Resolve merges a topic's explicit configs over the broker defaults
// (both already normalised): explicit keys win, except that the flush keys
// (flush.messages, flush.ms, weir.flush.policy) come as a group from the topic
// if it sets any of them, and from the defaults otherwise, so a topic's
// flush.ms is not overridden by a broker-wide weir.flush.policy.
func Resolve(explicit, defaults map[string]string) map[string]string {
	eff := make(map[string]string, len(explicit)+len(defaults))
	topicFlush := false
	for _, k := range flushKeys {
		if _, ok := explicit[k]; ok {
			topicFlush = true
		}
	}
	for k, v := range defaults {
		if topicFlush && slices.Contains(flushKeys, k) {
			continue
		}
		eff[k] = v
	}
	for k, v := range explicit {
		eff[k] = v
	}
	return eff
}

// Config is what a topic's effective configs mean to its partitions.
type Config struct {
	// Log is the partition logs' configuration; FlushPolicy, Clock and
	// Logger are left for the caller.
	Log partlog.Config
	// Policy builds a partition's flush policy (one per partition); nil
	// leaves it to the log's default (never: the OS writes back).
	Policy func() (flushpolicy.Policy, error)
	// Compression is the codec spec batches are recompressed to
	// (compression.type), "" to keep them as produced.
	Compression string
	// DurableAcks (weir.durable.acks): acks wait for the covering fsync.
	DurableAcks bool
	// MinInsyncReplicas (min.insync.replicas), at least 1.
	MinInsyncReplicas int32
	// Compact (cleanup.policy has compact): the log cleaner keeps the last
	// record of every key. Without delete in the policy, retention by time
	// and size is off (Log.RetentionAge and RetentionBytes are -1).
	Compact bool
	// DeleteRetention (delete.retention.ms): how long the cleaner keeps a
	// tombstone after it first cleaned it.
	DeleteRetention time.Duration
	// MinCleanableRatio (min.cleanable.dirty.ratio): the share of the
	// cleanable log not yet cleaned at which the cleaner cleans it.
	MinCleanableRatio float64
	// MinCompactionLag (min.compaction.lag.ms): the cleaner leaves records
	// younger than this uncompacted. Default 0.
	MinCompactionLag time.Duration
	// MaxCompactionLag (max.compaction.lag.ms): a compacted log holding a
	// dirty record older than this is cleaned whatever its dirty ratio.
	// Default (Kafka's Long.MAX_VALUE ms) and values too large for a
	// Duration: math.MaxInt64, no bound.
	MaxCompactionLag time.Duration
}

// Parse maps effective configs (validated by Normalize) onto a
// partition log's settings. Kafka values partlog cannot express exactly are
// mapped to the nearest meaning: retention.ms=0 and retention.bytes=0 ("keep
// nothing but the active segment") become 1 ns and 1 byte, since partlog reads
// 0 as "default"; index.interval.bytes=0 becomes 1 (an entry per batch);
// millisecond values too large for a time.Duration (~292 years) mean forever.
func Parse(eff map[string]string, pl Plugins) (Config, error) {
	var tc Config
	num := func(k string) (int64, bool) {
		v, ok := eff[k]
		if !ok {
			return 0, false
		}
		n, _ := strconv.ParseInt(v, 10, 64) // validated
		return n, true
	}
	if ms, ok := num(RetentionMs); ok {
		switch {
		case ms < 0:
			tc.Log.RetentionAge = -1
		case ms == 0:
			tc.Log.RetentionAge = time.Nanosecond
		default:
			tc.Log.RetentionAge = msDuration(ms, -1)
		}
	}
	if b, ok := num(RetentionBytes); ok {
		switch {
		case b < 0:
			tc.Log.RetentionBytes = -1
		case b == 0:
			tc.Log.RetentionBytes = 1
		default:
			tc.Log.RetentionBytes = b
		}
	}
	if b, ok := num(SegmentBytes); ok {
		tc.Log.SegmentBytes = b
	}
	if ms, ok := num(SegmentMs); ok {
		tc.Log.SegmentAge = msDuration(ms, math.MaxInt64)
	}
	if b, ok := num(MaxMessageBytes); ok {
		tc.Log.MaxBatchBytes = int(b)
	}
	if b, ok := num(IndexIntervalBytes); ok {
		tc.Log.IndexIntervalBytes = max(b, 1)
	}
	if v, ok := eff[DurableAcks]; ok {
		tc.DurableAcks, _ = parseBool(v)
	}
	tc.DeleteRetention, tc.MinCleanableRatio = DefaultDeleteRetention, DefaultMinCleanableRatio
	if v, ok := eff[CleanupPolicy]; ok {
		del, compact, _ := parseCleanup(v)
		tc.Compact = compact
		if !del {
			tc.Log.RetentionAge, tc.Log.RetentionBytes = -1, -1
		}
	}
	if ms, ok := num(DeleteRetentionMs); ok {
		tc.DeleteRetention = msDuration(ms, math.MaxInt64)
	}
	if v, ok := eff[MinCleanableDirtyRatio]; ok {
		tc.MinCleanableRatio, _ = strconv.ParseFloat(v, 64)
	}
	tc.MaxCompactionLag = math.MaxInt64
	if ms, ok := num(MinCompactionLagMs); ok {
		tc.MinCompactionLag = msDuration(ms, math.MaxInt64)
	}
	if ms, ok := num(MaxCompactionLagMs); ok {
		tc.MaxCompactionLag = msDuration(ms, math.MaxInt64)
		if tc.Compact && tc.MaxCompactionLag != math.MaxInt64 {
			age := tc.Log.SegmentAge
			if age == 0 {
				age = partlog.DefaultSegmentAge
			}
			tc.Log.SegmentAge = min(age, tc.MaxCompactionLag)
		}
	}
	tc.MinInsyncReplicas = 1
	if n, ok := num(MinInsyncReplicas); ok {
		tc.MinInsyncReplicas = int32(n)
	}
	if c, ok := eff[CompressionType]; ok && c != CompressionProducer {
		tc.Compression = c
		if c == CompressionUncompressed {
			tc.Compression = codec.None.String()
		}
		if lvl, ok := num(CompressionGzipLevel); ok && c == "gzip" && lvl != -1 {
			tc.Compression = "gzip:level=" + strconv.FormatInt(lvl, 10)
		}
	}
	if spec, ok := eff[FlushPolicy]; ok {
		tc.Policy = func() (flushpolicy.Policy, error) { return pl.FlushPolicy(spec) }
		return tc, nil
	}
	var specs []func() flushpolicy.Policy
	if n, ok := num(FlushMessages); ok && n != kafkaNever {
		if n == 1 {
			specs = append(specs, flushpolicy.EveryBatch)
		} else {
			specs = append(specs, func() flushpolicy.Policy { return flushpolicy.EveryMessages(n) })
		}
	}
	if ms, ok := num(FlushMs); ok && ms != kafkaNever {
		if ms == 0 {
			specs = append(specs, flushpolicy.EveryBatch)
		} else {
			d := msDuration(ms, math.MaxInt64)
			specs = append(specs, func() flushpolicy.Policy { return flushpolicy.EveryInterval(d) })
		}
	}
	switch len(specs) {
	case 1:
		tc.Policy = func() (flushpolicy.Policy, error) { return specs[0](), nil }
	case 2:
		tc.Policy = func() (flushpolicy.Policy, error) { return eitherPolicy{specs[0](), specs[1]()}, nil }
	}
	return tc, nil
}

// msDuration converts milliseconds to a Duration, or returns overflow when
// they do not fit.
func msDuration(ms int64, overflow time.Duration) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return overflow
	}
	return time.Duration(ms) * time.Millisecond
}

// eitherPolicy fsyncs when either of two policies asks, as Kafka does when
// both flush.messages and flush.ms are set: Flush if either says so, otherwise
// the earlier deadline.
type eitherPolicy struct{ a, b flushpolicy.Policy }

func (p eitherPolicy) Appended(ctx context.Context, in flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	da, errA := p.a.Appended(ctx, in)
	db, errB := p.b.Appended(ctx, in)
	if errA != nil {
		return da, errA
	}
	if errB != nil {
		return db, errB
	}
	if da.Flush || db.Flush {
		return flushpolicy.Decision{Flush: true}, nil
	}
	if da.FlushBy.IsZero() || (!db.FlushBy.IsZero() && db.FlushBy.Before(da.FlushBy)) {
		return db, nil
	}
	return da, nil
}

func (p eitherPolicy) Flushed(ctx context.Context, f flushpolicy.FlushInfo) error {
	errA := p.a.Flushed(ctx, f)
	errB := p.b.Flushed(ctx, f)
	if errA != nil {
		return errA
	}
	return errB
}

func (p eitherPolicy) String() string { return fmt.Sprintf("either(%v, %v)", p.a, p.b) }
