package durability

import (
	"testing"
	"time"
)

// BenchmarkCheck is the comparison of a run's ledger with what was served,
// per record: 100,000 acknowledged records over 4 partitions, all served.
func BenchmarkCheck(b *testing.B) {
	const n, parts = 100_000, 4
	in := checkInput{fault: Power, start: time.Unix(0, 0), cut: time.Unix(10, 0), served: map[tp]*served{},
		recovered: map[tp]int64{}}
	led := make([]entry, n)
	for i := range led {
		p := int32(i % parts)
		s := in.served[tp{0, p}]
		if s == nil {
			s = &served{}
			in.served[tp{0, p}] = s
		}
		off := int64(len(s.records))
		led[i] = entry{partition: p, size: 100, sum: uint32(i), state: acked, sent: int64(i), ack: int64(i) + 1000, offset: off}
		s.records = append(s.records, servedRecord{offset: off, id: recordID(0, uint64(i)), sum: uint32(i), size: 100})
		s.end = off + 1
	}
	in.ledgers = [][]entry{led}
	b.ReportAllocs()
	for b.Loop() {
		if o := check(in); o.Acked != n || o.AckedLost != 0 {
			b.Fatalf("acked %d lost %d", o.Acked, o.AckedLost)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}
