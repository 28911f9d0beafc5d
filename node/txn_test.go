package node

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/clock/clocktest"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/txn"
	"github.com/weir-broker/weir/core/vfs"
)

// A transaction open when its coordinator's broker stops is still open
// after the restart (replayed from __transaction_state), with its timeout
// counted from its start: the coordinator aborts it once that passes,
// fencing its producer.
func TestTxnRestartKeepsOpenTransaction(t *testing.T) {
	mem := vfs.NewMem()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	cfg := Config{DataDir: "/data", FS: mem, Advertised: "127.0.0.1:9092", Logger: testLogger(t), Clock: clk}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "out", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := n.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := n.AddPartitionsToTxn(ctx, "etl", pid, epoch, []TopicPartition{{"out", 0}, {"out", 1}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("AddPartitionsToTxn: %v, %v", errs, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := n.DescribeTransaction(ctx, "etl")
	if err != nil || d.State != txn.Ongoing || d.ProducerID != pid || len(d.Partitions) != 2 {
		t.Fatalf("after the restart: %+v, %v", d, err)
	}
	clk.Advance(time.Minute)
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err = n.DescribeTransaction(ctx, "etl")
		if err == nil && d.State == txn.CompleteAbort {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v, %v after the timeout", d.State, err)
		}
		time.Sleep(time.Millisecond) // polling with a deadline: the abort's write is on a goroutine
	}
	// The abort's markers are written and the abort completes, under the
	// bumped epoch.
	if d.Epoch != epoch+1 {
		t.Fatalf("after the timeout: %v at epoch %d; want the abort at %d", d.State, d.Epoch, epoch+1)
	}
	if err := n.EndTxn(ctx, "etl", pid, epoch, true); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("EndTxn of the timed-out producer: %v", err)
	}
}

// In a cluster, every broker names the same coordinator for a transactional
// id, and the others refuse its requests with ErrNotCoordinator.
func TestTxnCoordinatorPlacement(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b1, err := c.nodes[1].FindCoordinator(ctx, CoordinatorTransaction, "etl")
	if err != nil {
		t.Fatal(err)
	}
	// Broker 2 may not see the new topic's leaders yet: retriable, as a
	// client retries COORDINATOR_NOT_AVAILABLE.
	var b2 Broker
	for {
		b2, err = c.nodes[2].FindCoordinator(ctx, CoordinatorTransaction, "etl")
		if !errors.Is(err, ErrCoordinatorNotAvailable) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil || b2.ID != b1.ID {
		t.Fatalf("broker 2 names %d (%v), broker 1 names %d", b2.ID, err, b1.ID)
	}
	coord, other := c.nodes[b1.ID], c.nodes[3-b1.ID]
	if err := coord.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("InitProducerId at the other broker: %v", err)
	}
	if _, _, err := coord.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1); err != nil {
		t.Fatalf("InitProducerId at the coordinator: %v", err)
	}
	if want := javaAbs(javaHash("etl")) % DefaultTransactionPartitions; coord.txnPartitionFor("etl") != want {
		t.Fatalf("partition %d, want %d", coord.txnPartitionFor("etl"), want)
	}
}

// A transaction whose abort was prepared (EndTxn answered) but whose markers
// were not written when its coordinator's broker stopped is aborted after
// the restart: the coordinator, loading the log, resumes the markers, and
// the partition's last stable offset reaches its high watermark. (The
// markers are held off before the restart by a min.insync.replicas the
// partition cannot meet, lowered while the broker is down.) The restarted
// node's coordinator must not take them for a deleted topic's in the empty
// image the node starts from (TestCoordinatorMarkersBeforeTheImage).
func TestTxnRestartResumesPreparedAbort(t *testing.T) {
	c := newTestCluster(t, 1)
	c.await("a controller", func(im *meta.Image) bool { return im.Controller != -1 })
	n := c.nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "out", Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{topicconfig.MinInsyncReplicas: "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.AwaitTxnLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, "out") })
	pid, epoch, err := n.InitTransactionalProducerID(ctx, "etl", time.Minute, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := n.AddPartitionsToTxn(ctx, "etl", pid, epoch, []TopicPartition{{"out", 0}}); err != nil || errs[0] != nil {
		t.Fatalf("AddPartitionsToTxn: %v, %v", errs, err)
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = pid, epoch, 0, true
	batch, err := record.Build(opts, []record.Record{{Value: []byte("v"), Timestamp: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := "etl"
	req := ProduceRequest{TransactionalID: &id, Acks: 1, Partitions: []ProducePartition{{Topic: "out", Partition: 0, Records: batch}}}
	n.Produce(ctx, &req)
	if err := req.Partitions[0].Err; err != nil {
		t.Fatal(err)
	}
	if err := n.EndTxn(ctx, "etl", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	if d, err := n.DescribeTransaction(ctx, "etl"); err != nil || d.State != txn.PrepareAbort {
		t.Fatalf("with the markers refused: %+v, %v; want PrepareAbort", d, err)
	}
	c.kill(1)

	s := c.srv.Connect()
	defer s.Close()
	cur, version, err := layout.ReadConfig(ctx, s, layout.ConfigTopicPath("out"))
	if err != nil {
		t.Fatal(err)
	}
	cur = maps.Clone(cur)
	cur[topicconfig.MinInsyncReplicas] = "1"
	if err := layout.WriteTopicConfig(ctx, s, "out", cur, version); err != nil {
		t.Fatal(err)
	}

	n = c.start(1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, derr := n.DescribeTransaction(ctx, "etl")
		np, perr := n.Partition("out", 0)
		if derr == nil && perr == nil && d.State == txn.CompleteAbort {
			if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != hw || hw != 2 {
				t.Fatalf("after the abort completed: LSO %d, HW %d; want both 2 (the batch and its marker)", lso, hw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %+v, %v, %v; want the abort completed", d, derr, perr)
		}
		time.Sleep(time.Millisecond) // polling with a deadline: the markers are written on a goroutine
	}
}
