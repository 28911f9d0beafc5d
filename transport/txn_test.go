package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

// txnClient is a franz-go client of b; its Request sends the transaction
// APIs to the transactional id's coordinator, found with FindCoordinator
// type 1, as a transactional producer does.
func txnClient(t *testing.T, b *testBroker) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func initTxn(t *testing.T, cl *kgo.Client, id string, timeoutMs int32, pid int64, epoch int16) (*kmsg.InitProducerIDResponse, error) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return resp, kerr.ErrorForCode(resp.ErrorCode)
}

func addPartitions(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, topic string, parts ...int32) []error {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	var errs []error
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			errs = append(errs, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	return errs
}

func endTxn(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) error {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

func describeTxn(t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	d, err := adm.DescribeTransactions(context.Background(), id)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	dt, ok := d[id]
	if !ok {
		t.Fatalf("DescribeTransactions: %q missing", id)
	}
	return dt
}

// TestTxnCoordinatorFencing: through a real broker with franz-go, a
// transactional id gets a producer id, adds partitions (an open transaction
// kadm describes and lists), and a second producer with the same id fences
// the first: its InitProducerId aborts the open transaction under a bumped
// epoch and answers CONCURRENT_TRANSACTIONS, and the first producer's EndTxn
// is refused (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before EndTxn v2).
func TestTxnCoordinatorFencing(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "out", 2, nil)
	cl, adm := txnClient(t, b)
	first, err := initTxn(t, cl, "etl", 60_000, -1, -1)
	if err != nil || first.ProducerEpoch != 0 || first.ProducerID < 0 {
		t.Fatalf("InitProducerId = %d, %d, %v", first.ProducerID, first.ProducerEpoch, err)
	}
	for _, err := range addPartitions(t, cl, "etl", first.ProducerID, 0, "out", 0, 1) {
		if err != nil {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
	}
	dt := describeTxn(t, adm, "etl")
	if dt.Err != nil || dt.State != "Ongoing" || dt.ProducerID != first.ProducerID || dt.TimeoutMillis != 60_000 ||
		len(dt.Topics["out"]) != 2 || dt.StartTimestamp <= 0 {
		t.Fatalf("DescribeTransactions = %+v", dt)
	}
	ls, err := adm.ListTransactions(context.Background(), nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if s := ls.Sorted(); len(s) != 1 || s[0].TxnID != "etl" || s[0].ProducerID != first.ProducerID {
		t.Fatalf("ListTransactions(Ongoing) = %+v", s)
	}
	if ls, _ := adm.ListTransactions(context.Background(), nil, []string{"Empty"}); len(ls.Sorted()) != 0 {
		t.Fatalf("ListTransactions(Empty) = %+v", ls.Sorted())
	}

	// The second producer.
	_, err = initTxn(t, cl, "etl", 60_000, -1, -1)
	if !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerId of the second producer: %v; want CONCURRENT_TRANSACTIONS", err)
	}
	// The abort under the bumped epoch is written (its record's commit, an
	// fsync, may come after the answer), writes its markers, then completes.
	pollUntil(t, "the fence's abort", func() bool {
		dt = describeTxn(t, adm, "etl")
		return dt.State != "Ongoing"
	})
	if (dt.State != "PrepareAbort" && dt.State != "CompleteAbort") || dt.ProducerEpoch != 1 {
		t.Fatalf("after the fence: %s at epoch %d; want PrepareAbort or CompleteAbort at 1", dt.State, dt.ProducerEpoch)
	}
	if err := endTxn(t, cl, "etl", first.ProducerID, 0, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn of the fenced producer: %v", err)
	}
	// The versions before PRODUCER_FENCED (KIP-588) get INVALID_PRODUCER_EPOCH;
	// pinned versions need a raw connection (kgo picks the newest).
	rc := b.dial(t)
	eresp := rc.do(&kmsg.EndTxnRequest{Version: 1, TransactionalID: "etl", ProducerID: first.ProducerID,
		Commit: true}).(*kmsg.EndTxnResponse)
	if err := kerr.ErrorForCode(eresp.ErrorCode); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("EndTxn v1 of the fenced producer: %v", err)
	}
	areq := &kmsg.AddPartitionsToTxnRequest{Version: 1, TransactionalID: "etl", ProducerID: first.ProducerID,
		Topics: []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{0}}}}
	aresp := rc.do(areq).(*kmsg.AddPartitionsToTxnResponse)
	if err := kerr.ErrorForCode(aresp.Topics[0].Partitions[0].ErrorCode); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("AddPartitionsToTxn v1 of the fenced producer: %v", err)
	}
}

