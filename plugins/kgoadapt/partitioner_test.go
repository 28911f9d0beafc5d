package kgoadapt_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/plugins/kgoadapt"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/transport/broker"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// The helpers here carry an "assign" prefix: codec_test.go, in the same
// package, has its own.

const assignPartitions = 7

// assignBroker starts a broker whose auto-created topics have
// assignPartitions partitions; it is closed when the test ends.
func assignBroker(t *testing.T) string {
	t.Helper()
	return brokertest.Start(t, "", func(c *broker.Config) { c.DefaultPartitions = assignPartitions }).Addr()
}

var assignClient = brokertest.Client

// assignConsume reads n records of topic from the start of every partition.
func assignConsume(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := assignClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(recs), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	if len(recs) != n {
		t.Fatalf("consumed %d records of %s, want %d", len(recs), topic, n)
	}
	return recs
}

// TestAssignThroughFranz: a franz-go producer with the manual partitioner
// sends batches partitioned by Assign; a consumer finds every record on the
// partition Assign gave it, and keyed murmur2 records where franz-go's own
// default partitioner would have put them.
func TestAssignThroughFranz(t *testing.T) {
	addr := assignBroker(t)
	producer := assignClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation())
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("any")
	for _, spec := range []string{"murmur2:seed=1", "crc32:seed=2", "round-robin", "sticky:seed=3"} {
		t.Run(spec, func(t *testing.T) {
			p, err := partitioner.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			topic := "assign-" + strings.NewReplacer(":", "-", "=", "-").Replace(spec)
			want := map[string]int32{} // value -> partition
			const batches, perBatch = 8, 50
			for b := range batches {
				recs := make([]*kgo.Record, perBatch)
				for i := range recs {
					v := fmt.Sprintf("b%d-r%d", b, i)
					recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
					if i%5 != 0 { // a fifth keyless
						recs[i].Key = fmt.Appendf(nil, "key-%d", (b*perBatch+i)%97)
					}
				}
				if b%2 == 0 {
					for _, r := range recs {
						r.Topic = "" // left to DefaultProduceTopic-style callers
					}
				}
				if err := kgoadapt.Assign(context.Background(), p, topic, assignPartitions, recs); err != nil {
					t.Fatal(err)
				}
				parts := map[int32]bool{}
				for _, r := range recs {
					r.Topic = topic
					want[string(r.Value)] = r.Partition
					parts[r.Partition] = true
					if spec == "murmur2:seed=1" && r.Key != nil {
						if f := int32(franz.Partition(r, assignPartitions)); r.Partition != f {
							t.Fatalf("key %q: Assign chose %d, franz-go's default partitioner %d", r.Key, r.Partition, f)
						}
					}
				}
				if spec == "sticky:seed=3" && len(parts) != 1 {
					t.Fatalf("sticky spread one batch over partitions %v", parts)
				}
				if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			counts := make([]int, assignPartitions)
			for _, r := range assignConsume(t, addr, topic, batches*perBatch) {
				if w, ok := want[string(r.Value)]; !ok || r.Partition != w {
					t.Fatalf("record %s consumed from partition %d, assigned %d (known: %v)", r.Value, r.Partition, w, ok)
				}
				counts[r.Partition]++
			}
			if spec == "round-robin" && slices.Max(counts)-slices.Min(counts) > 1 {
				t.Errorf("round-robin counts per partition %v differ by more than 1", counts)
			}
		})
	}
}

// stub answers with fixed partitions or an error.
type stub struct {
	parts []int32
	err   error
	calls int
}

func (s *stub) Partition(ctx context.Context, req partitioner.Request) (partitioner.Response, error) {
	s.calls++
	if err := ctx.Err(); err != nil {
		return partitioner.Response{}, err
	}
	return partitioner.Response{Partitions: s.parts}, s.err
}

func TestAssignErrors(t *testing.T) {
	errPlugin := fmt.Errorf("crashed: %w", partitioner.ErrPluginFailed)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		p          *stub
		partitions int32
		recs       func() []*kgo.Record
		target     error
		msg        string
		calls      int
	}{
		{"nil-record", context.Background(), &stub{}, 3,
			func() []*kgo.Record { return []*kgo.Record{{}, nil} }, partitioner.ErrBadRequest,
			`kgoadapt: assign partitions in "t": record 1 is nil: partitioner: bad request`, 0},
		{"other-topic", context.Background(), &stub{}, 3,
			func() []*kgo.Record { return []*kgo.Record{{Topic: "t"}, {Topic: "u"}} }, partitioner.ErrBadRequest,
			`kgoadapt: assign partitions in "t": record 1 is for topic "u": partitioner: bad request`, 0},
		{"no-partitions", context.Background(), &stub{}, 0,
			func() []*kgo.Record { return []*kgo.Record{{}} }, partitioner.ErrBadRequest,
			`kgoadapt: assign partitions: partitioner: bad request: topic "t" has 0 partitions, want at least 1`, 0},
		{"partitioner-fails", context.Background(), &stub{err: errPlugin}, 3,
			func() []*kgo.Record { return []*kgo.Record{{}, {}} }, partitioner.ErrPluginFailed,
			`kgoadapt: partition 2 records of "t": crashed: partitioner: plugin failed`, 1},
		{"ctx-cancelled", cancelled, &stub{}, 3,
			func() []*kgo.Record { return []*kgo.Record{{}} }, context.Canceled,
			`kgoadapt: partition 1 records of "t": context canceled`, 1},
		{"short-response", context.Background(), &stub{parts: []int32{0}}, 3,
			func() []*kgo.Record { return []*kgo.Record{{}, {}} }, partitioner.ErrBadResponse,
			`kgoadapt: partitioner *kgoadapt_test.stub: partitioner: bad response: 1 partitions for 2 records of topic "t"`, 1},
		{"out-of-range", context.Background(), &stub{parts: []int32{0, 3}}, 3,
			func() []*kgo.Record { return []*kgo.Record{{}, {}} }, partitioner.ErrBadResponse,
			`kgoadapt: partitioner *kgoadapt_test.stub: partitioner: bad response: record 1 of topic "t": partition 3 out of range [0, 3)`, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := tc.recs()
			for _, r := range recs {
				if r != nil {
					r.Partition = 99
				}
			}
			err := kgoadapt.Assign(tc.ctx, tc.p, "t", tc.partitions, recs)
			if !errors.Is(err, tc.target) || err.Error() != tc.msg {
				t.Errorf("Assign: %v\nwant %s (wrapping %v)", err, tc.msg, tc.target)
			}
			if tc.p.calls != tc.calls {
				t.Errorf("partitioner called %d times, want %d", tc.p.calls, tc.calls)
			}
			for i, r := range recs {
				if r != nil && r.Partition != 99 {
					t.Errorf("record %d: Partition changed to %d by a failed Assign", i, r.Partition)
				}
			}
		})
	}
}

func TestAssignEmpty(t *testing.T) {
	p := &stub{parts: []int32{}}
	if err := kgoadapt.Assign(context.Background(), p, "t", 1, nil); err != nil || p.calls != 0 {
		t.Errorf("Assign of no records: %v after %d calls, want nil and no call", err, p.calls)
	}
	if err := kgoadapt.Assign(context.Background(), p, "t", 0, nil); !errors.Is(err, partitioner.ErrBadRequest) {
		t.Errorf("Assign of no records to 0 partitions: %v, want ErrBadRequest", err)
	}
}
