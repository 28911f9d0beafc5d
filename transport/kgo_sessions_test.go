package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchReads is a kgo hook that sends the size of every Fetch response the
// client reads.
type fetchReads chan int

func (f fetchReads) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		select {
		case f <- n:
		default:
		}
	}
}

// franz-go consumes 2,000 partitions through an incremental fetch session:
// every record produced arrives exactly once, in order per partition, the
// client's fetches are incremental, and once it has read everything its
// fetches are answered with a few bytes instead of a line per partition.
// Without sessions (kgo.DisableFetchSessions) the same idle fetch costs
// tens of kilobytes, which shows the test can tell the two apart.
func TestKgoFetchSessionsManyPartitions(t *testing.T) {
	for _, sessions := range []bool{true, false} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			b := startBroker(t, withMemFS, withMemCoord)
			manyPartitions(t, b, "wide", 2000, 0, 1) // topics wide-0 and wide-1
			ctx := testCtx(t)
			reg := b.node.Metrics()
			incrementalBefore := metricValue(t, reg, "weir_fetch_requests_total", map[string]string{"session": "incremental"})

			prod := kgoClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
			sent := map[string][]string{} // "topic/partition" -> values in order
			produce := func(perPartition int, every int) {
				t.Helper()
				var recs []*kgo.Record
				for topic := range 2 {
					for p := int32(0); p < 1000; p += int32(every) {
						for range perPartition {
							key := fmt.Sprintf("wide-%d/%d", topic, p)
							v := fmt.Sprintf("%s#%d", key, len(sent[key]))
							sent[key] = append(sent[key], v)
							recs = append(recs, &kgo.Record{Topic: fmt.Sprintf("wide-%d", topic), Partition: p, Value: []byte(v)})
						}
					}
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			produce(2, 1) // 4,000 records, two per partition

			reads := make(fetchReads, 1024)
			opts := []kgo.Opt{kgo.ConsumeTopics("wide-0", "wide-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.WithHooks(reads)}
			if !sessions {
				opts = append(opts, kgo.DisableFetchSessions())
			}
			cons := kgoClient(t, b, opts...)
			got := map[string][]string{}
			take := func(n int) {
				t.Helper()
				for _, r := range consume(t, ctx, cons, n) {
					key := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
					if r.Offset != int64(len(got[key])) {
						t.Fatalf("%s: offset %d after %d records", key, r.Offset, len(got[key]))
					}
					got[key] = append(got[key], string(r.Value))
				}
			}
			take(4000)
			// More while the consumer runs: every tenth partition.
			produce(1, 10)
			take(200)
			if len(got) != 2000 {
				t.Fatalf("records from %d partitions, want 2000", len(got))
			}
			for key, want := range sent {
				if fmt.Sprint(got[key]) != fmt.Sprint(want) {
					t.Fatalf("%s: consumed %q, want %q", key, got[key], want)
				}
			}
			// Nothing more arrives: the client's next fetches are idle.
			// Drain what was read so far, then take the size of three.
			for len(reads) > 0 {
				<-reads
			}
			largest := 0
			for range 3 {
				select {
				case n := <-reads:
					largest = max(largest, n)
				case <-ctx.Done():
					t.Fatal("no idle fetch answered")
				}
			}
			pollCtx, cancel := context.WithTimeout(ctx, time.Millisecond)
			if fs := cons.PollFetches(pollCtx); len(fs.Records()) != 0 {
				t.Fatalf("%d records more than were produced", len(fs.Records()))
			}
			cancel()

			incremental := metricValue(t, reg, "weir_fetch_requests_total", map[string]string{"session": "incremental"}) - incrementalBefore
			t.Logf("sessions=%v: %v incremental fetches, idle responses of at most %d bytes", sessions, incremental, largest)
			if sessions {
				if incremental == 0 {
					t.Fatal("no incremental fetch")
				}
				if largest > 200 {
					t.Fatalf("idle fetch in a session answered with %d bytes", largest)
				}
			} else {
				if incremental != 0 {
					t.Fatalf("%v incremental fetches with sessions disabled", incremental)
				}
				if largest < 2000*30 {
					t.Fatalf("idle full fetch of 2,000 partitions answered with only %d bytes", largest)
				}
			}
		})
	}
}
