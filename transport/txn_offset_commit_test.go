package transport

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
)

// txnOffsetCommit sends a TxnOffsetCommit of version v for group with the
// producer's id and epoch, committing offsets (partition to offset) of
// topic, and returns the error code of each partition.
func txnOffsetCommit(t *testing.T, rc *rawConn, v int16, group string, pid int64, epoch int16,
	member string, generation int32, topic string, offsets map[int32]int64) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = v, "tx", group, pid, epoch
	req.MemberID, req.Generation = member, generation
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, off, 0
		meta := "m"
		rp.Metadata = &meta
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req).(*kmsg.TxnOffsetCommitResponse)
	got := map[int32]int16{}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != topic || len(resp.Topics[0].Partitions) != len(offsets) {
		t.Fatalf("TxnOffsetCommit v%d: answer %+v", v, resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		got[p.Partition] = p.ErrorCode
	}
	return got
}

func wantCodes(t *testing.T, what string, got map[int32]int16, want *kerr.Error) {
	t.Helper()
	code := int16(0)
	if want != nil {
		code = want.Code
	}
	for p, c := range got {
		if c != code {
			t.Fatalf("%s: partition %d answered %s, want %v", what, p, kerr.ErrorForCode(c), want)
		}
	}
}

// offsetFetch fetches group's offsets of topic's partitions 0 and 1 with
// OffsetFetch v (v7, one group; v8, the group list) and requireStable, and
// returns each partition's offset and error code.
func offsetFetch(t *testing.T, rc *rawConn, v int16, group, topic string, requireStable bool) map[int32][2]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = v, requireStable
	out := map[int32][2]int64{}
	if v < 8 {
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0, 1}}}
		resp := rc.do(req).(*kmsg.OffsetFetchResponse)
		for _, p := range resp.Topics[0].Partitions {
			out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
		}
		return out
	}
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0, 1}}}}}
	resp := rc.do(req).(*kmsg.OffsetFetchResponse)
	for _, p := range resp.Groups[0].Topics[0].Partitions {
		out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
	}
	return out
}

