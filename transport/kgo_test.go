package transport

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func kgoClient(t testing.TB, b *testBroker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createTopics creates topics through the protocol.
func createTopics(t testing.TB, ctx context.Context, cl *kgo.Client, partitions int32, names ...string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	for _, name := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("creating %s: %v", rt.Topic, err)
		}
	}
}

// consume polls until want records have arrived (or the context ends).
func consume(t testing.TB, ctx context.Context, cl *kgo.Client, want int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// Records produced through kgo (idempotent, the default) with every codec
// come back intact and in order per partition, over both fetch paths.
func TestKgoProduceConsume(t *testing.T) {
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()},
	}
	for _, copyPath := range []bool{false, true} {
		opts := []brokerOpt{}
		if copyPath {
			opts = append(opts, withCopyPath)
		}
		b := startBroker(t, opts...)
		for _, c := range codecs {
			t.Run(fmt.Sprintf("%s/copy=%v", c.name, copyPath), func(t *testing.T) {
				ctx := testCtx(t)
				topic := "kgo-" + c.name
				prod := kgoClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec))
				createTopics(t, ctx, prod, 3, topic)
				const n = 300
				var recs []*kgo.Record
				for i := range n {
					recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%s-value-%04d", c.name, i)})
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				cons := kgoClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				got := consume(t, ctx, cons, n)
				if len(got) != n {
					t.Fatalf("consumed %d records, want %d", len(got), n)
				}
				// Per partition: the produced order, offsets from 0.
				byPart := map[int32][]*kgo.Record{}
				for _, r := range recs {
					byPart[r.Partition] = append(byPart[r.Partition], r)
				}
				gotByPart := map[int32][]*kgo.Record{}
				for _, r := range got {
					gotByPart[r.Partition] = append(gotByPart[r.Partition], r)
				}
				for p, want := range byPart {
					g := gotByPart[p]
					if len(g) != len(want) {
						t.Fatalf("partition %d: %d records, want %d", p, len(g), len(want))
					}
					for i := range want {
						if string(g[i].Value) != string(want[i].Value) || g[i].Offset != int64(i) || string(g[i].Key) != string(want[i].Key) {
							t.Fatalf("partition %d record %d: %q@%d, want %q@%d", p, i, g[i].Value, g[i].Offset, want[i].Value, i)
						}
					}
				}
			})
		}
	}
}

// Auto-creation: a producer's metadata request creates the topic.
func TestKgoAutoCreate(t *testing.T) {
	b := startBroker(t, withAutoCreate)
	ctx := testCtx(t)
	cl := kgoClient(t, b, kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.node.Topic("auto"); err != nil {
		t.Fatal("topic not created")
	}
	// A produce request alone creates its topic too (with the default
	// partition count); an invalid name is refused.
	rc := b.dial(t)
	resp := rc.do(produceReq(7, 1, "auto-by-produce", 0, batch(t, "x", 1))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce to a new topic: error %d", code)
	}
	if tp, err := b.node.Topic("auto-by-produce"); err != nil || len(tp.Partitions) != 1 {
		t.Fatal("produce did not create its topic")
	}
	resp = rc.do(produceReq(7, 1, "bad name!", 0, batch(t, "x", 1))).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to an invalid name: error %d", code)
	}
	// Without auto-creation, unknown topics stay unknown.
	b2 := startBroker(t)
	rc = b2.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	req.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, mt)
	meta := rc.do(req).(*kmsg.MetadataResponse)
	if meta.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata for unknown topic: error %d", meta.Topics[0].ErrorCode)
	}
}

// A consumer group: offsets committed by one member are where the next
// member of the group starts; the group shows in ListGroups, DescribeGroups
// and OffsetFetch.
func TestKgoConsumerGroup(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	prod := kgoClient(t, b, kgo.DefaultProduceTopic("g-topic"))
	createTopics(t, ctx, prod, 2, "g-topic")
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "v%03d", i)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 50)

	member := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("g-topic"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	first := member()
	got := consume(t, ctx, first, 50)
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	rc := b.dial(t)
	lg := rc.do(&kmsg.ListGroupsRequest{Version: 4}).(*kmsg.ListGroupsResponse)
	if len(lg.Groups) != 1 || lg.Groups[0].Group != "g" || lg.Groups[0].GroupState != "Stable" || lg.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", lg.Groups)
	}
	dg := rc.do(&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g", "nope"}}).(*kmsg.DescribeGroupsResponse)
	if g := dg.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 1 || len(g.Members[0].MemberAssignment) == 0 || g.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("DescribeGroups g: %+v", g)
	}
	if g := dg.Groups[1]; g.ErrorCode != 0 || g.State != "Dead" {
		t.Fatalf("DescribeGroups nope: %+v", g)
	}
	for _, v := range []int16{1, 5, 7, 8} {
		req := &kmsg.OffsetFetchRequest{Version: v, Group: "g"}
		if v >= 8 {
			req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		}
		if v < 2 {
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "g-topic", Partitions: []int32{0, 1, 9}}}
		}
		resp := rc.do(req).(*kmsg.OffsetFetchResponse)
		committed := map[int32]int64{}
		var parts []kmsg.OffsetFetchResponseTopicPartition
		if v >= 8 {
			for _, p := range resp.Groups[0].Topics[0].Partitions {
				parts = append(parts, kmsg.OffsetFetchResponseTopicPartition(p))
			}
		} else {
			parts = resp.Topics[0].Partitions
		}
		for _, p := range parts {
			committed[p.Partition] = p.Offset
		}
		var total int64
		for p, off := range committed {
			if p != 9 && off >= 0 {
				total += off
			}
		}
		if total != 50 || (v < 2 && committed[9] != -1) {
			t.Fatalf("OffsetFetch v%d: %v", v, committed)
		}
	}
	first.Close()

	produce(50, 60)
	second := member()
	defer second.Close()
	got = consume(t, ctx, second, 10)
	values := make([]string, len(got))
	for i, r := range got {
		values[i] = string(r.Value)
	}
	slices.Sort(values)
	if len(values) != 10 || values[0] != "v050" || values[9] != "v059" {
		t.Fatalf("second member consumed %v, want v050..v059", values)
	}
}
