package mirror

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadStatus reports a mirror's progress from the two clusters alone (it
// needs no running mirror): for each partition of the source topics cfg
// mirrors, the position committed in the target group cfg.Name, the source
// end, the lag in records, and the lag in seconds: the age of the first
// source record not yet mirrored, read with one fetch per lagging
// partition (0 where none lags, -1 where that record could not be read
// within the context). Counters of a running mirror (records, errors) are
// in its metrics, not here.
func ReadStatus(ctx context.Context, cfg Config) ([]PartitionStatus, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	src, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Source...)}, cfg.SourceOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w client: %w", ErrSource, err)
	}
	defer src.Close()
	tgt, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Target...)}, cfg.TargetOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w client: %w", ErrTarget, err)
	}
	defer tgt.Close()
	srcAdm, tgtAdm := kadm.NewClient(src), kadm.NewClient(tgt)

	details, err := srcAdm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list topics: %w", ErrSource, err)
	}
	var topics []string
	for _, d := range details.Sorted() {
		if d.Err == nil && cfg.mirrored(d.Topic) {
			topics = append(topics, d.Topic)
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	ends, err := srcAdm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("%w: end offsets: %w", ErrSource, err)
	}
	committed, err := tgtAdm.FetchOffsets(ctx, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: positions of group %s: %w", ErrTarget, cfg.Name, err)
	}
	var out []PartitionStatus
	lagging := map[string]map[int32]kgo.Offset{}
	for _, t := range topics {
		for _, p := range details[t].Partitions.Numbers() {
			s := PartitionStatus{Topic: t, Partition: p, TargetTopic: cfg.TargetTopic(t), Next: -1, Committed: -1, End: -1}
			if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
				s.End = e.Offset
			}
			if c, ok := committed.Lookup(s.TargetTopic, p); ok && c.Err == nil && c.At >= 0 {
				s.Next, s.Committed = c.At, c.At
			}
			switch {
			case s.Committed < 0:
				s.LagRecords = max(0, s.End)
			default:
				s.LagRecords = max(0, s.End-s.Committed)
			}
			if s.LagRecords > 0 {
				if lagging[t] == nil {
					lagging[t] = map[int32]kgo.Offset{}
				}
				at := kgo.NewOffset().AtStart()
				if s.Committed >= 0 {
					at = kgo.NewOffset().At(s.Committed)
				}
				lagging[t][p] = at
				s.LagSeconds = -1
			}
			out = append(out, s)
		}
	}
	if len(lagging) > 0 {
		first := firstTimestamps(ctx, cfg, lagging)
		now := time.Now()
		for i := range out {
			if ts, ok := first[topicPartition{out[i].Topic, out[i].Partition}]; ok {
				out[i].LagSeconds = max(0, now.Sub(ts).Seconds())
			}
		}
	}
	return out, nil
}

// firstTimestamps returns the timestamp of the first record at or after
// each given position, for those read before ctx ends.
func firstTimestamps(ctx context.Context, cfg Config, at map[string]map[int32]kgo.Offset) map[topicPartition]time.Time {
	want := 0
	for _, ps := range at {
		want += len(ps)
	}
	out := make(map[topicPartition]time.Time, want)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Source...), kgo.ConsumePartitions(at),
		kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxWait(time.Second)}, cfg.SourceOpts...)...)
	if err != nil {
		return out
	}
	defer cl.Close()
	for len(out) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			tp := topicPartition{fp.Topic, fp.Partition}
			if _, ok := out[tp]; !ok {
				out[tp] = fp.Records[0].Timestamp
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
	}
	return out
}
