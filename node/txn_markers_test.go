package node

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/txn"
)

// TestWriteTxnMarkersLocal: one broker leading every partition of a
// transaction, a data topic's and __consumer_offsets' (where transactional
// offset commits go): the markers are appended to each, the group
// coordinator's hook hears of the __consumer_offsets ones only, the last
// stable offsets move past them, a stale epoch is refused and a client
// cannot produce a marker.
func TestWriteTxnMarkersLocal(t *testing.T) {
	c := newTestCluster(t, 1)
	c.await("a controller", func(im *meta.Image) bool { return im.Controller != -1 })
	n := c.nodes[1]
	n.txnVerifier = nil // the test plays the coordinator
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.FindCoordinator(ctx, CoordinatorGroup, "g"); err != nil {
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, OffsetsTopic) && led(im, "t") })
	var mu sync.Mutex
	var heard []int32
	n.txnOffsetsDone = func(p int32, id int64, commit bool) {
		mu.Lock()
		heard = append(heard, p)
		mu.Unlock()
		if id != 77 || !commit {
			t.Errorf("hook: producer %d commit %v", id, commit)
		}
	}
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence, opts.Transactional = 77, 0, 0, true
	txn, err := record.Build(opts, []record.Record{{Value: []byte("v"), Timestamp: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		req := ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: p, Records: append([]byte(nil), txn...)}}}
		n.Produce(ctx, &req)
		if err := req.Partitions[0].Err; err != nil {
			t.Fatal(err)
		}
		np, err := n.Partition("t", p)
		if err != nil {
			t.Fatal(err)
		}
		if lso := np.LastStableOffset(); lso != 0 {
			t.Fatalf("partition %d: LSO %d with the transaction open, want 0", p, lso)
		}
	}
	parts := []TopicPartition{{"t", 0}, {"t", 1}, {OffsetsTopic, 3}, {"t", 9}}
	errs := n.writeTxnMarkers(ctx, logs.Marker{ProducerID: 77, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1}, parts)
	for i, err := range errs[:3] {
		if err != nil {
			t.Fatalf("%v: %v", parts[i], err)
		}
	}
	if !errors.Is(errs[3], ErrUnknownPartition) {
		t.Errorf("partition 9 of a 2-partition topic: %v", errs[3])
	}
	if len(heard) != 1 || heard[0] != 3 {
		t.Errorf("group hook heard partitions %v, want [3]", heard)
	}
	for p := range int32(2) {
		np, _ := n.Partition("t", p)
		if lso, hw := np.LastStableOffset(), np.HighWatermark(); lso != 2 || hw != 2 {
			t.Errorf("partition %d: LSO %d, HW %d after the commit; want 2, 2", p, lso, hw)
		}
	}
	if err := n.WriteTxnMarker(ctx, logs.Marker{ProducerID: 77, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 0}, "t", 0); !errors.Is(err, producers.ErrTransactionCoordinatorFenced) {
		t.Errorf("marker from an older coordinator epoch: %v", err)
	}
	ctl := record.BuildControlBatch(record.ControlBatchOptions{ProducerID: 77, Commit: true})
	req := ProduceRequest{Acks: 1, Partitions: []ProducePartition{{Topic: "t", Partition: 0, Records: ctl}}}
	n.Produce(ctx, &req)
	if !errors.Is(req.Partitions[0].Err, logs.ErrControlBatch) {
		t.Errorf("produced control batch: %v", req.Partitions[0].Err)
	}
	// KIP-890 verification: with a verifier, a transactional batch the
	// coordinator did not add is refused, and one without a transactional
	// id too.
	n.txnVerifier = func(_ context.Context, id string, pid int64, epoch int16, topic string, p int32) error {
		if id != "tx" || pid != 77 || topic != "t" {
			t.Errorf("verifier asked about %q %d %s", id, pid, topic)
		}
		if p == 1 {
			return producers.ErrInvalidTxnState
		}
		return nil
	}
	opts.BaseSequence = 1
	next, _ := record.Build(opts, []record.Record{{Value: []byte("w"), Timestamp: 1}})
	tid := "tx"
	for _, tc := range []struct {
		id   *string
		p    int32
		want error
	}{{&tid, 0, nil}, {&tid, 1, producers.ErrInvalidTxnState}, {nil, 0, producers.ErrInvalidTxnState}} {
		req := ProduceRequest{TransactionalID: tc.id, Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: tc.p, Records: append([]byte(nil), next...)}}}
		n.Produce(ctx, &req)
		if err := req.Partitions[0].Err; !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
			t.Errorf("transactional produce to %d (id %v): %v, want %v", tc.p, tc.id, err, tc.want)
		}
	}
}

