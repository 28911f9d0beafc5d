package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// DefaultCleanerBackoff is how often the log cleaner looks at the compacted
// partitions (Kafka's log.cleaner.backoff.ms).
const DefaultCleanerBackoff = 15 * time.Second

// DefaultCleanerIOMaxBytesPerSecond bounds the log cleaner's reads and
// writes unless Config says otherwise: 48 MiB/s. Kafka's default is no
// bound; on the 2-core machine this project is measured on, an unbounded
// cleaner took 20-30% of a producer's throughput (its CPU, not locks), while
// at 48 MiB/s produce stayed at 0.91x of the same load without a cleaner
// and the cleaner kept the log at a tenth of its size
// (BenchmarkProduceWhileCleaning, README "Compacted topics").
const DefaultCleanerIOMaxBytesPerSecond = 48 << 20

// cleanLogs is one pass of the log cleaner over the partitions this broker
// holds of topics with cleanup.policy=compact (and __consumer_offsets): each
// whose cleanable part is dirty enough (min.cleanable.dirty.ratio) is
// cleaned up to its high watermark. Passes run one at a time, on the
// cleaner loop's goroutine; appends and reads go on.
func (n *Node) cleanLogs() error {
	var errs []error
	for _, p := range n.localPartitions() {
		if !p.Settings().Compaction.Enabled {
			continue
		}
		if err := n.cleanLog(p); err != nil && !errors.Is(err, errClosedLog) && !errors.Is(err, partlog.ErrLogChanged) {
			errs = append(errs, fmt.Errorf("node: clean %s: %w", logs.DirName(p.Topic, p.Index), err))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) cleanLog(p *replicated) error {
	l := p.Log()
	upTo := p.highWatermark() // never past it: a follower's truncation must not cut below what was cleaned
	if first, ok := p.FirstUnstableOffset(); ok && first < upTo {
		// Nor past the first unstable offset (Kafka's cleaner stops there
		// too): a record of an open transaction may yet be aborted, and a
		// later plain record must not make an earlier one go meanwhile.
		upTo = first
	}
	cp := p.Settings().Compaction
	maxLag := cp.MaxCompactionLag
	if maxLag == math.MaxInt64 {
		maxLag = 0
	}
	c := l.Cleanable(partlog.CleanCheck{UpTo: upTo, MinCompactionLag: cp.MinCompactionLag, MaxCompactionLag: maxLag})
	if !cleanDue(c, cp.MinCleanableRatio) {
		return nil
	}
	res, err := l.Clean(n.ctx, partlog.CleanOptions{
		UpTo:             upTo,
		DeleteRetention:  cp.DeleteRetention,
		MinCompactionLag: cp.MinCompactionLag,
		Decompress:       cleanerDecompress,
		Compress:         cleanerCompress,
		Throttle:         n.cleanerThrottle,
	})
	if res.SegmentsRead > 0 {
		n.cleanerStats.record(res)
		n.logger.Info("cleaned", "partition", logs.DirName(p.Topic, p.Index), "segments", res.SegmentsRead,
			"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved,
			"tombstones_removed", res.TombstonesRemoved, "cleaner_point", res.CleanerPoint, "took", res.Duration,
			"append_lock_held", res.AppendLockHeld, "append_lock_max", res.AppendLockMax)
	}
	return err
}

// cleanDue tells whether a log is due for a pass, as Kafka's cleaner
// manager decides: some dirty bytes, and at least ratio of the cleanable
// bytes dirty (min.cleanable.dirty.ratio), or dirty records older than
// max.compaction.lag.ms.
func cleanDue(c partlog.Cleanability, ratio float64) bool {
	return c.Dirty > 0 && (c.Overdue > 0 || float64(c.Dirty) >= ratio*float64(c.Total))
}

// newCleanerThrottle returns the CleanOptions.Throttle shared by every pass
// of the broker's cleaner, holding their reads and writes together to
// bytesPerSec (Kafka log.cleaner.io.max.bytes.per.second), or nil for no
// bound (bytesPerSec <= 0). The cleaner waits on it with no lock of a log
// held, so appends go on. Its bucket holds up to 1 MiB (or a second's worth,
// if less): a pass that was idle may go that far ahead.
func newCleanerThrottle(bytesPerSec int64) func(ctx context.Context, n int) error {
	if bytesPerSec <= 0 {
		return nil
	}
	burst := int(min(bytesPerSec, 1<<20))
	lim := rate.NewLimiter(rate.Limit(bytesPerSec), burst)
	return func(ctx context.Context, n int) error {
		for n > 0 {
			k := min(n, burst)
			if err := lim.WaitN(ctx, k); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
}

// cleanerMaxSection bounds a decompressed records section the cleaner reads
// (a batch's records are at most max.message.bytes compressed; a producer's
// decompression bomb must not take the broker's memory).
const cleanerMaxSection = 64 << 20

func cleanerDecompress(c record.Codec, section []byte) ([]byte, error) {
	return codec.Decompress(context.Background(), codec.ID(c), section, cleanerMaxSection)
}

func cleanerCompress(c record.Codec, raw []byte) ([]byte, error) {
	std := codec.Standard(codec.ID(c))
	if std == nil {
		return nil, fmt.Errorf("%w: id %d", codec.ErrUnknownCodec, c)
	}
	resp, err := std.Compress(context.Background(), codec.CompressRequest{Records: raw})
	return resp.Compressed, err
}
