package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSaramaProduceConsume: sarama produces with every codec (and once with
// its idempotent producer) to a 2-partition topic, and its partition
// consumers read every message back with its key, value and headers.
func TestSaramaProduceConsume(t *testing.T) {
	b := startBroker(t, t.TempDir())
	type variant struct {
		name, codec string
		idempotent  bool
	}
	var variants []variant
	for _, c := range codecs {
		variants = append(variants, variant{c.Name, c.Name, false})
	}
	variants = append(variants, variant{"idempotent", "zstd", true})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			topic := "sarama-" + v.name
			createTopic(t, b.Addr(), topic, 2, nil)
			cfg := saramaConfig()
			cfg.Producer.Compression = saramaCodec(t, v.codec)
			if v.idempotent {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}
			p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			want := textMessages(topic, 200)
			var pms []*sarama.ProducerMessage
			for i, m := range want {
				pm := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(m.Key), Value: sarama.StringEncoder(m.Value)}
				if i%3 == 0 {
					pm.Headers = []sarama.RecordHeader{{Key: []byte("i"), Value: fmt.Appendf(nil, "%d", i)}}
					want[i].Headers = []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}}
				}
				pms = append(pms, pm)
			}
			if err := p.SendMessages(pms); err != nil {
				t.Fatalf("SendMessages: %v", err)
			}
			// Where each message was acknowledged.
			at := make(map[string][2]int64)
			for _, pm := range pms {
				k, _ := pm.Key.Encode()
				at[string(k)] = [2]int64{int64(pm.Partition), pm.Offset}
			}
			got := consumeSarama(t, b.Addr(), topic, len(want))
			byKey := make(map[string]msg)
			for _, m := range got {
				byKey[m.Key] = m
			}
			for _, w := range want {
				g, ok := byKey[w.Key]
				switch {
				case !ok:
					t.Fatalf("message %v not consumed", w)
				case g.Value != w.Value || fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers):
					t.Fatalf("consumed %v headers %v, want %v headers %v", g, g.Headers, w, w.Headers)
				case at[w.Key] != [2]int64{int64(g.Partition), g.Offset}:
					t.Fatalf("%v consumed at %d@%d, acknowledged at %v", w, g.Partition, g.Offset, at[w.Key])
				}
			}
			if v.idempotent {
				for _, r := range consumeFranz(t, b.Addr(), topic, len(want)) {
					if r.ProducerID < 0 {
						t.Fatalf("%s/%d@%d has no producer id: sarama was not idempotent", topic, r.Partition, r.Offset)
					}
				}
			}
		})
	}
}

// saramaHandler records what a sarama consumer group member is given and
// consumes, marking every message so the group commits it.
type saramaHandler struct {
	mu       sync.Mutex
	claims   map[int32]bool
	consumed map[string]int
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = make(map[int32]bool)
	for _, topicParts := range s.Claims() {
		for _, p := range topicParts {
			h.claims[p] = true
		}
	}
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = nil
	return nil
}

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.consumed[string(m.Value)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaHandler) partitions() []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ps []int32
	for p := range h.claims {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (h *saramaHandler) count(v string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.consumed[v]
}

// TestSaramaConsumerGroup: two sarama consumer group members share four
// partitions, consume every message between them and, once closed, leave
// their offsets committed at the high watermarks.
func TestSaramaConsumerGroup(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic, group, partitions = "sarama-group", "sarama-group-g", 4
	createTopic(t, b.Addr(), topic, partitions, nil)
	values := batchValues("sarama", 400)
	produceValues(t, newClient(t, b.Addr()), topic, values)

	type member struct {
		cg   sarama.ConsumerGroup
		h    *saramaHandler
		done chan struct{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var members []*member
	for i := range 2 {
		cfg := saramaConfig()
		cfg.ClientID = fmt.Sprintf("weir-e2e-%d", i)
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
		cfg.Consumer.Group.Session.Timeout = 3 * time.Second
		cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
		cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
		cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, group, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := &member{cg: cg, h: &saramaHandler{consumed: map[string]int{}}, done: make(chan struct{})}
		members = append(members, m)
		go func() {
			defer close(m.done)
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, m.h); err != nil && ctx.Err() == nil {
					t.Logf("member %d: consume: %v", i, err)
					return
				}
			}
		}()
		go func() {
			for err := range cg.Errors() {
				t.Logf("member %d: %v", i, err)
			}
		}()
	}
	closeAll := sync.OnceFunc(func() {
		cancel()
		for _, m := range members {
			<-m.done
			if err := m.cg.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	defer closeAll()

	waitFor(t, "two sarama members to share four partitions", func() bool {
		a, b := members[0].h.partitions(), members[1].h.partitions()
		return len(a) == 2 && len(b) == 2 && !slices.ContainsFunc(a, func(p int32) bool { return slices.Contains(b, p) })
	})
	waitFor(t, "every message to be consumed", func() bool {
		for _, v := range values {
			if members[0].h.count(v)+members[1].h.count(v) == 0 {
				return false
			}
		}
		return true
	})
	closeAll()
	ends := endOffsets(t, b.Addr(), topic, partitions)
	if committed := committedOffsets(t, b.Addr(), group, topic, partitions); !slices.Equal(committed, ends) {
		t.Errorf("committed offsets %v, want the end offsets %v", committed, ends)
	}
}
