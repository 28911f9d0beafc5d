package kgoadapt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codectest"
	"github.com/weir-broker/weir/plugins/kgoadapt"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// snappy5 is a custom codec: snappy under the unused id 5, as a user would
// write one to try a codec of their own.
type snappy5 struct{}

func (snappy5) ID() codec.ID { return 5 }
func (snappy5) Compress(ctx context.Context, r codec.CompressRequest) (codec.CompressResponse, error) {
	return codec.Standard(codec.Snappy).Compress(ctx, r)
}
func (snappy5) Decompress(ctx context.Context, r codec.DecompressRequest) (codec.DecompressResponse, error) {
	return codec.Standard(codec.Snappy).Decompress(ctx, r)
}

// failing fails every call.
type failing struct{ id codec.ID }

var errFailing = errors.New("failing codec")

func (f failing) ID() codec.ID { return f.id }
func (failing) Compress(context.Context, codec.CompressRequest) (codec.CompressResponse, error) {
	return codec.CompressResponse{}, errFailing
}
func (failing) Decompress(context.Context, codec.DecompressRequest) (codec.DecompressResponse, error) {
	return codec.DecompressResponse{}, errFailing
}

const waitTimeout = 30 * time.Second

func startBroker(t *testing.T) string { return brokertest.Start(t, "").Addr() }

var newClient = brokertest.Client

// values are JSON log lines: they compress, so franz-go keeps the
// compressed form.
func values(seed int64, n int) [][]byte { return codectest.JSONLogLines(seed, n) }

func produce(t *testing.T, addr, topic string, c codec.Codec, vals [][]byte) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.WithCompressor(kgoadapt.Compressor(c)),
		kgo.AllowAutoTopicCreation())
	recs := make([]*kgo.Record, len(vals))
	for i, v := range vals {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s with %v: %v (the broker must accept codec id %d)", topic, c, err, c.ID())
	}
}

// consume reads n records of topic from the start, failing the test on any
// fetch error.
func consume(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	recs, err := tryConsume(t, addr, topic, n, opts...)
	if err != nil {
		t.Fatalf("consume %s: %v", topic, err)
	}
	return recs
}

// tryConsume reads n records of topic, or returns the first fetch error.
func tryConsume(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) ([]*kgo.Record, error) {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer: %d of %d records of %s before the deadline", len(recs), n, topic)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return recs, errs[0].Err
		}
		recs = append(recs, fs.Records()...)
	}
	return recs, nil
}

func checkValues(t *testing.T, who string, recs []*kgo.Record, want [][]byte, wantCodec uint8) {
	t.Helper()
	if len(recs) != len(want) {
		t.Fatalf("%s: %d records, want %d", who, len(recs), len(want))
	}
	for i, r := range recs {
		if !bytes.Equal(r.Value, want[i]) {
			t.Fatalf("%s: record %d = %q, want %q", who, i, r.Value, want[i])
		}
		if got := r.Attrs.CompressionType(); got != wantCodec {
			t.Fatalf("%s: record %d came in a batch with codec %d, want %d", who, i, got, wantCodec)
		}
	}
}

// TestZstdLevel4ThroughFranz: a franz-go producer compressing with weir's
// zstd at level 4 writes zstd batches that franz-go's own decompressor and
// weir's Decompressor both read intact.
func TestZstdLevel4ThroughFranz(t *testing.T) {
	addr := startBroker(t)
	zstd4, err := codec.New("zstd:level=4")
	if err != nil {
		t.Fatal(err)
	}
	want := values(1, 200)
	produce(t, addr, "kgoadapt-zstd4", zstd4, want)
	checkValues(t, "franz-go's decompressor", consume(t, addr, "kgoadapt-zstd4", len(want)), want, uint8(codec.Zstd))
	checkValues(t, "kgoadapt.Decompressor()", consume(t, addr, "kgoadapt-zstd4", len(want),
		kgo.WithDecompressor(kgoadapt.Decompressor())), want, uint8(codec.Zstd))

	// The stored sections are byte for byte what weir's level-4 encoder
	// makes of their contents, and not what the default level makes: the
	// producer used the codec it was given.
	zstd2 := codec.Standard(codec.Zstd)
	for i, section := range storedSections(t, addr, "kgoadapt-zstd4", len(want)) {
		raw, err := codec.Decompress(context.Background(), codec.Zstd, section, 0)
		if err != nil {
			t.Fatalf("stored batch %d: %v", i, err)
		}
		at4, err := zstd4.Compress(context.Background(), codec.CompressRequest{Records: raw})
		if err != nil {
			t.Fatal(err)
		}
		at2, err := zstd2.Compress(context.Background(), codec.CompressRequest{Records: raw})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(section, at4.Compressed) || bytes.Equal(section, at2.Compressed) {
			t.Errorf("stored batch %d: %d bytes; zstd level 4 makes %d, level 2 %d: want level 4's bytes",
				i, len(section), len(at4.Compressed), len(at2.Compressed))
		}
	}
}

