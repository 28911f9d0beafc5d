package logs

import (
	"fmt"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// Settings are what a partition's topic configs say beyond its log's
// settings: read them through Partition.Settings, which returns the value
// the last Reconfigure left (never modify it).
type Settings struct {
	// DurableAcks (weir.durable.acks): Append returns only after the fsync
	// that covers the appended batches.
	DurableAcks bool
	// MinInsyncReplicas (min.insync.replicas): an acks=all produce needs this
	// many in-sync replicas. One node has one, so above 1 such produces fail
	// with NOT_ENOUGH_REPLICAS, as Kafka's would with one replica left.
	MinInsyncReplicas int32
	// Compaction: whether and how the log cleaner compacts the log.
	Compaction Compaction

	maxBatch   int                      // the log's MaxBatchBytes, to validate batches Append does not pass to the log
	recompress *recompress.Recompressor // compression.type other than producer; nil keeps batches as produced
}

func settingsOf(pc PartitionConfig) *Settings {
	mb := pc.Log.MaxBatchBytes
	if mb == 0 {
		mb = partlog.DefaultMaxBatchBytes
	}
	return &Settings{DurableAcks: pc.DurableAcks, MinInsyncReplicas: max(pc.MinInsyncReplicas, 1),
		Compaction: pc.Compaction, maxBatch: mb, recompress: pc.Recompress}
}

// Settings returns the partition's settings as the last Reconfigure (or
// Open) left them.
func (p *Partition) Settings() *Settings { return p.settings.Load() }

// Reconfigure applies a topic's altered configs to the open partition: the
// log's settings (partlog's Reconfigure: segment size and age, retention,
// batch limit, flush policy, built here from pc.FlushPolicy, falling back to
// an fsync per append if it cannot be built, as Open does) and the
// partition's own (durable acks, min.insync.replicas, compaction,
// recompression). Appends in progress finish with the settings they began
// with; later ones see the new. pc.Recompress replaces the partition's
// recompressor; the caller closes the old one once no partition uses it
// (after every append in progress: at the topic's close is simplest).
func (p *Partition) Reconfigure(pc PartitionConfig) error {
	cfg := pc.Log
	if pc.FlushPolicy != nil {
		var err error
		if cfg.FlushPolicy, err = pc.FlushPolicy(); err != nil {
			p.snaps.logger.Error("flush policy unavailable; fsyncing every append", "err", err)
			cfg.FlushPolicy = flushpolicy.EveryBatch()
		}
	}
	if err := p.log.Reconfigure(cfg); err != nil {
		return fmt.Errorf("logs: reconfigure %s: %w", DirName(p.Topic, p.Index), err)
	}
	p.settings.Store(settingsOf(pc))
	return nil
}
