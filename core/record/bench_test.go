package record

import (
	"bytes"
	"fmt"
	"testing"
)

// benchRecords returns records of 100-byte values that encode to about size
// bytes.
func benchRecords(size int) []Record {
	const valueSize = 100
	n := max(1, (size-HeaderSize)/(valueSize+16))
	recs := make([]Record, n)
	value := bytes.Repeat([]byte("x"), valueSize)
	for i := range recs {
		recs[i] = Record{Key: []byte(fmt.Sprintf("key-%05d", i%100000)), Value: value, Timestamp: 1_700_000_000_000 + int64(i)}
	}
	return recs
}

func BenchmarkNext(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			batch := mustBuild(b, DefaultBuildOptions(), benchRecords(size))
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Next(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	recs := benchRecords(16 << 10)
	opts := DefaultBuildOptions()
	b.Run("alloc", func(b *testing.B) {
		b.SetBytes(int64(len(mustBuild(b, opts, recs))))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Build(opts, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(len(mustBuild(b, opts, recs))))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendBatch(buf[:0], opts, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRecords(b *testing.B) {
	batch := mustBuild(b, DefaultBuildOptions(), benchRecords(16<<10))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Records(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
}
