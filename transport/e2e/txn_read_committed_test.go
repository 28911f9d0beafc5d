package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/transport/broker"
)

// txnTopic fills partition 0 of a new topic with two transactions and a
// plain record, written as a coordinator and its producers would (raw
// Produce and WriteTxnMarkers requests): producer 1000's "a1", "a2", "a3"
// aborted, producer 1001's "b1" committed, "p" plain in between.
func txnTopic(t *testing.T, addr, topic string) {
	t.Helper()
	createTopic(t, addr, topic, 1, nil)
	cl := newClient(t, addr)
	ctx := testContext(t)
	seq := map[int64]int32{}
	produce := func(id int64, txn bool, values ...string) {
		t.Helper()
		opts := record.DefaultBuildOptions()
		if txn {
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = id, 0, seq[id], true
			seq[id] += int32(len(values))
		}
		var recs []record.Record
		for _, v := range values {
			recs = append(recs, record.Record{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
		}
		b, err := record.Build(opts, recs)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("produce %v: %v", values, err)
		}
	}
	marker := func(id int64, commit bool) {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed = id, commit
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("marker for %d: %v", id, err)
		}
	}
	produce(1000, true, "a1", "a2")
	produce(1001, true, "b1")
	produce(-1, false, "p")
	produce(1000, true, "a3")
	marker(1000, false)
	marker(1001, true)
}

// TestReadCommittedClients: librdkafka (kcat) and sarama consumers with
// isolation.level=read_committed read the committed and plain records of a
// partition and drop the aborted transaction's, using the aborted list the
// broker's Fetch gives; read_uncommitted reads them all. (franz-go is
// transport's TestReadCommitted.)
func TestReadCommittedClients(t *testing.T) {
	// The test plays the coordinator: no KIP-890 verification.
	b := startBroker(t, t.TempDir(), func(c *broker.Config) { c.NoTransactionVerification = true })
	txnTopic(t, b.Addr(), "txn-rc")
	const committed, all = "b1 p", "a1 a2 b1 p a3"

	t.Run("kcat", func(t *testing.T) {
		kcatPath(t)
		for level, want := range map[string]string{"read_committed": committed, "read_uncommitted": all} {
			out := runKcat(t, nil, "-b", b.Addr(), "-C", "-t", "txn-rc", "-p", "0", "-o", "beginning", "-e",
				"-X", "isolation.level="+level, "-f", "%s\n")
			if got := strings.Join(strings.Fields(string(out)), " "); got != want {
				t.Errorf("kcat %s: %q, want %q", level, got, want)
			}
		}
	})

	t.Run("sarama", func(t *testing.T) {
		for level, want := range map[sarama.IsolationLevel]string{sarama.ReadCommitted: committed, sarama.ReadUncommitted: all} {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Consumer.IsolationLevel = level
			c, err := sarama.NewConsumer([]string{b.Addr()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := c.ConsumePartition("txn-rc", 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			timeout := time.After(waitTimeout)
			for !slices.Contains(got, "p") || (level == sarama.ReadUncommitted && !slices.Contains(got, "a3")) {
				select {
				case m := <-pc.Messages():
					got = append(got, string(m.Value))
				case err := <-pc.Errors():
					t.Fatal(err)
				case <-timeout:
					t.Fatalf("sarama %v: read %q, waiting for the rest", level, got)
				}
			}
			pc.Close()
			c.Close()
			if s := strings.Join(got, " "); s != want {
				t.Errorf("sarama isolation %v: %q, want %q", level, s, want)
			}
		}
	})

	t.Run("franz-go", func(t *testing.T) {
		cl := newClient(t, b.Addr(), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"txn-rc": {0: kgo.NewOffset().AtStart()}}))
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		var got []string
		for !slices.Contains(got, "p") {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %q", got)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if s := fmt.Sprint(strings.Join(got, " ")); s != committed {
			t.Errorf("franz-go read_committed: %q, want %q", s, committed)
		}
	})
}
