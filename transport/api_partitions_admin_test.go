package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
)

// The version cases of the admin APIs on partitions and records (see
// versionCases): TestEveryServedVersion runs them in registry order, after
// Produce wrote to "t".
func init() {
	versionCases[21] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.Version, req.TimeoutMillis = v, 1000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 0 // nothing goes: "t" is read afterwards
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			p := r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
			if p.LowWatermark != 0 {
				return -100
			}
			return p.ErrorCode
		},
	}
	versionCases[35] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = v
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.DescribeLogDirsResponse)
			if len(resp.Dirs) != 1 || !slices.ContainsFunc(resp.Dirs[0].Topics, func(t kmsg.DescribeLogDirsResponseDirTopic) bool {
				return t.Topic == "t" && len(t.Partitions) == 1 && t.Partitions[0].Size > 0
			}) {
				return -100
			}
			return resp.ErrorCode
		},
	}
	versionCases[37] = versionCase{
		// Validate only: "t" keeps its one partition for the others.
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.Version, req.TimeoutMillis, req.ValidateOnly = v, 5000, true
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "t", 3
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode },
	}
	versionCases[47] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Version, req.Group = v, "never-seen"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = "t"
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.GroupIDNotFound.Code },
	}
	versionCases[60] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version = v
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			resp := r.(*kmsg.DescribeClusterResponse)
			if len(resp.Brokers) != 1 || resp.ClusterID == "" || resp.ControllerID != resp.Brokers[0].NodeID {
				return -100
			}
			return resp.ErrorCode
		},
	}
	versionCases[61] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			req := kmsg.NewPtrDescribeProducersRequest()
			req.Version = v
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			req.Topics = append(req.Topics, rt)
			return req
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
		},
	}
}

func kadmClient(t testing.TB, b *testBroker, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl := kgoClient(t, b, opts...)
	return cl, kadm.NewClient(cl)
}

// TestCreatePartitionsKgo adds partitions with kadm while a keyed producer
// runs: it keeps writing to the two partitions it knows until a metadata
// refresh tells it of five, then its keys spread over all five; a client
// started afterwards writes to each new partition, and a consumer reads
// them.
func TestCreatePartitionsKgo(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	_, adm := kadmClient(t, b)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}
	keyed := kgoClient(t, b) // franz-go's default partitioner hashes keys as Kafka's Java client
	produced := 0
	produceKeyed := func(n int) map[int32]int {
		seen := map[int32]int{}
		for range n {
			r := &kgo.Record{Topic: "grow", Key: []byte(fmt.Sprint("key-", produced)), Value: []byte("k")}
			if err := keyed.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			seen[r.Partition]++
			produced++
		}
		return seen
	}
	if seen := produceKeyed(50); len(seen) != 2 {
		t.Fatalf("keys over 2 partitions went to %v", seen)
	}
	res, err := adm.CreatePartitions(ctx, 3, "grow") // 2 + 3
	if err != nil {
		t.Fatal(err)
	}
	if r := res["grow"]; r.Err != nil {
		t.Fatalf("create partitions: %v", r.Err)
	}
	keyed.ForceMetadataRefresh()
	for {
		seen := produceKeyed(50)
		if seen[2]+seen[3]+seen[4] == 0 {
			if ctx.Err() != nil {
				t.Fatal("the keyed producer never wrote to the new partitions")
			}
			continue // the refresh has not landed yet
		}
		if len(seen) != 5 {
			t.Fatalf("after the refresh 50 keys went to %v, want all 5 partitions", seen)
		}
		break
	}
	td, err := adm.ListTopics(ctx, "grow")
	if err != nil || len(td["grow"].Partitions) != 5 {
		t.Fatalf("grow has %d partitions, want 5 (%v)", len(td["grow"].Partitions), err)
	}
	manual := kgoClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(5) {
		r := &kgo.Record{Topic: "grow", Partition: p, Value: []byte(fmt.Sprint("new-", p))}
		if err := manual.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	consumer := kgoClient(t, b, kgo.ConsumeTopics("grow"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]int{}
	for total := 0; total < produced+5; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, produced+5, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition]++; total++ })
	}
	for p := int32(2); p < 5; p++ {
		if got[p] < 2 {
			t.Errorf("consumed %d records from new partition %d (%v)", got[p], p, got)
		}
	}
}

