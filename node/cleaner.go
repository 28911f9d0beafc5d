package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// DefaultCleanerBackoff is how often the log cleaner looks at the compacted
// partitions (Kafka's log.cleaner.backoff.ms).
const DefaultCleanerBackoff = 15 * time.Second

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
	dirty, total := l.CleanableRatio(upTo)
	if total == 0 || float64(dirty) < p.Settings().Compaction.MinCleanableRatio*float64(total) || dirty == 0 {
		return nil
	}
	res, err := l.Clean(n.ctx, partlog.CleanOptions{
		UpTo:            upTo,
		DeleteRetention: p.Settings().Compaction.DeleteRetention,
		Decompress:      cleanerDecompress,
		Compress:        cleanerCompress,
	})
	if res.SegmentsRead > 0 {
		n.cleanerStats.record(res)
		n.logger.Info("cleaned", "partition", logs.DirName(p.Topic, p.Index), "segments", res.SegmentsRead,
			"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved,
			"tombstones_removed", res.TombstonesRemoved, "cleaner_point", res.CleanerPoint, "took", res.Duration)
	}
	return err
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
