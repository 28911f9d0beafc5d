package transport

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/record"
)

// txnRecords is a transactional batch of values from producer id, sequence
// seq on.
func txnRecords(t testing.TB, id int64, seq int32, values ...string) []byte {
	t.Helper()
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = id, 0, seq, true
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v), Timestamp: 1_700_000_000_000}
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeMarker sends a WriteTxnMarkers request for partition 0 of topic, as
// a coordinator on another broker would, and fails the test on an error.
func writeMarker(t testing.TB, rc *rawConn, topic string, id int64, commit bool) {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = id, 0, commit, 1
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp := rc.do(req).(*kmsg.WriteTxnMarkersResponse)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("marker for producer %d: %v", id, kerr.ErrorForCode(code))
	}
}

// consumeUntil reads partition 0 of topic from the start with cl's
// isolation level until it has the record whose value is last, and returns
// the values read in order.
func consumeUntil(t testing.TB, b *testBroker, topic, last string, opts ...kgo.Opt) []string {
	t.Helper()
	ctx := testCtx(t)
	cl := kgoClient(t, b, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	var got []string
	for !slices.Contains(got, last) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("waiting for %q: read %q: %v", last, got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestReadCommitted: transactional batches of three producers, one aborted,
// one committed, one left open, with plain records among them. A
// read_committed franz-go consumer gets the committed and plain records up
// to the open transaction (its last stable offset), never the aborted ones,
// and the open one's once it commits; read_uncommitted gets every data
// record. ListOffsets (kadm) answers the last stable offset for
// read_committed, DescribeProducers the open transaction's start.
func TestReadCommitted(t *testing.T) {
	b := startBroker(t, withoutTxnVerification)
	b.createTopic(t, "tx", 1, nil)
	rc := b.dial(t)
	ctx := testCtx(t)
	const a, bb, c = 1000, 1001, 1002                      // producer ids (no coordinator: markers are written directly)
	b.produce(t, "tx", 0, txnRecords(t, a, 0, "a1", "a2")) // 0-1
	b.produce(t, "tx", 0, txnRecords(t, bb, 0, "b1"))      // 2
	b.produce(t, "tx", 0, batch(t, "p", 1))                // 3: p-0
	b.produce(t, "tx", 0, txnRecords(t, a, 2, "a3"))       // 4
	writeMarker(t, rc, "tx", a, false)                     // 5
	writeMarker(t, rc, "tx", bb, true)                     // 6
	b.produce(t, "tx", 0, txnRecords(t, c, 0, "c1"))       // 7

	adm := kadm.NewClient(kgoClient(t, b))
	lso, err := adm.ListCommittedOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "tx")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("tx", 0); o.Offset != 7 {
		t.Fatalf("read_committed latest offset %d, want 7 (the open transaction's start)", o.Offset)
	}
	if o, _ := end.Lookup("tx", 0); o.Offset != 8 {
		t.Fatalf("read_uncommitted latest offset %d, want 8", o.Offset)
	}
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"tx": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	open := map[int64]int64{}
	ps.EachProducer(func(d kadm.DescribedProducer) { open[d.ProducerID] = d.CurrentTxnStartOffset })
	if open[a] != -1 || open[bb] != -1 || open[c] != 7 {
		t.Fatalf("DescribeProducers: transaction starts %v, want only %d's open at 7", open, c)
	}

	if got := consumeUntil(t, b, "tx", "p-0", kgo.FetchIsolationLevel(kgo.ReadCommitted())); fmt.Sprint(got) != "[b1 p-0]" {
		t.Fatalf("read_committed before the commit: %q", got)
	}
	writeMarker(t, rc, "tx", c, true) // 8
	if got := consumeUntil(t, b, "tx", "c1", kgo.FetchIsolationLevel(kgo.ReadCommitted())); fmt.Sprint(got) != "[b1 p-0 c1]" {
		t.Fatalf("read_committed: %q, want the committed and plain records only", got)
	}
	if got := consumeUntil(t, b, "tx", "c1"); fmt.Sprint(got) != "[a1 a2 b1 p-0 a3 c1]" {
		t.Fatalf("read_uncommitted: %q, want every data record", got)
	}
	if lso, err = adm.ListCommittedOffsets(ctx, "tx"); err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("tx", 0); o.Offset != 9 {
		t.Fatalf("read_committed latest offset after the commit %d, want 9", o.Offset)
	}
}

// TestReadCommittedAbortedList: the raw Fetch answer lists the aborted
// transaction for read_committed (its producer and first offset) and none
// for read_uncommitted, and stops at the last stable offset.
func TestReadCommittedAbortedList(t *testing.T) {
	b := startBroker(t, withoutTxnVerification)
	b.createTopic(t, "tx", 1, nil)
	rc := b.dial(t)
	b.produce(t, "tx", 0, txnRecords(t, 7, 0, "x1", "x2")) // 0-1
	writeMarker(t, rc, "tx", 7, false)                     // 2
	b.produce(t, "tx", 0, txnRecords(t, 8, 0, "y1"))       // 3, left open
	b.produce(t, "tx", 0, batch(t, "p", 1))                // 4
	// A read_committed fetch from between the last stable offset and the
	// high watermark reads nothing yet, and is not out of range.
	ahead := fetchReq(11, 0, 1, 1<<20, "tx", map[int32]int64{0: 4})
	ahead.IsolationLevel = 1
	if p := rc.do(ahead).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("read_committed from offset 4 (LSO 3, HW 5): error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	for _, level := range []int8{0, 1} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.IsolationLevel = 11, -1, 1<<20, level
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "tx"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 5 || p.LastStableOffset != 3 {
			t.Fatalf("level %d: error %d, high watermark %d, LSO %d; want 0, 5, 3", level, p.ErrorCode, p.HighWatermark, p.LastStableOffset)
		}
		var last int64 = -1
		for rest := p.RecordBatches; len(rest) > 0; {
			h, n, err := record.Next(rest, len(rest))
			if err != nil {
				t.Fatal(err)
			}
			last = h.LastOffset()
			rest = rest[n:]
		}
		switch level {
		case 0:
			if len(p.AbortedTransactions) != 0 || last != 4 {
				t.Fatalf("read_uncommitted: aborted %+v, last offset %d", p.AbortedTransactions, last)
			}
		case 1:
			if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 0 || last != 2 {
				t.Fatalf("read_committed: aborted %+v, last offset %d; want producer 7 from 0, up to 2", p.AbortedTransactions, last)
			}
		}
	}
}

// TestReadCommittedManyAborted: an aborted list larger than the fetch
// writer's pooled buffer (16,500 entries of 16 bytes, 264 KB) is written
// whole, and kmsg decodes every entry.
func TestReadCommittedManyAborted(t *testing.T) {
	b := startBroker(t, withoutTxnVerification)
	b.createTopic(t, "tx", 1, nil)
	const n = 16_500
	ctx := testCtx(t)
	for id := range int64(n) {
		b.produce(t, "tx", 0, txnRecords(t, id, 0, "x"))
		if err := b.node.WriteTxnMarker(ctx, logs.Marker{ProducerID: id}, "tx", 0); err != nil {
			t.Fatal(err)
		}
	}
	rc := b.dial(t)
	req := fetchReq(11, 0, 1, 64<<20, "tx", map[int32]int64{0: 0})
	req.IsolationLevel = 1
	req.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 20
	p := rc.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.AbortedTransactions) != n {
		t.Fatalf("error %d, %d aborted transactions listed, want %d", p.ErrorCode, len(p.AbortedTransactions), n)
	}
	for i, a := range p.AbortedTransactions {
		if a.ProducerID != int64(i) || a.FirstOffset != 2*int64(i) {
			t.Fatalf("entry %d: %+v", i, a)
		}
	}
}