// TestCreatePartitionsErrors: bad requests get per-topic errors and change
// nothing.
func TestCreatePartitionsErrors(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "three", 3, nil)
	rc := b.dial(t)
	req := func(validate bool, topics ...kmsg.CreatePartitionsRequestTopic) *kmsg.CreatePartitionsResponse {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.Version, r.TimeoutMillis, r.ValidateOnly, r.Topics = 3, 5000, validate, topics
		return rc.do(r).(*kmsg.CreatePartitionsResponse)
	}
	topic := func(name string, count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, a := range assignment {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		return rt
	}
	self := b.node.ID()
	for _, c := range []struct {
		name string
		rt   kmsg.CreatePartitionsRequestTopic
		want *kerr.Error
	}{
		{"decrease", topic("three", 2), kerr.InvalidPartitions},
		{"same", topic("three", 3), kerr.InvalidPartitions},
		{"negative", topic("three", -4), kerr.InvalidPartitions},
		{"too many", topic("three", node.MaxPartitions+1), kerr.InvalidPartitions},
		{"unknown topic", topic("nope", 4), kerr.UnknownTopicOrPartition},
		{"assignments short", topic("three", 5, []int32{self}), kerr.InvalidReplicaAssignment},
		{"unknown broker", topic("three", 4, []int32{self + 100}), kerr.InvalidReplicaAssignment},
		{"replication factor", topic("three", 4, []int32{self, self + 1}), kerr.InvalidReplicaAssignment},
	} {
		got := req(false, c.rt).Topics[0]
		if got.ErrorCode != c.want.Code || got.ErrorMessage == nil {
			t.Errorf("%s: error %d (%v), want %s", c.name, got.ErrorCode, got.ErrorMessage, c.want.Message)
		}
	}
	dup := req(false, topic("three", 4), topic("three", 5))
	for _, rt := range dup.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("duplicate topic: %d, want INVALID_REQUEST", rt.ErrorCode)
		}
	}
	if got := req(true, topic("three", 7)).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("validate only: %d", got.ErrorCode)
	}
	if ti, _ := b.node.Topic("three"); len(ti.Partitions) != 3 {
		t.Fatalf("bad or validate-only requests changed the topic: %d partitions", len(ti.Partitions))
	}
	// A manual assignment is taken as given.
	if got := req(false, topic("three", 4, []int32{self})).Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("manual assignment: %d %v", got.ErrorCode, got.ErrorMessage)
	}
	if ti, _ := b.node.Topic("three"); len(ti.Partitions) != 4 || ti.Partitions[3].Leader != self {
		t.Fatalf("after a manual assignment: %+v", ti.Partitions)
	}
	b.coord(t)
	if got := req(false, topic(node.OffsetsTopic, 60)).Topics[0]; got.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("internal topic: %d", got.ErrorCode)
	}
}

// produceN writes n single-record batches to topic-partition with kgo, at
// timestamps base, base+1, ...
func produceN(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, n int, base int64) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint("v", i)), Timestamp: time.UnixMilli(base + int64(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeleteRecordsKgo deletes records with kadm: the low watermark moves,
// ListOffsets earliest follows, a fetch below it is OFFSET_OUT_OF_RANGE,
// -1 means the high watermark, past it is OFFSET_OUT_OF_RANGE.
func TestDeleteRecordsKgo(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	b.createTopic(t, "dr", 2, nil)
	cl, adm := kadmClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, ctx, cl, "dr", 0, 10, 1000)
	produceN(t, ctx, cl, "dr", 1, 4, 1000)

	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 6})
	os.Add(kadm.Offset{Topic: "dr", Partition: 1, At: -1})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("partition 0: %+v", r)
	}
	if r, _ := res.Lookup("dr", 1); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("partition 1 at the high watermark: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 6 {
		t.Fatalf("earliest of partition 0: %d, want 6", o.Offset)
	}
	// A consumer starting at the beginning gets records 6..9 only.
	consumer := kgoClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
	var offs []int64
	for len(offs) < 4 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v", offs)
		}
		fs.EachRecord(func(r *kgo.Record) { offs = append(offs, r.Offset) })
	}
	if !slices.Equal(offs, []int64{6, 7, 8, 9}) {
		t.Fatalf("consumed offsets %v, want 6..9", offs)
	}
	rc := b.dial(t)
	fr := rc.do(fetchReq(11, 0, 1, 1<<20, "dr", map[int32]int64{0: 5})).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 6 {
		t.Fatalf("fetch below the start: error %d, log start %d", p.ErrorCode, p.LogStartOffset)
	}
	// Bad offsets and partitions, per partition.
	bad := kadm.Offsets{}
	bad.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 11})
	bad.Add(kadm.Offset{Topic: "dr", Partition: 1, At: -7})
	res, err = adm.DeleteRecords(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if r, _ := res.Lookup("dr", p); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
			t.Errorf("partition %d: %v, want OFFSET_OUT_OF_RANGE", p, r.Err)
		}
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version = 2
	for _, name := range []string{"dr", "nope"} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 7, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	for _, rt := range rc.do(req).(*kmsg.DeleteRecordsResponse).Topics {
		if p := rt.Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
			t.Errorf("%s-7: %+v, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, p)
		}
	}
}