// storedSections fetches partition 0 of topic by hand until n records came
// and returns each batch's records section as stored.
func storedSections(t *testing.T, addr, topic string, n int) [][]byte {
	t.Helper()
	cl := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var sections [][]byte
	offset, records := int64(0), 0
	for records < n {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 200, 1, 16<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 16<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("Fetch %s@%d: %v", topic, offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("Fetch %s@%d: unexpected response %+v", topic, offset, resp.Topics)
		}
		for b := resp.Topics[0].Partitions[0].RecordBatches; len(b) > 0; {
			h, size, err := record.Next(b, 0)
			if err != nil {
				break // a partial batch ends the response
			}
			sections = append(sections, bytes.Clone(b[record.HeaderSize:size]))
			records += int(h.RecordCount)
			offset = h.NextOffset()
			b = b[size:]
		}
	}
	return sections
}

// TestCustomCodecID5: batches compressed by a custom codec carry id 5
// through weir (the broker stores them as they come); a consumer with the
// codec reads them, and consumers without it get a clear error instead of
// garbage.
func TestCustomCodecID5(t *testing.T) {
	addr := startBroker(t)
	const topic = "kgoadapt-custom5"
	want := values(2, 150)
	produce(t, addr, topic, snappy5{}, want)
	checkValues(t, "Decompressor(snappy5)", consume(t, addr, topic, len(want),
		kgo.WithDecompressor(kgoadapt.Decompressor(snappy5{}))), want, 5)

	_, err := tryConsume(t, addr, topic, len(want), kgo.WithDecompressor(kgoadapt.Decompressor()))
	if !errors.Is(err, kgoadapt.ErrNoCodec) || !strings.Contains(err.Error(), "id 5") {
		t.Errorf("consumer without the id-5 codec: error %v, want one wrapping ErrNoCodec naming id 5", err)
	}
	// franz-go's own decompressor refuses it too.
	if _, err := tryConsume(t, addr, topic, len(want)); err == nil {
		t.Error("franz-go's default decompressor read id-5 batches without an error")
	}
}

func TestCompressorFallsBack(t *testing.T) {
	src := bytes.Repeat([]byte("weir "), 1000)
	for name, tc := range map[string]struct {
		c     codec.Codec
		flags []kgo.CompressFlag
	}{
		"failing codec":            {failing{codec.Gzip}, nil},
		"none":                     {codec.Standard(codec.None), nil},
		"zstd to a pre-2.1 broker": {codec.Standard(codec.Zstd), []kgo.CompressFlag{kgo.CompressDisableZstd}},
	} {
		out, typ := kgoadapt.Compressor(tc.c).Compress(new(bytes.Buffer), src, tc.flags...)
		if typ != kgo.CodecNone || !bytes.Equal(out, src) {
			t.Errorf("%s: Compress = %d bytes with codec %d, want the input with CodecNone", name, len(out), typ)
		}
	}
	out, typ := kgoadapt.Compressor(codec.Standard(codec.LZ4)).Compress(new(bytes.Buffer), src)
	if typ != kgo.CodecLz4 || len(out) >= len(src) {
		t.Errorf("lz4: Compress = %d bytes with codec %d, want fewer than %d with CodecLz4", len(out), typ, len(src))
	}
	back, err := kgoadapt.Decompressor().Decompress(out, typ)
	if err != nil || !bytes.Equal(back, src) {
		t.Errorf("lz4 round trip through the adapters: %d bytes, %v", len(back), err)
	}
}

func TestDecompressorErrors(t *testing.T) {
	src := codectest.JSONLogPayload(3, 10<<10)
	comp, _ := kgoadapt.Compressor(codec.Standard(codec.Gzip)).Compress(nil, src)

	if out, err := kgoadapt.Decompressor().Decompress(src, kgo.CodecNone); err != nil || !bytes.Equal(out, src) {
		t.Errorf("CodecNone: %d bytes, %v; want the input", len(out), err)
	}
	_, err := kgoadapt.DecompressorWithLimit(len(src)-1).Decompress(comp, kgo.CodecGzip)
	if !errors.Is(err, kgo.ErrMaxDecompress) || !errors.Is(err, codec.ErrTooLarge) {
		t.Errorf("over the limit: %v, want an error wrapping kgo.ErrMaxDecompress and codec.ErrTooLarge", err)
	}
	if out, err := kgoadapt.DecompressorWithLimit(len(src)).Decompress(comp, kgo.CodecGzip); err != nil || !bytes.Equal(out, src) {
		t.Errorf("exactly at the limit: %d bytes, %v", len(out), err)
	}
	if _, err := kgoadapt.Decompressor().Decompress(comp, kgo.CodecZstd); !errors.Is(err, codec.ErrCorrupt) {
		t.Errorf("gzip bytes labelled zstd: %v, want ErrCorrupt", err)
	}
	for _, id := range []kgo.CompressionCodecType{5, 6, 7, 8, -1} {
		if _, err := kgoadapt.Decompressor().Decompress(comp, id); !errors.Is(err, kgoadapt.ErrNoCodec) {
			t.Errorf("id %d without a codec: %v, want ErrNoCodec", id, err)
		}
	}
	// A codec given for a standard id replaces the built-in.
	if _, err := kgoadapt.Decompressor(failing{codec.Gzip}).Decompress(comp, kgo.CodecGzip); !errors.Is(err, errFailing) {
		t.Errorf("gzip replaced by a failing codec: %v, want its error", err)
	}
	for name, f := range map[string]func(){
		"nil codec":    func() { kgoadapt.Decompressor(nil) },
		"id 9":         func() { kgoadapt.Decompressor(failing{9}) },
		"nil compress": func() { kgoadapt.Compressor(nil) },
	} {
		if !panics(f) {
			t.Errorf("%s: no panic", name)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
