package logs

import (
	"fmt"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/flushpolicy"
)

// ConfigFor returns the PartitionConfig of every partition of a topic whose
// effective configs (topicconfig.Resolve of configs topicconfig.Normalize
// accepted) are eff: the log settings and durable acks topicconfig.Parse
// maps them to, the flush policy pl builds at each Open, and, for a
// compression.type other than producer, one recompressor for all the
// topic's partitions (clk is its retry clock), which the caller closes after
// their logs. The codec is built on first use, so a plugin that is gone
// fails appends, not ConfigFor.
func ConfigFor(eff map[string]string, pl topicconfig.Plugins, clk clock.Clock) (PartitionConfig, error) {
	tc, err := topicconfig.Parse(eff, pl)
	if err != nil {
		return PartitionConfig{}, err
	}
	pc := PartitionConfig{Log: tc.Log, DurableAcks: tc.DurableAcks, MinInsyncReplicas: tc.MinInsyncReplicas,
		Compaction: Compaction{Enabled: tc.Compact, DeleteRetention: tc.DeleteRetention, MinCleanableRatio: tc.MinCleanableRatio,
			MinCompactionLag: tc.MinCompactionLag, MaxCompactionLag: tc.MaxCompactionLag}}
	if tc.Policy != nil {
		build, spec := tc.Policy, eff[topicconfig.FlushPolicy]
		pc.FlushPolicy = func() (flushpolicy.Policy, error) {
			p, err := build()
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %w", topicconfig.FlushPolicy, spec, err)
			}
			return p, nil
		}
	}
	if spec := tc.Compression; spec != "" {
		maxBatch := tc.Log.MaxBatchBytes
		if maxBatch == 0 {
			maxBatch = partlog.DefaultMaxBatchBytes
		}
		pc.Recompress = recompress.New(spec, func() (codec.Codec, error) { return pl.Codec(spec) }, clk.Now, maxBatch)
	}
	return pc, nil
}