// TestDeleteRecordsPolicy: a compact-only topic and the internal topic
// refuse DeleteRecords.
func TestDeleteRecordsPolicy(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	b.createTopic(t, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	b.coord(t)
	_, adm := kadmClient(t, b)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "compacted", Partition: 0, At: 0})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("compacted", 0); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("compacted: %v", r.Err)
	}
	if _, err := b.node.DeleteRecords(ctx, node.OffsetsTopic, 0, 0); !errors.Is(err, node.ErrInvalidTopic) {
		t.Fatalf("internal topic: %v", err)
	}
}

// TestListOffsetsMaxTimestamp: ListOffsets v7's -3 answers the record with
// the largest timestamp (not the last), through kadm and by hand for a
// record inside a batch.
func TestListOffsetsMaxTimestamp(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "mt", 1, nil)
	rc := b.dial(t)
	// Batches at 1000-1001, 5000-9000-3000, 2000: the largest is offset 3.
	for _, tss := range [][]int64{{1000, 1001}, {5000, 9000, 3000}, {2000}} {
		var recs []record.Record
		for _, ts := range tss {
			recs = append(recs, record.Record{Value: []byte("x"), Timestamp: ts})
		}
		bb, err := record.Build(record.DefaultBuildOptions(), recs)
		if err != nil {
			t.Fatal(err)
		}
		rc.do(produceReq(7, 1, "mt", 0, bb))
	}
	resp := rc.do(listOffsetsReq(7, "mt", 0, node.ListMaxTimestamp)).(*kmsg.ListOffsetsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != 9000 {
		t.Fatalf("max timestamp: error %d, offset %d, timestamp %d; want 3 at 9000", p.ErrorCode, p.Offset, p.Timestamp)
	}
	b.createTopic(t, "empty", 1, nil)
	resp = rc.do(listOffsetsReq(7, "empty", 0, node.ListMaxTimestamp)).(*kmsg.ListOffsetsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
		t.Fatalf("empty: %+v", p)
	}
	ctx := testCtx(t)
	_, adm := kadmClient(t, b)
	lo, err := adm.ListMaxTimestampOffsets(ctx, "mt")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("mt", 0); o.Err != nil || o.Offset != 3 || o.Timestamp != 9000 {
		t.Fatalf("kadm max timestamp: %+v", o)
	}
}

