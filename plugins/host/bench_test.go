package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/partitioner"
)

// BenchmarkPlugin measures what the process boundary costs: each kind's
// built-in in process (impl=inproc) against the same built-in served by the
// weir-builtins plugin binary (impl=plugin), for batches of 1, 100 and
// 10000 records. One op is one batch:
//
//	kind=codec        snappy: Compress then Decompress of a batch's records section
//	kind=partitioner  murmur2: Partition of the batch's keys (distinct 12-byte keys)
//	kind=flushpolicy  messages:n=1000000000: one Appended for an append of the batch
//
// ns/record is ns/op divided by the batch size.
func BenchmarkPlugin(b *testing.B) {
	h := newHost(b, Config{})
	builtins := bin("weir-builtins")
	ctx := context.Background()
	for _, kind := range []string{"codec", "partitioner", "flushpolicy"} {
		for _, impl := range []string{"inproc", "plugin"} {
			for _, n := range []int{1, 100, 10000} {
				b.Run(fmt.Sprintf("kind=%s/impl=%s/batch=%d", kind, impl, n), func(b *testing.B) {
					var op func() error
					switch kind {
					case "codec":
						spec := "snappy"
						if impl == "plugin" {
							spec = builtins + ":builtin=snappy"
						}
						c, err := h.Codec(spec)
						if err != nil {
							b.Fatal(err)
						}
						records := codectest.RecordsSection(1, n)
						b.SetBytes(int64(len(records)))
						op = func() error {
							comp, err := c.Compress(ctx, codec.CompressRequest{Records: records})
							if err != nil {
								return err
							}
							_, err = c.Decompress(ctx, codec.DecompressRequest{Compressed: comp.Compressed, MaxSize: len(records)})
							return err
						}
					case "partitioner":
						spec := "murmur2"
						if impl == "plugin" {
							spec = builtins + ":builtin=murmur2"
						}
						p, err := h.Partitioner(spec)
						if err != nil {
							b.Fatal(err)
						}
						keys := make([][]byte, n)
						for i := range keys {
							keys[i] = fmt.Appendf(nil, "key-%08d", i)
						}
						req := partitioner.Request{Topic: "bench", Partitions: 64, Keys: keys}
						op = func() error {
							_, err := p.Partition(ctx, req)
							return err
						}
					case "flushpolicy":
						spec := "messages:n=1000000000"
						if impl == "plugin" {
							spec = builtins + ":builtin=messages,n=1000000000"
						}
						f, err := h.FlushPolicy(spec)
						if err != nil {
							b.Fatal(err)
						}
						now := time.Now()
						a := flushpolicy.AppendInfo{Messages: int64(n), Bytes: int64(n) * 100, UnflushedMessages: int64(n), UnflushedBytes: int64(n) * 100, OldestUnflushed: now, Now: now}
						op = func() error {
							_, err := f.Appended(ctx, a)
							return err
						}
					}
					for b.Loop() {
						if err := op(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
				})
			}
		}
	}
}
