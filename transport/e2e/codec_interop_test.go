package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/plugins/codec"
)

// Codec interop: weir's built-in codecs against the bytes real clients
// write and read. The broker stores batches as they come, so the stored
// bytes are exactly what each client's compressor wrote, and what weir's
// codec writes is exactly what each client's decompressor gets.
//
// Snappy is where clients disagree: sarama (like the JVM) writes the xerial
// framing, franz-go and librdkafka raw snappy; weir reads both and writes
// xerial, which every client must read. The test pins down who writes what,
// so a client changing its framing shows up here.

// interopCodecs are the compressing codecs, by Kafka name and id.
var interopCodecs = []codec.ID{codec.Gzip, codec.Snappy, codec.LZ4, codec.Zstd}

// snappyFraming is how each client frames snappy when it produces.
var snappyFraming = map[string]string{"franz-go": "raw", "sarama": "xerial", "kcat": "raw"}

// TestCodecInteropClientsToWeir: each client produces with each codec;
// reading the stored batches back raw (a Fetch by hand), every batch carries
// that codec, and weir's codec decompresses every records section into
// exactly the records produced.
func TestCodecInteropClientsToWeir(t *testing.T) {
	producers := interopClients(t)
	b := startBroker(t, t.TempDir())
	addr := b.Addr()
	cl := newClient(t, addr)
	const n = 20
	for _, producer := range producers {
		for _, id := range interopCodecs {
			t.Run(producer.Name+"/"+id.String(), func(t *testing.T) {
				topic := fmt.Sprintf("interop-in-%s-%s", producer.Name, id)
				createTopic(t, addr, topic, 1, nil)
				want := textMessages(topic, n)
				producer.Produce(t, addr, topic, id.String(), want)

				batches := fetchBatches(t, cl, topic, n)
				var got []msg
				for i, batch := range batches {
					h, err := record.ParseHeader(batch)
					if err != nil {
						t.Fatalf("stored batch %d: %v", i, err)
					}
					if codec.ID(h.Codec()) != id {
						t.Fatalf("stored batch %d has codec %v, want %v: %s did not compress", i, h.Codec(), id, producer.Name)
					}
					section := batch[record.HeaderSize:h.Size()]
					describeSection(t, producer.Name, id, section)
					recs, err := record.Records(batch, decompressWithWeir(t, len(batch)*64))
					if err != nil {
						t.Fatalf("stored batch %d: decoding with weir's %v: %v", i, id, err)
					}
					for _, r := range recs {
						got = append(got, msg{Key: string(r.Key), Value: string(r.Value)})
					}
				}
				sameMessages(t, producer.Name+" -> weir's "+id.String(), got, want)
			})
		}
	}
}

// TestCodecInteropWeirToClients: weir's codec compresses a records section
// (at the default level and at the highest), the batch is built with
// record.AppendBatch and produced by hand, and every client consumes it
// with byte-identical keys and values.
func TestCodecInteropWeirToClients(t *testing.T) {
	consumers := interopClients(t)
	b := startBroker(t, t.TempDir())
	addr := b.Addr()
	cl := newClient(t, addr)
	const n = 20
	for _, spec := range []string{"gzip", "gzip:level=9", "snappy", "lz4", "lz4:level=9", "zstd", "zstd:level=4"} {
		c, err := codec.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(spec, func(t *testing.T) {
			topic := strings.NewReplacer(":", "-", "=", "-").Replace("interop-out-" + c.(fmt.Stringer).String())
			createTopic(t, addr, topic, 1, nil)
			want := textMessages(topic, n)
			recs := make([]record.Record, n)
			now := time.Now().UnixMilli()
			for i, m := range want {
				recs[i] = record.Record{Key: []byte(m.Key), Value: []byte(m.Value), Timestamp: now}
			}
			opts := record.DefaultBuildOptions()
			opts.Codec = record.Codec(c.ID())
			var compressed []byte
			opts.Compress = func(raw []byte) ([]byte, error) {
				resp, err := c.Compress(context.Background(), codec.CompressRequest{Records: raw})
				compressed = resp.Compressed
				return resp.Compressed, err
			}
			batch, err := record.AppendBatch(nil, opts, recs)
			if err != nil {
				t.Fatalf("AppendBatch with %s: %v", spec, err)
			}
			describeSection(t, "weir", c.ID(), compressed)
			wantCode(t, "produce "+spec, produceRaw(t, cl, topic, batch).ErrorCode, nil)

			for _, consumer := range consumers {
				got := consumer.Consume(t, addr, topic, n)
				sameMessages(t, "weir's "+spec+" -> "+consumer.Name, got, want)
				if consumer.Name != "franz-go" {
					continue
				}
				for i, m := range got {
					if m.Codec != uint8(c.ID()) {
						t.Errorf("franz-go read record %d from a batch with codec %d, want %d", i, m.Codec, c.ID())
						break
					}
				}
			}
		})
	}
}

