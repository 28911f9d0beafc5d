package logs

import (
	"testing"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
)

// BenchmarkAppend measures what Partition.Append adds to partlog's append:
// a header scan for plain batches; that plus a producer lock, check and
// update for idempotent ones. Batches of 10 records of 100 bytes, on MemFS.
func BenchmarkAppend(b *testing.B) {
	recs := make([]record.Record, 10)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 100), Timestamp: 1_700_000_000_000}
	}
	for _, mode := range []string{"log", "plain", "idempotent"} {
		b.Run(mode, func(b *testing.B) {
			p := topicPartition(b, nil, newClock(), map[string]string{topicconfig.SegmentBytes: "104857600"})
			o := record.DefaultBuildOptions()
			if mode == "idempotent" {
				o.ProducerID, o.ProducerEpoch = 7, 0
			}
			buf, err := record.Build(o, recs)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			seq := int32(0)
			for b.Loop() {
				if p.Log().EndOffset() > 500_000 {
					b.StopTimer()
					if err := p.Log().Truncate(0); err != nil {
						b.Fatal(err)
					}
					// Truncate forgets nothing in the producer state;
					// start the producer over at a new epoch.
					o.ProducerEpoch++
					seq = 0
					b.StartTimer()
				}
				if mode == "idempotent" {
					b.StopTimer()
					o.BaseSequence = seq
					seq += int32(len(recs))
					if buf, err = record.Build(o, recs); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				var err error
				if mode == "log" {
					_, err = p.Log().Append(ctx, buf, 0)
				} else {
					_, err = p.Append(ctx, buf)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
