package mirror

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors of the package; each is wrapped with what failed.
var (
	// ErrConfig: Config.validate rejected a field.
	ErrConfig = errors.New("mirror: config")
	// ErrSource: the source cluster refused or failed a request.
	ErrSource = errors.New("mirror: source")
	// ErrTarget: the target cluster refused or failed a request.
	ErrTarget = errors.New("mirror: target")
)

// Defaults of Config.
const (
	DefaultName               = "weir-mirror"
	DefaultExclude            = `__.*`
	DefaultOffsetSyncInterval = 100
	DefaultCommitInterval     = time.Second
	DefaultRefreshInterval    = 10 * time.Second
	DefaultSyncGroupsInterval = 60 * time.Second
	DefaultBackoffMin         = 100 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
	DefaultMaxInFlight        = 20_000
	DefaultCompression        = "none"
)

// Config says what to mirror where. validate fills the defaults.
type Config struct {
	// Source and Target are seed broker addresses (host:port) of the two
	// clusters. Required.
	Source, Target []string
	// Topics is a regular expression matched against whole source topic
	// names. Required.
	Topics string
	// Exclude is a regular expression of source topics never mirrored,
	// matched against whole names. Default DefaultExclude (internal
	// topics). The mirror's own offset-syncs topic is always excluded.
	Exclude string
	// SourceAlias, when set, prefixes target topic names: source topic t
	// becomes SourceAlias+"."+t. Default none: same names.
	SourceAlias string
	// TargetAlias, when set, skips source topics named TargetAlias+".*"
	// (they came from the target), so two-way mirroring cannot loop.
	TargetAlias string
	// Name names the target group holding the mirror's source offsets
	// and, with ".offset-syncs", its offset-syncs topic. Default
	// DefaultName. Two mirrors into one target need different names.
	Name string
	// StartAtLatest starts partitions without a committed offset at the
	// source's end instead of its start (the default).
	StartAtLatest bool
	// OffsetSyncInterval is the distance in source offsets between two
	// offset syncs of a partition, and so the most a translated group
	// re-reads. Default DefaultOffsetSyncInterval.
	OffsetSyncInterval int64
	// CommitInterval is how often the acknowledged positions are
	// committed to the target. Default DefaultCommitInterval.
	CommitInterval time.Duration
	// RefreshInterval is how often source topics are listed for new
	// topics and partitions. Default DefaultRefreshInterval.
	RefreshInterval time.Duration
	// SyncGroups, when set, is a regular expression of source consumer
	// groups whose translated offsets are committed to the target's
	// same-named groups every SyncGroupsInterval. Default none.
	SyncGroups string
	// SyncGroupsInterval: see SyncGroups. Default DefaultSyncGroupsInterval.
	SyncGroupsInterval time.Duration
	// BackoffMin and BackoffMax bound the wait before a failed partition
	// is retried; it doubles with each consecutive failure. Defaults
	// DefaultBackoffMin and DefaultBackoffMax.
	BackoffMin, BackoffMax time.Duration
	// MaxInFlight is how many records of one partition may wait for the
	// target's acknowledgement before fetching it pauses, so one stuck
	// partition cannot fill the producer's buffer for the others.
	// Default DefaultMaxInFlight.
	MaxInFlight int
	// Compression is the producer's codec: none, gzip, snappy, lz4 or
	// zstd. Default DefaultCompression.
	Compression string
	// ReplicationFactor of created target topics; -1 (the default, 0 means
	// -1) lets the target broker decide.
	ReplicationFactor int16
	// ExactlyOnce makes the target producer transactional (transactional
	// id TransactionalID) and each CommitInterval one transaction holding
	// the records copied and the positions; see the package doc. The
	// target must serve transactions.
	ExactlyOnce bool
	// Forward sends source record batches to the target byte for byte
	// (their compression kept; Compression is not used) instead of
	// decoding and producing each record: see forward.go. Not with
	// ExactlyOnce, and not for compacted source topics.
	Forward bool
	// Logger gets errors (warn) and topic changes (info). Default: slog's
	// default logger.
	Logger *slog.Logger
	// Registerer, when set, gets the mirror's Collector.
	Registerer prometheus.Registerer
	// SourceOpts and TargetOpts are more franz-go options for the source
	// and target clients (TLS, SASL, client id).
	SourceOpts, TargetOpts []kgo.Opt

	topics, exclude, groups *regexp.Regexp
	codec                   kgo.CompressionCodec
}