// TestCoordinatorMarkersBeforeTheImage: the coordinator's marker writer
// takes a partition whose topic the image lacks for a deleted topic's, done;
// but only an image that has TransactionStateTopic says which topics exist.
// Against the empty image a restarted node answers from until its loop
// publishes the first, every marker fails, retriably, instead of counting as
// written (the coordinator, resuming a prepared abort there, completed it
// with the partitions' last stable offsets stuck: TestTransactionCrash).
func TestCoordinatorMarkersBeforeTheImage(t *testing.T) {
	n := &Node{cfg: Config{NodeID: 1}, image: newImageCell(meta.Empty("c"))}
	m := txn.Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 1}
	parts := []txn.TopicPartition{{Topic: "out", Partition: 0}, {Topic: "out", Partition: 1}}
	for i, err := range n.coordinatorMarkers(context.Background(), m, parts) {
		if !errors.Is(err, ErrLeaderNotAvailable) {
			t.Errorf("%v against the empty image: %v, want ErrLeaderNotAvailable (not written, retried)", parts[i], err)
		}
	}
	// Once the image has the transaction log, a topic it lacks was
	// deleted: nothing left to mark.
	im := meta.Empty("c")
	im.Topics[TransactionStateTopic] = &meta.Topic{Name: TransactionStateTopic}
	n.image.publish(im)
	for i, err := range n.coordinatorMarkers(context.Background(), m, parts) {
		if err != nil {
			t.Errorf("%v of a deleted topic: %v, want done", parts[i], err)
		}
	}
}

// TestCoordinatorMarkersTimeOut: a leader that takes the WriteTxnMarkers
// request and never answers fails the coordinator's marker write once
// txnMarkerTimeout passes (the coordinator retries it), instead of holding
// the transaction's markers, and its partitions' last stable offsets, for
// good: the coordinator gives its writer a context without a deadline.
func TestCoordinatorMarkersTimeOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns sync.WaitGroup
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { // read, never answer
				defer conns.Done()
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	defer conns.Wait()
	defer ln.Close()
	old := txnMarkerTimeout
	txnMarkerTimeout = 100 * time.Millisecond
	defer func() { txnMarkerTimeout = old }()

	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	im := meta.Empty("c")
	im.Brokers[1] = meta.Broker{ID: 1, Host: "127.0.0.1", Port: 1}
	im.Brokers[2] = meta.Broker{ID: 2, Host: host, Port: int32(p)}
	im.Topics[TransactionStateTopic] = &meta.Topic{Name: TransactionStateTopic}
	im.Topics["out"] = &meta.Topic{Name: "out", Assignment: [][]int32{{2}},
		States: []*meta.PartitionState{{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}}}}
	n := &Node{cfg: Config{NodeID: 1}, image: newImageCell(im)}
	defer n.markerClients.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // the test's bound, not the writer's
	defer cancel()
	began := time.Now()
	errs := n.coordinatorMarkers(ctx, txn.Marker{ProducerID: 7, CoordinatorEpoch: 1}, []txn.TopicPartition{{Topic: "out", Partition: 0}})
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the marker write took %v (the test's bound: 20 s), want about txnMarkerTimeout: %v", took, errs)
	}
	if len(errs) != 1 || errs[0] == nil {
		t.Fatalf("marker to a leader that never answers: %v, want an error (retried)", errs)
	}
}
