package codec_test

import (
	"context"
	"testing"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
)

// BenchmarkCodec measures each built-in at its default level on 1 MiB
// records sections, one call per batch as a producer or consumer makes it:
//
//	BenchmarkCodec/codec=zstd/payload=json/op=compress
//
// MB/s counts uncompressed bytes in both directions; "ratio" is
// uncompressed/compressed size. random is incompressible (the worst case),
// json is structured log lines (codectest.JSONLogPayload), typical of real
// topics. Compare runs with benchstat.
func BenchmarkCodec(b *testing.B) {
	payloads := []struct {
		name string
		data []byte
	}{
		{"random", codectest.RandomPayload(1, 1<<20)},
		{"json", codectest.JSONLogPayload(1, 1<<20)},
	}
	ctx := context.Background()
	for _, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		c, err := codec.New(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range payloads {
			resp, err := c.Compress(ctx, codec.CompressRequest{Records: p.data})
			if err != nil {
				b.Fatal(err)
			}
			comp := resp.Compressed
			ratio := float64(len(p.data)) / float64(len(comp))
			prefix := "codec=" + name + "/payload=" + p.name
			b.Run(prefix+"/op=compress", func(b *testing.B) {
				b.SetBytes(int64(len(p.data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Compress(ctx, codec.CompressRequest{Records: p.data}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(ratio, "ratio")
			})
			b.Run(prefix+"/op=decompress", func(b *testing.B) {
				b.SetBytes(int64(len(p.data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: comp, MaxSize: len(p.data)}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(ratio, "ratio")
			})
		}
	}
}