// validate fills defaults and compiles the expressions.
func (c *Config) validate() error {
	if len(c.Source) == 0 {
		return fmt.Errorf("%w: no source bootstrap address", ErrConfig)
	}
	if len(c.Target) == 0 {
		return fmt.Errorf("%w: no target bootstrap address", ErrConfig)
	}
	if c.Topics == "" {
		return fmt.Errorf("%w: no topics expression", ErrConfig)
	}
	var err error
	if c.topics, err = anchored("topics", c.Topics); err != nil {
		return err
	}
	if c.Exclude == "" {
		c.Exclude = DefaultExclude
	}
	if c.exclude, err = anchored("exclude", c.Exclude); err != nil {
		return err
	}
	if c.SyncGroups != "" {
		if c.groups, err = anchored("sync-groups", c.SyncGroups); err != nil {
			return err
		}
	}
	for _, a := range []struct{ what, v string }{{"source alias", c.SourceAlias}, {"target alias", c.TargetAlias}} {
		if strings.ContainsAny(a.v, ". /") {
			return fmt.Errorf("%w: %s %q: no dots, spaces or slashes", ErrConfig, a.what, a.v)
		}
	}
	if c.SourceAlias != "" && c.SourceAlias == c.TargetAlias {
		return fmt.Errorf("%w: source and target alias are both %q", ErrConfig, c.SourceAlias)
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.OffsetSyncInterval == 0 {
		c.OffsetSyncInterval = DefaultOffsetSyncInterval
	}
	if c.OffsetSyncInterval < 0 {
		return fmt.Errorf("%w: offset sync interval %d: want 1 or more", ErrConfig, c.OffsetSyncInterval)
	}
	defDur := func(d *time.Duration, def time.Duration, what string) error {
		if *d == 0 {
			*d = def
		}
		if *d < 0 {
			return fmt.Errorf("%w: %s %v: want a positive duration", ErrConfig, what, *d)
		}
		return nil
	}
	if err := errors.Join(
		defDur(&c.CommitInterval, DefaultCommitInterval, "commit interval"),
		defDur(&c.RefreshInterval, DefaultRefreshInterval, "refresh interval"),
		defDur(&c.SyncGroupsInterval, DefaultSyncGroupsInterval, "sync groups interval"),
		defDur(&c.BackoffMin, DefaultBackoffMin, "minimum backoff"),
		defDur(&c.BackoffMax, DefaultBackoffMax, "maximum backoff"),
	); err != nil {
		return err
	}
	if c.BackoffMax < c.BackoffMin {
		return fmt.Errorf("%w: maximum backoff %v below the minimum %v", ErrConfig, c.BackoffMax, c.BackoffMin)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("%w: max in flight %d: want 1 or more", ErrConfig, c.MaxInFlight)
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	switch c.Compression {
	case "none":
		c.codec = kgo.NoCompression()
	case "gzip":
		c.codec = kgo.GzipCompression()
	case "snappy":
		c.codec = kgo.SnappyCompression()
	case "lz4":
		c.codec = kgo.Lz4Compression()
	case "zstd":
		c.codec = kgo.ZstdCompression()
	default:
		return fmt.Errorf("%w: compression %q: want none, gzip, snappy, lz4 or zstd", ErrConfig, c.Compression)
	}
	if c.Forward && c.ExactlyOnce {
		return fmt.Errorf("%w: forwarding batches is not built for exactly-once mode", ErrConfig)
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func anchored(what, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %w", ErrConfig, what, expr, err)
	}
	return re, nil
}

// SyncTopic is the name of the offset-syncs topic on the target.
func (c *Config) SyncTopic() string {
	name := c.Name
	if name == "" {
		name = DefaultName
	}
	return name + ".offset-syncs"
}

// TransactionalID is the target producer's transactional id in
// exactly-once mode: derived from Name, so a restarted mirror fences its
// predecessor (and two mirrors with one Name fence each other).
func (c *Config) TransactionalID() string {
	name := c.Name
	if name == "" {
		name = DefaultName
	}
	return name + ".txn"
}

// TargetTopic is the target name of source topic t.
func (c *Config) TargetTopic(t string) string {
	if c.SourceAlias == "" {
		return t
	}
	return c.SourceAlias + "." + t
}

// mirrored reports whether source topic t is to be mirrored.
func (c *Config) mirrored(t string) bool {
	if !c.topics.MatchString(t) || c.exclude.MatchString(t) || t == c.SyncTopic() {
		return false
	}
	if c.TargetAlias != "" && strings.HasPrefix(t, c.TargetAlias+".") {
		return false
	}
	return true
}
