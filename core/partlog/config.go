package partlog

import (
	"fmt"
	"github.com/weir-broker/weir/core/clock"
	"io"
	"log/slog"
	"time"

	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Config configures a partition log. The zero value is valid: validate fills
// the defaults named on each field (Kafka's, where Kafka has one).
type Config struct {
	// SegmentBytes: roll to a new segment when an append would take the
	// active one past this size. Default 1 GiB (Kafka segment.bytes); at most
	// 2 GiB-1, since index positions are 32-bit.
	SegmentBytes int64
	// SegmentAge: roll when the active segment is not empty and was created
	// this long ago (wall time, kept across restarts). Default 7 days (Kafka
	// segment.ms); negative disables.
	SegmentAge time.Duration
	// IndexIntervalBytes: log bytes between two offset index entries.
	// Default 4096 (Kafka index.interval.bytes).
	IndexIntervalBytes int64
	// RetentionBytes: delete the oldest segments while the log stays at least
	// this large without them. Default -1, unlimited (Kafka retention.bytes).
	RetentionBytes int64
	// RetentionAge: delete segments whose newest record is older than this.
	// Default 7 days (Kafka retention.ms); negative keeps data forever.
	RetentionAge time.Duration
	// MaxBatchBytes: the largest batch an append accepts, header included.
	// Default 1048588 (Kafka message.max.bytes).
	MaxBatchBytes int
	// FlushPolicy decides when the log fsyncs. Default flushpolicy.Never():
	// the OS writes back, and the log fsyncs only when a segment rolls, on
	// Flush calls (durable acks) and on Close.
	FlushPolicy flushpolicy.Policy
	// RecoveryBackoff: after a write or fsync fails, appends are refused
	// (ErrFailed) for this long; then the next append first recovers the log
	// in place (see the package doc). Each failed attempt doubles the wait,
	// up to MaxRecoveryBackoff. Default DefaultRecoveryBackoff; negative
	// disables automatic recovery (Recover, or a reopen, still recovers).
	RecoveryBackoff time.Duration
	// Clock tells the time and runs flush deadlines. Default: the system clock.
	Clock Clock
	// Logger receives recovery and failure reports. Default: discarded.
	Logger *slog.Logger
	// CutHook, when set, hears of every cut of the log (see CutHook).
	// Default: none.
	CutHook CutHook
	// Files bounds the descriptors the segment files hold, shared by the
	// logs of a broker (package filecache). Default: no bound.
	Files *filecache.Cache
}

// CutHook is told after records were removed from the end of the log,
// before anything can be appended at their offsets: after Truncate cut
// records (end: the new log end), after Reset (end -1: no record of the old
// log remains), and at the end of Open and of every recovery in place,
// whether or not they cut (end: the log end, or -1 when they finished an
// interrupted Reset). It is for a layer keeping state about offsets in the
// partition directory (package logs' producer snapshots), which must drop
// what it keeps about offsets past end; so AfterCut must be idempotent. It
// runs with the log's locks held and must not call the log. An error fails
// the log (and Open): the recovery calls it again before appends resume,
// and a Reset keeps its commit point until it succeeded.
type CutHook interface {
	AfterCut(end int64) error
}

// Defaults, exported for documentation and for callers building configs.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes = 4096
	DefaultRetentionAge       = 7 * 24 * time.Hour
	DefaultMaxBatchBytes      = 1048588
	DefaultRecoveryBackoff    = time.Second
)

func (c Config) validate() (Config, error) {
	switch {
	case c.SegmentBytes == 0:
		c.SegmentBytes = DefaultSegmentBytes
	case c.SegmentBytes < 1024 || c.SegmentBytes > segment.MaxSize:
		return c, fmt.Errorf("partlog: SegmentBytes %d outside [1024, %d]", c.SegmentBytes, int64(segment.MaxSize))
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	switch {
	case c.IndexIntervalBytes == 0:
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	case c.IndexIntervalBytes < 0:
		return c, fmt.Errorf("partlog: negative IndexIntervalBytes %d", c.IndexIntervalBytes)
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = -1
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = DefaultRetentionAge
	}
	switch {
	case c.MaxBatchBytes == 0:
		c.MaxBatchBytes = DefaultMaxBatchBytes
	case c.MaxBatchBytes < 61 || int64(c.MaxBatchBytes) > segment.MaxSize:
		return c, fmt.Errorf("partlog: MaxBatchBytes %d outside [61, %d]", c.MaxBatchBytes, int64(segment.MaxSize))
	}
	if c.RecoveryBackoff == 0 {
		c.RecoveryBackoff = DefaultRecoveryBackoff
	}
	if c.FlushPolicy == nil {
		c.FlushPolicy = flushpolicy.Never()
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// Clock is the log's source of time (package clock; tests use clocktest).
type Clock = clock.Clock

// Timer is a pending Clock.AfterFunc.
type Timer = clock.Timer

// SystemClock is the real clock.
type SystemClock = clock.System
