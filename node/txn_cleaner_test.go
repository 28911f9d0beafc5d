package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
)

// TestCleanerStopsAtFirstUnstableOffset: in a compacted topic, a record
// superseded by a later one is not cleaned while a transaction that began
// before it is open (the cleaner stops at the last stable offset, as
// Kafka's does), and is once the transaction is committed.
func TestCleanerStopsAtFirstUnstableOffset(t *testing.T) {
	c := newTestCluster(t, 1)
	c.await("a controller", func(im *meta.Image) bool { return im.Controller != -1 })
	n := c.nodes[1]
	n.txnVerifier = nil // the test plays the coordinator
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "c", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}}); err != nil {
		t.Fatal(err)
	}
	c.await("a leader", func(im *meta.Image) bool { return led(im, "c") })
	produce := func(b []byte) {
		t.Helper()
		req := ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "c", Partition: 0, Records: b}}}
		n.Produce(ctx, &req)
		if err := req.Partitions[0].Err; err != nil {
			t.Fatal(err)
		}
	}
	keyed := func(k, v string) []byte {
		b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Key: []byte(k), Value: []byte(v), Timestamp: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 5, 0, 0, true
	txn, err := record.Build(opts, []record.Record{{Key: []byte("t"), Value: []byte("x"), Timestamp: 1}})
	if err != nil {
		t.Fatal(err)
	}
	produce(txn)                 // 0: the open transaction
	produce(keyed("k", "first")) // 1
	for i := range 60 {          // enough to roll several 1 KiB segments
		produce(keyed(fmt.Sprint("other-", i), "v"))
	}
	produce(keyed("k", "second"))
	for i := range 30 {
		produce(keyed(fmt.Sprint("more-", i), "v"))
	}
	var p *replicated
	for _, rp := range n.localPartitions() {
		if rp.Topic == "c" {
			p = rp
		}
	}
	if p == nil {
		t.Fatal("partition c-0 not open")
	}
	hasFirst := func() bool {
		sl, err := p.Log().Read(1, 1<<20, partlog.NoLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer sl.Release()
		b, err := sl.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, size, err := record.Next(b, len(b))
			if err != nil {
				t.Fatal(err)
			}
			recs, err := record.Records(b[:size], nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if string(r.Key) == "k" && string(r.Value) == "first" {
					return true
				}
			}
			if h.BaseOffset > 1 {
				return false
			}
			b = b[size:]
		}
		return false
	}
	if err := n.cleanLogs(); err != nil {
		t.Fatal(err)
	}
	if !hasFirst() {
		t.Fatal("the cleaner removed a record past the first unstable offset")
	}
	if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: 5, Commit: true}, "c", 0); err != nil {
		t.Fatal(err)
	}
	if err := n.cleanLogs(); err != nil {
		t.Fatal(err)
	}
	if hasFirst() {
		t.Fatal("the superseded record stayed once the transaction was committed")
	}
}
