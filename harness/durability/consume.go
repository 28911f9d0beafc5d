package durability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// seenRecord is a record a consumer was served during a cluster run.
type seenRecord struct {
	offset int64
	id     uint64
}

// consumer reads every partition from the start while the faults strike,
// recording what it was served, so the check can tell whether a consumer
// ever saw a record that was later truncated (read above the high
// watermark, or from a leader that lost it).
type consumer struct {
	cl     *kgo.Client
	topics []string
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen map[tp][]seenRecord
}

func newConsumer(bootstrap string, topics []string) (*consumer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), clientMetadataMinAge)
	if err != nil {
		return nil, fmt.Errorf("%w: consumer: %w", ErrClient, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, topics: topics, cancel: cancel, done: make(chan struct{}), seen: map[tp][]seenRecord{}}
	go c.run(ctx)
	return c, nil
}

func (c *consumer) run(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		// Fetch errors are the faults' doing; the client retries.
		fs.EachRecord(func(r *kgo.Record) {
			id, _, err := open(r.Value)
			if err != nil {
				return // corrupt: the read-back counts those
			}
			k := tp{int32(slices.Index(c.topics, r.Topic)), r.Partition}
			c.mu.Lock()
			c.seen[k] = append(c.seen[k], seenRecord{offset: r.Offset, id: id})
			c.mu.Unlock()
		})
	}
}

// stop ends the consumer and returns what it was served.
func (c *consumer) stop() map[tp][]seenRecord {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = map[tp][]seenRecord{}
	return out
}

func (c *consumer) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}
