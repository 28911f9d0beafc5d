package transport

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// manyPartitions creates topics of at most 1,000 partitions each (one
// topic of 10,000 takes the node longer to elect than CreateTopic waits)
// until there are n partitions, and returns a v11 Fetch of all of them from
// offset 0.
func manyPartitions(t testing.TB, b *testBroker, prefix string, n int32, maxWait time.Duration, minBytes int32) *kmsg.FetchRequest {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, int32(maxWait/time.Millisecond), minBytes, 1<<30
	for i := 0; n > 0; i++ {
		k := min(n, 1000)
		name := fmt.Sprintf("%s-%d", prefix, i)
		b.createTopic(t, name, k, nil)
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = name
		for p := range k {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		n -= k
	}
	return req
}

// BenchmarkFetchParkedWake is a Fetch parked on many partitions (MinBytes
// never met, MaxWait a minute) while appends land on one of them: each op is
// one append through the node plus the parked Fetch's wake-up, re-read and
// return to waiting (the test hook says when it waits again). What it costs
// should not grow with the partitions the Fetch is parked on:
//
//	go test -run '^$' -bench FetchParkedWake -count 5 ./transport
func BenchmarkFetchParkedWake(b *testing.B) {
	for _, n := range []int32{10, 10_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			waiting := setFetchHook(b)
			br := startBroker(b, withMemFS, withMemCoord)
			req := manyPartitions(b, br, "parked", n, time.Minute, 1<<30)
			rc := br.dial(b)
			rc.send(req)
			<-waiting
			one := batch(b, "x", 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				br.produce(b, "parked-0", 0, append([]byte(nil), one...))
				<-waiting
			}
			b.StopTimer()
		})
	}
}
