package partlog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/plugins/codec"
)

// Helpers of the cleaner's tests.

// kv is one record: a nil key has no key, a nil value makes a tombstone.
type kv struct{ key, value []byte }

func put(k, v string) kv { return kv{[]byte(k), []byte(v)} }
func del(k string) kv    { return kv{key: []byte(k)} }
func unkeyed(v string) kv {
	return kv{value: []byte(v)}
}

// keyed builds one batch of recs under o, timestamps from ts on.
func keyed(t testing.TB, o record.BuildOptions, ts int64, recs ...kv) []byte {
	t.Helper()
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		rs[i] = record.Record{Key: r.key, Value: r.value, Timestamp: ts + int64(i)}
	}
	b, err := record.Build(o, rs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func plain() record.BuildOptions { return record.DefaultBuildOptions() }

func idempotent(pid int64, seq int32) record.BuildOptions {
	o := record.DefaultBuildOptions()
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, 0, seq
	return o
}

// zstd compresses and decompresses with the built-in codecs, as a broker
// would pass them to Clean.
func zstdOpts(o record.BuildOptions) record.BuildOptions {
	o.Codec = record.CodecZstd
	o.Compress = func(raw []byte) ([]byte, error) { return compress(record.CodecZstd, raw) }
	return o
}

func compress(c record.Codec, raw []byte) ([]byte, error) {
	resp, err := codec.Standard(codec.ID(c)).Compress(context.Background(), codec.CompressRequest{Records: raw})
	return resp.Compressed, err
}

func decompress(c record.Codec, section []byte) ([]byte, error) {
	return codec.Decompress(context.Background(), codec.ID(c), section, 64<<20)
}

// withCodecs is o with the built-in codecs.
func withCodecs(o CleanOptions) CleanOptions {
	o.Decompress, o.Compress = decompress, compress
	return o
}

// seen is one record as read back.
type seen struct {
	off        int64
	key, value []byte
}

func (s seen) tombstone() bool { return s.key != nil && s.value == nil }

// view is the log read back through Read: every batch header and record in
// offset order, and the latest record of each key.
type view struct {
	headers []record.Header
	records []seen
	latest  map[string]seen
	bytes   int64
}

// readView reads the whole log with Read, checking that it serves whole
// valid batches whose offsets continue from StartOffset to EndOffset and
// whose records' offsets only grow (nothing served twice).
func readView(t testing.TB, l *Log) view {
	t.Helper()
	v := view{latest: map[string]seen{}}
	next := l.StartOffset()
	for next < l.EndOffset() {
		sl, err := l.Read(next, 64<<10, NoLimit)
		if err != nil {
			t.Fatalf("read %d: %v (segments %s)", next, err, segNames(l))
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, n, err := record.Next(b, 0)
			if err != nil {
				t.Fatalf("read %d: bad batch: %v", next, err)
			}
			if h.BaseOffset != next {
				t.Fatalf("batch at %d, expected %d: offsets must continue (segments %s)", h.BaseOffset, next, segNames(l))
			}
			recs, err := record.Records(b[:n], decompress)
			if err != nil {
				t.Fatalf("batch at %d: %v", h.BaseOffset, err)
			}
			for _, r := range recs {
				s := seen{off: h.BaseOffset + int64(r.OffsetDelta), key: bytes.Clone(r.Key), value: bytes.Clone(r.Value)}
				if k := len(v.records); k > 0 && v.records[k-1].off >= s.off {
					t.Fatalf("record at %d after one at %d", s.off, v.records[k-1].off)
				}
				v.records = append(v.records, s)
				if s.key != nil {
					v.latest[string(s.key)] = s
				}
			}
			v.headers = append(v.headers, h)
			v.bytes += int64(n)
			next = h.NextOffset()
			b = b[n:]
		}
	}
	return v
}

// keyModel is what a compacted log must still say: each key's latest value,
// nil once deleted.
type keyModel map[string][]byte

func (m keyModel) apply(recs ...kv) {
	for _, r := range recs {
		if r.key != nil {
			m[string(r.key)] = r.value
		}
	}
}

// check fails unless v says what m says of every key: its latest value, or
// for a deleted key nothing or a tombstone; and holds no other key.
func (m keyModel) check(t testing.TB, v view) {
	t.Helper()
	for k, want := range m {
		got, ok := v.latest[k]
		switch {
		case want == nil && ok && !got.tombstone():
			t.Fatalf("key %q was deleted, the log says %q at %d", k, got.value, got.off)
		case want != nil && !ok:
			t.Fatalf("key %q (%q) is gone from the log", k, want)
		case want != nil && !bytes.Equal(got.value, want):
			t.Fatalf("key %q: log says %q at %d, want %q", k, got.value, got.off, want)
		}
	}
	for k := range v.latest {
		if _, ok := m[k]; !ok {
			t.Fatalf("log holds key %q nobody wrote", k)
		}
	}
}

// mustClean runs a pass that must succeed.
func mustClean(t testing.TB, l *Log, o CleanOptions) CleanResult {
	t.Helper()
	res, err := l.Clean(ctx, o)
	if err != nil {
		t.Fatalf("clean: %v (result %+v, segments %s)", err, res, segNames(l))
	}
	return res
}

// appendAll appends batches one by one.
func appendAll(t testing.TB, l *Log, batches ...[]byte) {
	t.Helper()
	for _, b := range batches {
		if _, err := l.Append(ctx, b, 1); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// cleanerFiles lists the cleaner's temporary files in the partition directory.
func cleanerFiles(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return cleanerTag(n) == "" && !strings.HasSuffix(n, ".tmp") })
}

// cleanConfig has small segments, so that a few hundred records make many,
// and a SegmentAge of 1 ms, so that roll (and an append after the clock
// moved) rolls.
func cleanConfig(clk *fakeClock) Config {
	return Config{SegmentBytes: 4096, SegmentAge: time.Millisecond, IndexIntervalBytes: 256, RetentionAge: -1, RetentionBytes: -1, Clock: clk}
}

func keyName(i int) string { return fmt.Sprintf("key-%03d", i) }
