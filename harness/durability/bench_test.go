package durability

import (
	"testing"
	"time"

	"github.com/weir-broker/weir/core/vfs"
)

// BenchmarkAppendSync is what the power fault's lock costs a broker: a
// 4 KiB write and an fsync on a bare MemFS and on a powerFS around one.
// The file restarts every MiB, as a segment would roll, so the figure does
// not grow with the file (a MemFS fsync keeps the bytes it covers apart).
func BenchmarkAppendSync(b *testing.B) {
	for _, fs := range []struct {
		name string
		fs   vfs.FS
	}{{"memfs", vfs.NewMem()}, {"powerfs", newPowerFS(0)}} {
		b.Run(fs.name, func(b *testing.B) {
			if err := fs.fs.MkdirAll("/d", 0o755); err != nil {
				b.Fatal(err)
			}
			f, err := fs.fs.Create("/d/log")
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			n := 0
			for b.Loop() {
				if n++; n%256 == 0 {
					if err := f.Truncate(0); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

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