// interopClients are the e2e clients, without kcat when it is missing
// (which fails under CI=true, see findKcat).
func interopClients(t *testing.T) []client {
	t.Helper()
	if _, ok := findKcat(t); !ok {
		t.Log("kcat not found: the codec interop runs without it (install the Debian package kcat, or run make deps)")
		return clients[:2]
	}
	return clients
}

// decompressWithWeir is record.Records' decompress hook backed by weir's
// built-ins, bounded by maxSize.
func decompressWithWeir(t *testing.T, maxSize int) func(record.Codec, []byte) ([]byte, error) {
	return func(c record.Codec, section []byte) ([]byte, error) {
		return codec.Decompress(testContext(t), codec.ID(c), section, maxSize)
	}
}

// describeSection checks the framing who wrote for id where clients differ
// (snappy: xerial or raw) and logs what zstd frames declare.
func describeSection(t *testing.T, who string, id codec.ID, section []byte) {
	t.Helper()
	switch id {
	case codec.Snappy:
		framing := "raw"
		if bytes.HasPrefix(section, []byte("\x82SNAPPY\x00")) {
			framing = "xerial"
		}
		want := snappyFraming[who]
		if who == "weir" {
			want = "xerial"
		}
		if framing != want {
			t.Errorf("%s wrote %s snappy, expected %s", who, framing, want)
		}
	case codec.Zstd:
		var h zstd.Header
		if err := h.Decode(section); err != nil {
			t.Errorf("%s's zstd frame header: %v", who, err)
			return
		}
		t.Logf("%s's zstd frame: content size declared %v (%d), window %d", who, h.HasFCS, h.FrameContentSize, h.WindowSize)
	}
}

// fetchBatches reads partition 0 of topic from offset 0 with hand-made Fetch
// requests until it holds n records, and returns the stored batches exactly
// as the broker sent them.
func fetchBatches(t *testing.T, cl *kgo.Client, topic string, n int) [][]byte {
	t.Helper()
	var batches [][]byte
	offset, records := int64(0), 0
	deadline := time.Now().Add(waitTimeout)
	for records < n {
		if time.Now().After(deadline) {
			t.Fatalf("fetch %s: %d of %d records before the deadline", topic, records, n)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 200
		req.MinBytes = 1
		req.MaxBytes = 16 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = 16 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatalf("Fetch %s@%d: %v", topic, offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("Fetch %s@%d: %d topics in the response", topic, offset, len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("Fetch %s@%d: %v", topic, offset, err)
		}
		for b := p.RecordBatches; len(b) > 0; {
			h, size, err := record.Next(b, 0)
			if err != nil {
				break // a partial batch at the end of the response
			}
			batches = append(batches, bytes.Clone(b[:size]))
			records += int(h.RecordCount)
			offset = h.NextOffset()
			b = b[size:]
		}
	}
	if records != n {
		t.Fatalf("fetch %s: %d records stored, want %d", topic, records, n)
	}
	return batches
}
