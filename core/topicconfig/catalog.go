package topicconfig

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/segment"
)

// The topic config keys Kafka defines (TopicConfig, LogConfig, QuotaConfig)
// that weir accepts; those it honours are in config.go.
const (
	SegmentJitterMs                 = "segment.jitter.ms"
	SegmentIndexBytes               = "segment.index.bytes"
	FileDeleteDelayMs               = "file.delete.delay.ms"
	CompressionGzipLevel            = "compression.gzip.level"
	CompressionLZ4Level             = "compression.lz4.level"
	CompressionZstdLevel            = "compression.zstd.level"
	Preallocate                     = "preallocate"
	MessageFormatVersion            = "message.format.version"
	MessageDownconversionEnable     = "message.downconversion.enable"
	MessageTimestampType            = "message.timestamp.type"
	MessageTimestampDifferenceMaxMs = "message.timestamp.difference.max.ms"
	MessageTimestampBeforeMaxMs     = "message.timestamp.before.max.ms"
	MessageTimestampAfterMaxMs      = "message.timestamp.after.max.ms"
	LeaderThrottledReplicas         = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas       = "follower.replication.throttled.replicas"
	RemoteStorageEnable             = "remote.storage.enable"
	LocalRetentionMs                = "local.retention.ms"
	LocalRetentionBytes             = "local.retention.bytes"
	RemoteLogCopyDisable            = "remote.log.copy.disable"
	RemoteLogDeleteOnDisable        = "remote.log.delete.on.disable"
)

// Type is a config's type as DescribeConfigs v3+ reports it (Kafka's
// ConfigDef.Type, by its wire number).
type Type int8

const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// Key describes one topic config key.
type Key struct {
	Name string
	Type Type
	// Default is Kafka's default, as DescribeConfigs shows it; nil for a key
	// without one (weir.flush.policy: the flush.* keys decide).
	Default *string
	// Broker is the broker config that sets the key's default for every
	// topic (Kafka's first synonym: log.retention.ms for retention.ms), as
	// AlterConfigs on a BROKER resource names it; "" when there is none.
	Broker string
	// Honoured: weir acts on the key. The others are accepted with Kafka's
	// validation, stored and described, and change nothing.
	Honoured bool
	// Doc is what DescribeConfigs v3+ reports as documentation; for a key
	// weir ignores it says so first.
	Doc string

	check func(string) error // nil: checked by pluginCheckers
}

// ignoredDoc opens the documentation of keys weir does not act on.
const ignoredDoc = "Accepted for compatibility and ignored by weir"

func str(s string) *string { return &s }

