package partlog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/plugins/codec"
)

// BenchmarkClean cleans a log of 100k records over 10k keys (batches of 10
// records with 64-byte values, keys drawn uniformly, so about 10% of the
// records are each key's latest), in 1 MiB segments on the OS file system,
// from dirty to clean: one pass per op, the log copied back to its dirty
// state with the timer stopped. MB/s counts the bytes of the segments read,
// after/before is the size they come out at, max-lock-ms the longest a
// pass held the append lock (what an append may wait for: a swap's three
// directory fsyncs).
//
//	go test -run '^$' -bench '^BenchmarkClean$' -count 5 ./core/partlog/
func BenchmarkClean(b *testing.B) {
	for _, c := range []record.Codec{record.CodecNone, record.CodecZstd} {
		b.Run("records=100k/keys=10k/codec="+c.String(), func(b *testing.B) {
			root := b.TempDir()
			dirty := filepath.Join(root, "dirty")
			cfg := partlog.Config{SegmentBytes: 1 << 20, RetentionAge: -1}
			buildDirtyLog(b, dirty, cfg, c)
			opts := partlog.CleanOptions{UpTo: partlog.NoLimit, Decompress: decompress, Compress: compress}
			var before, after int64
			var lockMax time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				dir := filepath.Join(root, fmt.Sprint(i))
				copyDir(b, dirty, dir)
				l, _, err := partlog.Open(vfs.Default, dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := l.Clean(context.Background(), opts)
				b.StopTimer()
				if err != nil || res.SegmentsWritten == 0 {
					b.Fatalf("clean: %+v, %v", res, err)
				}
				before += res.BytesBefore
				after += res.BytesAfter
				lockMax = max(lockMax, res.AppendLockMax)
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(before)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(float64(after)/float64(before), "after/before")
			b.ReportMetric(float64(lockMax)/float64(time.Millisecond), "max-lock-ms")
		})
	}
}

func compress(c record.Codec, raw []byte) ([]byte, error) {
	resp, err := codec.Standard(codec.ID(c)).Compress(context.Background(), codec.CompressRequest{Records: raw})
	return resp.Compressed, err
}

func decompress(c record.Codec, section []byte) ([]byte, error) {
	return codec.Decompress(context.Background(), codec.ID(c), section, 64<<20)
}

// buildDirtyLog writes the benchmark's log, closed, into dir: 100k records,
// the last batch alone in the active segment.
func buildDirtyLog(tb testing.TB, dir string, cfg partlog.Config, c record.Codec) {
	tb.Helper()
	l, _, err := partlog.Open(vfs.Default, dir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	o := record.DefaultBuildOptions()
	if c != record.CodecNone {
		o.Codec = c
		o.Compress = func(raw []byte) ([]byte, error) { return compress(c, raw) }
	}
	value := make([]byte, 64)
	for i := 0; i < 10_000; i++ {
		recs := make([]record.Record, 10)
		for j := range recs {
			for k := range value {
				value[k] = byte('a' + rng.IntN(26))
			}
			recs[j] = record.Record{Key: fmt.Appendf(nil, "group-%05d", rng.IntN(10_000)),
				Value: append([]byte(nil), value...), Timestamp: benchTS + int64(i)}
		}
		batch, err := record.Build(o, recs)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := l.Append(context.Background(), batch, 0); err != nil {
			tb.Fatal(err)
		}
	}
	// A batch that fills a segment of its own rolls the last one, so that
	// all 100k records are cleanable.
	big, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: make([]byte, cfg.SegmentBytes-100)}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := l.Append(context.Background(), big, 0); err != nil {
		tb.Fatal(err)
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
}

func copyDir(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		tb.Fatal(err)
	}
}
