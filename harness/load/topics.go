package load

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitInSync polls Metadata until every partition of the topics has a
// leader and replicas replicas, all in its ISR, or timeout passes: a
// partition whose followers have not joined yet would make acks=all wait
// for them, and the first records of the window would measure the
// cluster's start rather than its steady state. Every seed broker is
// asked, since each answers from its own view of the cluster, which may
// trail the others' for a moment. Each miss names the partition, what it
// has and which broker said so.
func waitInSync(parent context.Context, cl *kgo.Client, topics []string, partitions, replicas int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := notInSync(ctx, cl, topics, partitions, replicas)
		if err == nil && len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return err
			}
			if err != nil {
				return fmt.Errorf("%w: topics not in sync after %v: Metadata: %w", ErrTopics, timeout, err)
			}
			if len(missing) > 5 {
				missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
			}
			return fmt.Errorf("%w: not every partition has a leader and %d replicas in sync after %v: %s",
				ErrTopics, replicas, timeout, strings.Join(missing, "; "))
		case <-tick.C:
		}
	}
}

// notInSync asks each seed broker for the topics' metadata and describes
// each partition that lacks a leader or a replica in its ISR there.
func notInSync(ctx context.Context, cl *kgo.Client, topics []string, partitions, replicas int) ([]string, error) {
	var missing []string
	for i, b := range cl.SeedBrokers() {
		resp, err := b.Request(ctx, metadataRequest(topics))
		if err != nil {
			return nil, fmt.Errorf("seed broker %d: %w", i+1, err)
		}
		for _, m := range notInSyncIn(resp.(*kmsg.MetadataResponse), topics, partitions, replicas) {
			missing = append(missing, fmt.Sprintf("%s, says seed broker %d", m, i+1))
		}
	}
	return missing, nil
}

// notInSyncIn describes each partition of the topics a Metadata response
// shows without a leader or a replica in its ISR.
func notInSyncIn(resp *kmsg.MetadataResponse, topics []string, partitions, replicas int) []string {
	var missing []string
	seen := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic == nil || !slices.Contains(topics, *t.Topic) {
			continue
		}
		name := *t.Topic
		seen[name] = true
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			missing = append(missing, name+": "+err.Error())
			continue
		}
		if len(t.Partitions) != partitions {
			missing = append(missing, fmt.Sprintf("%s: %d of %d partitions", name, len(t.Partitions), partitions))
		}
		for _, p := range t.Partitions {
			if p.Leader >= 0 && len(p.Replicas) == replicas && len(p.ISR) == replicas && kerr.ErrorForCode(p.ErrorCode) == nil {
				continue
			}
			missing = append(missing, fmt.Sprintf("%s/%d: leader %d, replicas %v, ISR %v", name, p.Partition, p.Leader, p.Replicas, p.ISR))
		}
	}
	for _, name := range topics {
		if !seen[name] {
			missing = append(missing, name+": not listed")
		}
	}
	return missing
}

// Metadata asks the cluster (any broker the client picks) for the named
// topics' metadata: their partitions' leaders, replicas and ISRs.
func Metadata(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	return metadataRequest(topics).RequestWith(ctx, cl)
}

func metadataRequest(topics []string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}