var (
	maxLong = strconv.FormatInt(math.MaxInt64, 10)
	// messageFormatRe is Kafka's ApiVersion syntax ("2.8", "3.0-IV1").
	messageFormatRe = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?$`)
)

// catalog is every key a topic accepts. Keep it sorted by name.
var catalog = []Key{
	{Name: CleanupPolicy, Type: TypeList, Default: str(CleanupDelete), Broker: "log.cleanup.policy", Honoured: true,
		Doc:   "delete: old segments go by retention.ms and retention.bytes; compact: the log cleaner keeps the latest record of every key (retention off); compact,delete: both.",
		check: func(v string) error { _, _, err := parseCleanup(v); return err }},
	{Name: CompressionGzipLevel, Type: TypeInt, Default: str("-1"), Broker: CompressionGzipLevel, Honoured: true,
		Doc:   "The gzip level used when compression.type=gzip: 1..9, or -1 for the codec's default (6).",
		check: intOr(-1, 1, 9)},
	{Name: CompressionLZ4Level, Type: TypeInt, Default: str("9"), Broker: CompressionLZ4Level,
		Doc:   ignoredDoc + ": Kafka's lz4 levels (1..17) do not map onto weir's lz4 codec; name a level in compression.type instead (lz4:level=0..9).",
		check: intRange(1, 17)},
	{Name: CompressionType, Type: TypeString, Default: str(CompressionProducer), Broker: CompressionType, Honoured: true,
		Doc: "The codec batches are stored with: producer keeps them as produced; uncompressed, gzip, snappy, lz4 or zstd recompress them; weir also takes a codec spec (zstd:level=4) or a codec plugin."},
	{Name: CompressionZstdLevel, Type: TypeInt, Default: str("3"), Broker: CompressionZstdLevel,
		Doc:   ignoredDoc + ": Kafka's zstd levels (-131072..22) do not map onto weir's zstd codec; name a level in compression.type instead (zstd:level=1..4).",
		check: intRange(-131072, 22)},
	{Name: DeleteRetentionMs, Type: TypeLong, Default: str("86400000"), Broker: "log.cleaner.delete.retention.ms", Honoured: true,
		Doc:   "How long the cleaner keeps a tombstone of a compacted topic after it first cleaned it, in ms.",
		check: intRange(0, math.MaxInt64)},
	{Name: FileDeleteDelayMs, Type: TypeLong, Default: str("60000"), Broker: "log.segment.delete.delay.ms",
		Doc:   ignoredDoc + ": weir deletes a segment as soon as retention lets it go (readers holding it keep their open file).",
		check: intRange(0, math.MaxInt64)},
	{Name: FlushMessages, Type: TypeLong, Default: str(maxLong), Broker: "log.flush.interval.messages", Honoured: true,
		Doc:   "fsync the log once this many messages were appended since the last fsync (the default: never, the OS writes back).",
		check: intRange(1, math.MaxInt64)},
	{Name: FlushMs, Type: TypeLong, Default: str(maxLong), Broker: "log.flush.interval.ms", Honoured: true,
		Doc:   "fsync the log once the oldest unflushed message is this many ms old (the default: never).",
		check: intRange(0, math.MaxInt64)},
	{Name: FollowerThrottledReplicas, Type: TypeList, Default: str(""),
		Doc:   ignoredDoc + ": replication is not throttled. Kafka: the replicas (partition:broker, or *) whose follower fetches are throttled.",
		check: throttledReplicas},
	{Name: IndexIntervalBytes, Type: TypeInt, Default: str("4096"), Broker: "log.index.interval.bytes", Honoured: true,
		Doc:   "Log bytes between two entries of the offset index.",
		check: intRange(0, math.MaxInt32)},
	{Name: LeaderThrottledReplicas, Type: TypeList, Default: str(""),
		Doc:   ignoredDoc + ": replication is not throttled. Kafka: the replicas (partition:broker, or *) whose leader side is throttled.",
		check: throttledReplicas},
	{Name: LocalRetentionBytes, Type: TypeLong, Default: str("-2"), Broker: "log.local.retention.bytes",
		Doc:   ignoredDoc + ": weir has no tiered storage. Kafka: local retention by size of a tiered topic (-2: retention.bytes).",
		check: intRange(-2, math.MaxInt64)},
	{Name: LocalRetentionMs, Type: TypeLong, Default: str("-2"), Broker: "log.local.retention.ms",
		Doc:   ignoredDoc + ": weir has no tiered storage. Kafka: local retention by time of a tiered topic (-2: retention.ms).",
		check: intRange(-2, math.MaxInt64)},
	{Name: MaxCompactionLagMs, Type: TypeLong, Default: str(maxLong), Broker: "log.cleaner.max.compaction.lag.ms", Honoured: true,
		Doc:   "The longest a record of a compacted topic stays uncompacted, in ms: a log with older dirty records is cleaned whatever its dirty ratio.",
		check: intRange(1, math.MaxInt64)},
	{Name: MaxMessageBytes, Type: TypeInt, Default: str("1048588"), Broker: "message.max.bytes", Honoured: true,
		Doc:   "The largest record batch the topic accepts, in bytes (weir's floor is 61, the smallest batch).",
		check: intRange(record.MinBatchSize, segment.MaxSize)},
	{Name: MessageDownconversionEnable, Type: TypeBoolean, Default: str("true"), Broker: "log.message.downconversion.enable",
		Doc:   ignoredDoc + ": weir serves record batches v2 only (Fetch v4+), so it never down-converts.",
		check: boolCheck},
	{Name: MessageFormatVersion, Type: TypeString, Default: str("3.0-IV1"), Broker: "log.message.format.version",
		Doc: ignoredDoc + ": weir stores record batches v2 whatever this says (deprecated in Kafka 3, gone in 4).",
		check: func(v string) error {
			if !messageFormatRe.MatchString(v) {
				return fmt.Errorf("must be a Kafka version such as 2.8 or 3.0-IV1")
			}
			return nil
		}},
	{Name: MessageTimestampAfterMaxMs, Type: TypeLong, Default: str(maxLong), Broker: "log.message.timestamp.after.max.ms",
		Doc:   ignoredDoc + ": timestamps are not checked. Kafka: how far in the future a CreateTime timestamp may be.",
		check: intRange(0, math.MaxInt64)},
	{Name: MessageTimestampBeforeMaxMs, Type: TypeLong, Default: str(maxLong), Broker: "log.message.timestamp.before.max.ms",
		Doc:   ignoredDoc + ": timestamps are not checked. Kafka: how far in the past a CreateTime timestamp may be.",
		check: intRange(0, math.MaxInt64)},
	{Name: MessageTimestampDifferenceMaxMs, Type: TypeLong, Default: str(maxLong), Broker: "log.message.timestamp.difference.max.ms",
		Doc:   ignoredDoc + ": timestamps are not checked (deprecated in Kafka 3.6 for the before/after keys).",
		check: intRange(0, math.MaxInt64)},
	{Name: MessageTimestampType, Type: TypeString, Default: str("CreateTime"), Broker: "log.message.timestamp.type",
		Doc: ignoredDoc + ": batches keep the producer's CreateTime. Kafka: CreateTime or LogAppendTime.",
		check: func(v string) error {
			if v != "CreateTime" && v != "LogAppendTime" {
				return fmt.Errorf("must be CreateTime or LogAppendTime")
			}
			return nil
		}},
	{Name: MinCleanableDirtyRatio, Type: TypeDouble, Default: str("0.5"), Broker: "log.cleaner.min.cleanable.ratio", Honoured: true,
		Doc: "The cleaner cleans a compacted log once this share of it (0..1) was never cleaned.",
		check: func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("must be a number in [0, 1]")
			}
			return nil
		}},
	{Name: MinCompactionLagMs, Type: TypeLong, Default: str("0"), Broker: "log.cleaner.min.compaction.lag.ms", Honoured: true,
		Doc:   "The shortest a record of a compacted topic stays uncompacted, in ms.",
		check: intRange(0, math.MaxInt64)},
	{Name: MinInsyncReplicas, Type: TypeInt, Default: str("1"), Broker: MinInsyncReplicas, Honoured: true,
		Doc:   "How many in-sync replicas an acks=all produce needs; fewer is NOT_ENOUGH_REPLICAS.",
		check: intRange(1, math.MaxInt32)},
	{Name: Preallocate, Type: TypeBoolean, Default: str("false"), Broker: "log.preallocate",
		Doc:   ignoredDoc + ": segment files grow as they are written.",
		check: boolCheck},
	{Name: RemoteLogCopyDisable, Type: TypeBoolean, Default: str("false"),
		Doc:   ignoredDoc + ": weir has no tiered storage.",
		check: boolCheck},
	{Name: RemoteLogDeleteOnDisable, Type: TypeBoolean, Default: str("false"),
		Doc:   ignoredDoc + ": weir has no tiered storage.",
		check: boolCheck},
	{Name: RemoteStorageEnable, Type: TypeBoolean, Default: str("false"),
		Doc: ignoredDoc + ": weir has no tiered storage; true is refused.",
		check: func(v string) error {
			b, err := parseBool(v)
			if err == nil && b {
				return fmt.Errorf("weir has no tiered storage: only false")
			}
			return err
		}},
	{Name: RetentionBytes, Type: TypeLong, Default: str("-1"), Broker: "log.retention.bytes", Honoured: true,
		Doc:   "Delete the oldest segments while the partition stays at least this large without them; negative: no limit.",
		check: intRange(math.MinInt64, math.MaxInt64)},
	{Name: RetentionMs, Type: TypeLong, Default: str("604800000"), Broker: "log.retention.ms", Honoured: true,
		Doc:   "Delete segments whose newest record is older than this, in ms; -1 keeps data forever.",
		check: intRange(-1, math.MaxInt64)},
	{Name: SegmentBytes, Type: TypeInt, Default: str("1073741824"), Broker: "log.segment.bytes", Honoured: true,
		Doc:   "Roll to a new segment when the active one would grow past this size (weir's floor is 1024).",
		check: intRange(1024, segment.MaxSize)},
	{Name: SegmentIndexBytes, Type: TypeInt, Default: str("10485760"), Broker: "log.index.size.max.bytes",
		Doc:   ignoredDoc + ": weir's indexes grow with their segment instead of being preallocated.",
		check: intRange(4, math.MaxInt32)},
	{Name: SegmentJitterMs, Type: TypeLong, Default: str("0"), Broker: "log.roll.jitter.ms",
		Doc:   ignoredDoc + ": segments roll at segment.ms exactly.",
		check: intRange(0, math.MaxInt64)},
	{Name: SegmentMs, Type: TypeLong, Default: str("604800000"), Broker: "log.roll.ms", Honoured: true,
		Doc:   "Roll the active segment once it is not empty and was created this many ms ago.",
		check: intRange(1, math.MaxInt64)},
	{Name: UncleanLeaderElection, Type: TypeBoolean, Default: str("false"), Broker: UncleanLeaderElection, Honoured: true,
		Doc:   "Let the controller elect a replica that is not in sync when no in-sync one is live (losing data).",
		check: boolCheck},
	{Name: DurableAcks, Type: TypeBoolean, Default: str("false"), Broker: DurableAcks, Honoured: true,
		Doc:   "weir's own: acks wait for the fsync that covers the batch (group commit), not only the page cache.",
		check: boolCheck},
	{Name: FlushPolicy, Type: TypeString, Broker: FlushPolicy, Honoured: true,
		Doc: "weir's own: a flush policy spec (every-batch, messages:n=1000, interval:ms=50, or a plugin); wins over flush.messages and flush.ms."},
}

// byName indexes catalog; byBroker maps broker config names to topic keys.
var (
	byName   = map[string]*Key{}
	byBroker = map[string]string{}
)

func init() {
	for i := range catalog {
		k := &catalog[i]
		if i > 0 && !(strings.HasPrefix(k.Name, "weir.") || catalog[i-1].Name < k.Name) {
			panic("topicconfig: catalog not sorted at " + k.Name)
		}
		byName[k.Name] = k
		if k.Broker != "" {
			byBroker[k.Broker] = k.Name
		}
		if k.check == nil && pluginCheckers[k.Name] == nil {
			panic("topicconfig: no check for " + k.Name)
		}
	}
}

// Catalog returns every key a topic accepts (a copy), sorted by name with
// weir's own keys last.
func Catalog() []Key { return slices.Clone(catalog) }

// Lookup returns the named key.
func Lookup(name string) (Key, bool) {
	k, ok := byName[name]
	if !ok {
		return Key{}, false
	}
	return *k, true
}

// TopicKeyOf returns the topic key a broker config sets the default of
// (retention.ms for log.retention.ms).
func TopicKeyOf(broker string) (string, bool) {
	k, ok := byBroker[broker]
	return k, ok
}

// ErrInvalidBrokerConfig: a broker config weir cannot set dynamically (or
// does not know), or a value out of range; the error names both.
var ErrInvalidBrokerConfig = fmt.Errorf("%w (broker)", ErrInvalidConfig)

// BrokerToTopic maps dynamic broker configs (Kafka's names: log.retention.ms)
// onto the topic keys they default (retention.ms), validating every value as
// the topic key's (Normalize). A key that is not a topic default, or a bad
// value, is ErrInvalidBrokerConfig (it wraps ErrInvalidConfig) naming the
// broker key and value.
func BrokerToTopic(m map[string]string, pl Plugins) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for _, b := range slices.Sorted(maps.Keys(m)) {
		k, ok := byBroker[b]
		if !ok {
			return nil, fmt.Errorf("%w: %s=%q: not a broker config weir can change dynamically (those that default topic configs: %s)",
				ErrInvalidBrokerConfig, b, m[b], strings.Join(BrokerKeys(), ", "))
		}
		one, err := Normalize(map[string]string{k: m[b]}, pl)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidBrokerConfig, b, err)
		}
		out[k] = one[k]
	}
	if err := checkCombination(out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBrokerConfig, err)
	}
	return out, nil
}

// BrokerKeys lists the broker configs that default topic configs, sorted.
func BrokerKeys() []string { return slices.Sorted(maps.Keys(byBroker)) }

func boolCheck(v string) error {
	_, err := parseBool(v)
	return err
}

// intOr accepts special, or an integer in [lo, hi].
func intOr(special, lo, hi int64) func(string) error {
	in := intRange(lo, hi)
	return func(v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n == special {
			return nil
		}
		if in(v) != nil {
			return fmt.Errorf("must be %d or an integer in [%d, %d]", special, lo, hi)
		}
		return nil
	}
}

// throttledReplicas is Kafka's ThrottledReplicaListValidator: empty, "*",
// or partition:broker pairs, comma-separated.
func throttledReplicas(v string) error {
	if v == "" || v == "*" {
		return nil
	}
	for item := range strings.SplitSeq(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		_, perr := strconv.ParseUint(strings.TrimSpace(p), 10, 31)
		_, berr := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("must be *, or partition:broker pairs separated by commas")
		}
	}
	return nil
}

// checkCombination checks what one key's range cannot: Kafka's
// min.compaction.lag.ms <= max.compaction.lag.ms, for the keys present.
func checkCombination(m map[string]string) error {
	lo, okLo := m[MinCompactionLagMs]
	hi, okHi := m[MaxCompactionLagMs]
	if okLo && okHi {
		l, _ := strconv.ParseInt(lo, 10, 64)
		h, _ := strconv.ParseInt(hi, 10, 64)
		if l > h {
			return fmt.Errorf("%w: %s=%q is above %s=%q", ErrInvalidConfig, MinCompactionLagMs, lo, MaxCompactionLagMs, hi)
		}
	}
	return nil
}

// CheckEffective checks the effective configs of a topic (its own over the
// broker defaults, see Resolve) as a whole: what the keys allow one by one
// but not together (min.compaction.lag.ms above max.compaction.lag.ms).
func CheckEffective(eff map[string]string) error { return checkCombination(eff) }