// TestDescribeAPIsKadm: DescribeCluster through a franz-go client (kadm's
// BrokerMetadata asks Metadata, which must agree), kadm's
// DescribeBrokerLogDirs and DescribeProducers.
func TestDescribeAPIsKadm(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	b.createTopic(t, "d", 2, nil)
	cl, adm := kadmClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, ctx, cl, "d", 1, 3, 1000)

	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dc.ErrorCode != 0 || dc.ClusterID != md.Cluster || dc.ControllerID != md.Controller || len(dc.Brokers) != 1 ||
		dc.Brokers[0].NodeID != md.Brokers[0].NodeID || dc.Brokers[0].Host != md.Brokers[0].Host || dc.Brokers[0].Port != md.Brokers[0].Port ||
		dc.ClusterID != b.node.ClusterID() || dc.ControllerID != b.node.ID() {
		t.Fatalf("DescribeCluster %+v, Metadata %+v", dc, md)
	}
	dirs, err := adm.DescribeBrokerLogDirs(ctx, b.node.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes [2]int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Errorf("dir %s: %v", d.Dir, d.Err)
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("dir %s: total %d, usable %d", d.Dir, d.TotalBytes, d.UsableBytes)
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "d" {
				sizes[p.Partition] = p.Size
			}
		})
	})
	if sizes[0] != 0 || sizes[1] == 0 {
		t.Fatalf("partition sizes %v: want partition 0 empty, 1 not", sizes)
	}
	// Only what is asked for.
	set := kadm.TopicsSet{}
	set.Add("d", 1)
	dirs, err = adm.DescribeBrokerLogDirs(ctx, b.node.ID(), set)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	dirs.Each(func(d kadm.DescribedLogDir) { d.Topics.Each(func(kadm.DescribedLogDirPartition) { n++ }) })
	if n != 1 {
		t.Fatalf("asked for one partition, got %d", n)
	}

	idem := kgoClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, ctx, idem, "d", 0, 4, 1000) // kgo is idempotent by default
	ps := kadm.TopicsSet{}
	ps.Add("d", 0, 1)
	prods, err := adm.DescribeProducers(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	p0, ok := prods["d"].Partitions[0]
	if !ok || p0.Err != nil || len(p0.ActiveProducers) != 1 {
		t.Fatalf("producers of d-0: %+v", p0)
	}
	ap := p0.ActiveProducers.Sorted()[0]
	if ap.LastSequence != 3 || ap.ProducerID < 0 || ap.CoordinatorEpoch != -1 || ap.CurrentTxnStartOffset != -1 {
		t.Fatalf("producer of d-0: %+v", ap)
	}
	ids := map[int64]bool{}
	for _, tp := range []int32{0, 1} {
		pp := prods["d"].Partitions[tp]
		for _, a := range pp.ActiveProducers {
			ids[a.ProducerID] = true
		}
	}
	if len(ids) != 2 {
		t.Fatalf("two producers wrote to d, described %d", len(ids))
	}
	// v1 asking for controllers: a ZooKeeper-mode answer.
	rc := b.dial(t)
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 1, 2
	if r := rc.do(req).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("controllers endpoint type: %d", r.ErrorCode)
	}
}

// TestOffsetDeleteKadm: kadm's DeleteOffsets on a consumer group. While a
// member subscribed to "sub" is in the group, its offsets stay
// (GROUP_SUBSCRIBED_TO_TOPIC) and those of "other" (committed but not
// subscribed) go; once the group is empty, "sub"'s go too. Unknown groups
// and partitions are refused.
func TestOffsetDeleteKadm(t *testing.T) {
	b := startBroker(t)
	ctx := testCtx(t)
	b.createTopic(t, "sub", 1, nil)
	b.createTopic(t, "other", 1, nil)
	_, adm := kadmClient(t, b)
	produce := kgoClient(t, b)
	if err := produce.ProduceSync(ctx, &kgo.Record{Topic: "sub", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member := kgoClient(t, b, kgo.ConsumerGroup("od"), kgo.ConsumeTopics("sub"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 1; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		n += fs.NumRecords()
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "sub", Partition: 0, At: 1, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "other", Partition: 0, At: 0, LeaderEpoch: -1})
	var commitErr error
	member.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"sub": {0: {Epoch: -1, Offset: 1}}, "other": {0: {Epoch: -1, Offset: 0}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if resp == nil {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					commitErr = errors.Join(commitErr, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	both := kadm.TopicsSet{}
	both.Add("sub", 0)
	both.Add("other", 0)
	res, err := adm.DeleteOffsets(ctx, "od", both)
	if err != nil {
		t.Fatal(err)
	}
	if err := res["sub"][0]; !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Fatalf("sub while subscribed: %v", err)
	}
	if err := res["other"][0]; err != nil {
		t.Fatalf("other: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, "od")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fetched.Lookup("other", 0); ok {
		t.Fatal("other's offset still committed")
	}
	if o, ok := fetched.Lookup("sub", 0); !ok || o.At != 1 {
		t.Fatalf("sub's offset: %+v %v", o, ok)
	}
	member.LeaveGroup()
	member.Close()
	res, err = adm.DeleteOffsets(ctx, "od", both)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("empty group: %v", err)
	}
	if fetched, err = adm.FetchOffsets(ctx, "od"); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets left: %+v %v", fetched, err)
	}
	if _, err := adm.DeleteOffsets(ctx, "never-seen", both); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	unknown := kadm.TopicsSet{}
	unknown.Add("sub", 5)
	unknown.Add("nope", 0)
	if err := adm.CommitAllOffsets(ctx, "od2", offs); err != nil {
		t.Fatal(err)
	}
	res, err = adm.DeleteOffsets(ctx, "od2", unknown)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res["sub"][5], kerr.UnknownTopicOrPartition) || !errors.Is(res["nope"][0], kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown partitions: %v", res)
	}
}