// writeOffsetsMarker writes a transaction marker for producer pid to
// partition 0 of __consumer_offsets (the broker's marker writer comes with
// the transaction coordinator: here the control batch goes to the log
// directly, then the group coordinator is told, as that writer does).
func writeOffsetsMarker(t *testing.T, b *testBroker, group string, pid int64, epoch int16, commit bool) {
	t.Helper()
	l, err := b.node.ReplicaLog(node.OffsetsTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	typ := uint16(0)
	if commit {
		typ = 1
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.Transactional, opts.Control = pid, epoch, true, true
	batch, err := record.Build(opts, []record.Record{{
		Key:       binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ),
		Value:     binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0),
		Timestamp: time.Now().UnixMilli(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	epochNow, _ := l.LatestEpoch()
	if _, err := l.Append(context.Background(), batch, epochNow); err != nil {
		t.Fatal(err)
	}
	coord, err := b.node.GroupCoordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	coord.CompleteTxn(0, pid, commit)
}

// TxnOffsetCommit v0-v3 through a broker, with kmsg: the offsets wait for
// the transaction's marker (OffsetFetch shows the old ones, and with
// RequireStable answers UNSTABLE_OFFSET_COMMIT), a commit marker makes them
// committed and an abort drops them; v3's member and generation are checked
// against a real group member (a kgo consumer); unknown partitions, an
// empty group id and a fenced producer epoch are refused with Kafka's
// codes; several commits in one transaction pass the offsets partition's
// idempotence checks.
func TestTxnOffsetCommit(t *testing.T) {
	b := startBroker(t, withoutTxnVerification, func(_ *Config, o *node.Config) { o.OffsetsPartitions = 1 })
	ctx := testCtx(t)
	b.createTopic(t, "in", 2, nil)
	rc := b.dial(t)

	// A member of group "g", to commit for with v3.
	member := kgoClient(t, b, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.DisableAutoCommit())
	var id string
	var gen int32
	for deadline := time.Now().Add(30 * time.Second); gen <= 0; {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollFetches(pctx)
		cancel()
		id, gen = member.GroupMetadata()
		if time.Now().After(deadline) {
			t.Fatal("the kgo member did not join")
		}
	}

	// v3 with the member: waits for the marker.
	wantCodes(t, "v3 member", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen, "in", map[int32]int64{0: 10, 1: 11}), nil)
	wantCodes(t, "v3 same transaction", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen, "in", map[int32]int64{0: 12, 1: 13}), nil)
	for _, v := range []int16{7, 8} {
		if got := offsetFetch(t, rc, v, "g", "in", false); got[0][0] != -1 || got[0][1] != 0 {
			t.Fatalf("OffsetFetch v%d before the marker: %v", v, got)
		}
		unstable := [2]int64{-1, int64(kerr.UnstableOffsetCommit.Code)}
		if got := offsetFetch(t, rc, v, "g", "in", true); got[0] != unstable || got[1] != unstable {
			t.Fatalf("OffsetFetch v%d RequireStable before the marker: %v", v, got)
		}
	}
	wantCodes(t, "v3 stale generation", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen-1, "in", map[int32]int64{0: 1}), kerr.IllegalGeneration)
	wantCodes(t, "v3 unknown member", txnOffsetCommit(t, rc, 3, "g", 100, 0, "nobody", gen, "in", map[int32]int64{0: 1}), kerr.UnknownMemberID)
	wantCodes(t, "unknown topic", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen, "nope", map[int32]int64{0: 1}), kerr.UnknownTopicOrPartition)
	wantCodes(t, "unknown partition", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen, "in", map[int32]int64{7: 1}), kerr.UnknownTopicOrPartition)
	wantCodes(t, "empty group id", txnOffsetCommit(t, rc, 0, "", 100, 0, "", -1, "in", map[int32]int64{0: 1}), kerr.InvalidGroupID)

	writeOffsetsMarker(t, b, "g", 100, 0, true)
	for _, stable := range []bool{false, true} {
		if got := offsetFetch(t, rc, 7, "g", "in", stable); got[0] != [2]int64{12, 0} || got[1] != [2]int64{13, 0} {
			t.Fatalf("OffsetFetch (RequireStable %v) after the commit marker: %v", stable, got)
		}
	}

	// v0-v2 name no member: accepted while the group has one. The
	// producer's next transaction aborts.
	for v := int16(0); v <= 2; v++ {
		wantCodes(t, "no member named", txnOffsetCommit(t, rc, v, "g", 100, 0, "", -1, "in", map[int32]int64{0: 50 + int64(v)}), nil)
	}
	writeOffsetsMarker(t, b, "g", 100, 0, false)
	if got := offsetFetch(t, rc, 8, "g", "in", true); got[0] != [2]int64{12, 0} {
		t.Fatalf("OffsetFetch after the abort marker: %v", got)
	}

	// A newer epoch of the producer (InitProducerId fenced the old one):
	// the old epoch is INVALID_PRODUCER_EPOCH.
	wantCodes(t, "new epoch", txnOffsetCommit(t, rc, 3, "g", 100, 1, id, gen, "in", map[int32]int64{1: 20}), nil)
	wantCodes(t, "fenced epoch", txnOffsetCommit(t, rc, 3, "g", 100, 0, id, gen, "in", map[int32]int64{1: 21}), kerr.InvalidProducerEpoch)
	writeOffsetsMarker(t, b, "g", 100, 1, true)
	if got := offsetFetch(t, rc, 7, "g", "in", true); got[1] != [2]int64{20, 0} {
		t.Fatalf("OffsetFetch after the new epoch's commit: %v", got)
	}

	// The member's own plain commits go on as before.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.MemberID, oc.Generation = 8, "g", id, gen
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "in", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 30}}}}
	if resp := rc.do(oc).(*kmsg.OffsetCommitResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetCommit: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if got := offsetFetch(t, rc, 7, "g", "in", true); got[0] != [2]int64{30, 0} {
		t.Fatalf("OffsetFetch after a plain commit: %v", got)
	}
}