// TestTxnCoordinatorBadInput: what the coordinator refuses, with Kafka's
// codes.
func TestTxnCoordinatorBadInput(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "out", 1, nil)
	cl, adm := txnClient(t, b)
	if _, err := initTxn(t, cl, "big", int32((15*time.Minute).Milliseconds())+1, -1, -1); !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("InitProducerId above transaction.max.timeout.ms: %v", err)
	}
	if _, err := initTxn(t, cl, "zero", 0, -1, -1); !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("InitProducerId with a zero timeout: %v", err)
	}
	if err := endTxn(t, cl, "nobody", 5, 0, true); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn of an unknown id: %v", err)
	}
	r, err := initTxn(t, cl, "tx", 60_000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := endTxn(t, cl, "tx", r.ProducerID, r.ProducerEpoch, true); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("EndTxn with no transaction open: %v", err)
	}
	if err := endTxn(t, cl, "tx", r.ProducerID+1, r.ProducerEpoch, true); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn with another producer id: %v", err)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", r.ProducerID, r.ProducerEpoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{0}}, {Topic: "missing", Partitions: []int32{0}}}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := [2]int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode}; got !=
		[2]int16{kerr.OperationNotAttempted.Code, kerr.UnknownTopicOrPartition.Code} {
		t.Fatalf("AddPartitionsToTxn with an unknown topic: codes %v", got)
	}
	if dt := describeTxn(t, adm, "tx"); dt.State != "Empty" {
		t.Fatalf("after a refused AddPartitionsToTxn: %s", dt.State)
	}
	// AddOffsetsToTxn adds the group's partition of __consumer_offsets.
	oreq := &kmsg.AddOffsetsToTxnRequest{TransactionalID: "tx", ProducerID: r.ProducerID,
		ProducerEpoch: r.ProducerEpoch, Group: "g"}
	oresp, err := oreq.RequestWith(context.Background(), cl)
	if err != nil || oresp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v, code %d", err, oresp.ErrorCode)
	}
	if dt := describeTxn(t, adm, "tx"); dt.State != "Ongoing" || len(dt.Topics["__consumer_offsets"]) != 1 {
		t.Fatalf("after AddOffsetsToTxn: %+v", dt)
	}
}

// TestTxnCoordinatorTimeout: a transaction open longer than its timeout is
// aborted by the coordinator, which fences its producer (epoch bumped).
func TestTxnCoordinatorTimeout(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "out", 1, nil)
	cl, adm := txnClient(t, b)
	r, err := initTxn(t, cl, "slow", 1, -1, -1) // a 1 ms timeout
	if err != nil {
		t.Fatal(err)
	}
	if errs := addPartitions(t, cl, "slow", r.ProducerID, r.ProducerEpoch, "out", 0); errs[0] != nil {
		t.Fatal(errs[0])
	}
	pollUntil(t, "the timed-out transaction aborted and completed", func() bool {
		return describeTxn(t, adm, "slow").State == "CompleteAbort"
	})
	if dt := describeTxn(t, adm, "slow"); dt.ProducerEpoch != r.ProducerEpoch+1 {
		t.Fatalf("after the timeout: epoch %d; want %d", dt.ProducerEpoch, r.ProducerEpoch+1)
	}
	if err := endTxn(t, cl, "slow", r.ProducerID, r.ProducerEpoch, true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn after the timeout: %v", err)
	}
}

// TestTxnProduceVerified: a transactional produce goes through the
// coordinator's check (KIP-890 part 1) over the wire: to a partition the
// transaction added it is written; to one it did not add it is refused with
// INVALID_TXN_STATE, under a transactional id the coordinator does not know
// with INVALID_PRODUCER_ID_MAPPING, and nothing is written; a control batch
// from a client is INVALID_RECORD.
func TestTxnProduceVerified(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "out", 2, nil)
	cl, _ := txnClient(t, b)
	r, err := initTxn(t, cl, "tx", 60_000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if errs := addPartitions(t, cl, "tx", r.ProducerID, r.ProducerEpoch, "out", 0); errs[0] != nil {
		t.Fatal(errs[0])
	}
	rc := b.dial(t)
	produce := func(txnID string, partition int32, batch []byte) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 10_000, &txnID
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "out"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = partition, batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce("tx", 1, txnRecords(t, r.ProducerID, 0, "not added")); code != kerr.InvalidTxnState.Code {
		t.Errorf("transactional produce to a partition not added: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	// The coordinator's answer passes through, as Kafka's
	// AddPartitionsToTxnManager passes it.
	if code := produce("other", 0, txnRecords(t, r.ProducerID, 0, "wrong id")); code != kerr.InvalidProducerIDMapping.Code {
		t.Errorf("transactional produce under an unknown transactional id: %v, want INVALID_PRODUCER_ID_MAPPING", kerr.ErrorForCode(code))
	}
	if code := produce("tx", 0, txnRecords(t, r.ProducerID, 0, "added")); code != 0 {
		t.Fatalf("transactional produce to the added partition: %v", kerr.ErrorForCode(code))
	}
	marker := record.BuildControlBatch(record.ControlBatchOptions{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
		Commit: true, Timestamp: time.Now().UnixMilli()})
	if code := produce("tx", 0, marker); code != kerr.InvalidRecord.Code {
		t.Errorf("a control batch from a client: %v, want INVALID_RECORD", kerr.ErrorForCode(code))
	}
	for p, want := range []int64{1, 0} { // partition 0: the added record; 1: nothing
		np, err := b.node.Partition("out", int32(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := np.HighWatermark(); got != want {
			t.Errorf("out/%d ends at %d, want %d", p, got, want)
		}
	}
}
