package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// crashTxnPartitions is how many partitions the crash tests' transaction
// spans: enough that its markers take several appends.
const crashTxnPartitions = 8

// crashTxnTimeout is the crash tests' transaction.timeout.ms: the broker
// aborts a transaction its producer abandoned (killed with the broker)
// this long after it began.
const crashTxnTimeout = 2 * time.Second

// TestTransactionCrash kills a `weir broker` process at each step of a
// transaction spanning crashTxnPartitions partitions, driven request by
// request (InitProducerId, AddPartitionsToTxn, Produce, EndTxn), both with
// SIGKILL (the page cache survives) and with a power cut (--power-cut-fs:
// whatever no fsync covered is lost), then restarts it on the same data:
//
//	after-add       AddPartitionsToTxn answered, nothing produced
//	after-some      records appended to the first half of the partitions
//	after-all       records appended to every partition
//	after-commit    EndTxn(commit) answered: the markers are being written
//	after-abort     EndTxn(abort) answered
//
// Afterwards no partition's last stable offset stays behind its high
// watermark (the abandoned transactions are aborted by their timeout), and
// read_committed sees the transaction whole or not at all: every record of
// it on every partition, or none. A transaction whose commit was answered
// is committed; one never committed is invisible. (The power-cut runs use a
// topic with weir.durable.acks=true: with acks that mean the page cache, a
// power cut loses acknowledged records of any kind, a transaction's on some
// partitions among them.) The producer, left with its old epoch, is
// fenced once the broker has aborted for it.
func TestTransactionCrash(t *testing.T) {
	steps := []string{"after-add", "after-some", "after-all", "after-commit", "after-abort"}
	for _, kill := range []string{"sigkill", "power-cut"} {
		for _, step := range steps {
			t.Run(kill+"/"+step, func(t *testing.T) {
				t.Parallel()
				crashTransaction(t, kill, step)
			})
		}
	}
}

func crashTransaction(t *testing.T, kill, step string) {
	began := time.Now()
	dir, addr := t.TempDir(), brokertest.FreeAddr(t)
	bin := weirBinary(t) // built on first use: before any deadline starts
	var proc *brokerproc.Process
	start := func() {
		t.Helper()
		p, err := brokerproc.Start(testContext(t), brokerproc.Options{
			Weir: bin, DataDir: dir, Listen: addr, DeathSignal: syscall.SIGKILL,
			PowerCutFS: kill == "power-cut", Flags: []string{"--log-level", "info"},
		})
		if err != nil {
			t.Fatal(err)
		}
		proc = p
	}
	start()
	t.Cleanup(func() {
		if proc != nil {
			if err := proc.Stop(); err != nil {
				t.Errorf("broker: %v", err)
			}
		}
	})
	const topic = "txn-crash"
	cl := brokertest.Client(t, addr, kgo.RequestRetries(20))
	// A power cut loses what no fsync covered, acknowledged or not, unless
	// the topic's acks wait for the disk: the power-cut runs use such a
	// topic, as anyone wanting transactions to survive power cuts on one
	// node must (the coordinator's own log, __transaction_state, always
	// is).
	var configs map[string]string
	if kill == "power-cut" {
		configs = map[string]string{"weir.durable.acks": "true"}
	}
	brokertest.CreateTopic(t, addr, topic, crashTxnPartitions, configs)
	ctx := testContext(t)

	// Records outside the transaction, before it, on every partition: they
	// stay visible whatever happens to it.
	before := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(crashTxnPartitions) {
		if err := before.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("before")}).FirstErr(); err != nil {
			t.Fatalf("producing before the transaction: %v", err)
		}
	}

	txnID := "crash-" + kill + "-" + step
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &txnID
	init.TransactionTimeoutMillis = int32(crashTxnTimeout / time.Millisecond)
	ir, err := init.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ir.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txnID, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic = topic
	for p := range int32(crashTxnPartitions) {
		at.Partitions = append(at.Partitions, p)
	}
	add.Topics = append(add.Topics, at)
	ar, err := add.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("AddPartitionsToTxn %s/%d: %v", rt.Topic, rp.Partition, err)
			}
		}
	}

	produceTo := func(parts int32) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID = &txnID
		req.Acks = -1
		req.TimeoutMillis = 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p := range parts {
			batch, err := record.Build(record.BuildOptions{
				PartitionLeaderEpoch: record.NoPartitionLeaderEpoch,
				ProducerID:           pid, ProducerEpoch: epoch, BaseSequence: 0, Transactional: true,
			}, txnRecords(p))
			if err != nil {
				t.Fatal(err)
			}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("transactional Produce: %v", err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Fatalf("transactional Produce %s/%d: %v", rt.Topic, rp.Partition, err)
				}
			}
		}
	}
	endTxn := func(commit bool) {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("EndTxn(commit %v): %v", commit, err)
		}
	}
	switch step {
	case "after-some":
		produceTo(crashTxnPartitions / 2)
	case "after-all":
		produceTo(crashTxnPartitions)
	case "after-commit":
		produceTo(crashTxnPartitions)
		endTxn(true)
	case "after-abort":
		produceTo(crashTxnPartitions)
		endTxn(false)
	}

	t.Logf("killing the broker (%s), %v into the test", kill, time.Since(began))
	switch kill {
	case "sigkill":
		if err := proc.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-proc.Exited()
	case "power-cut":
		if err := proc.PowerCut(); err != nil {
			t.Fatal(err)
		}
	}
	proc = nil
	restarted := time.Now()
	start()
	t.Logf("restarted in %v", time.Since(restarted))

	// No stuck LSO: every partition's last stable offset reaches its high
	// watermark.
	check := brokertest.Client(t, addr)
	var hw, lso []int64 // the latest answers (a failed ListOffsets keeps the one before)
	stable := func() bool {
		h, l := listEnds(ctx, check, topic, 0), listEnds(ctx, check, topic, 1)
		if h == nil || l == nil {
			return false
		}
		hw, lso = h, l
		for p := range hw {
			if lso[p] != hw[p] {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(4 * waitTimeout)
	for !stable() {
		if time.Now().After(deadline) {
			// What the broker said is what tells why: the coordinator logs
			// a marker write that keeps failing.
			t.Fatalf("the last stable offsets %v stayed behind the high watermarks %v; the broker's output:\n%s",
				lso, hw, proc.Output())
		}
		<-time.After(20 * time.Millisecond) // polling, as waitFor does
	}

	t.Logf("last stable offsets at the high watermarks %v after the restart", time.Since(restarted))

	// Whole or nothing.
	committed := readCommitted(t, addr, topic)
	var whole, none int
	for p := range int32(crashTxnPartitions) {
		got := committed[p]
		if len(got) == 0 || got[0] != "before" {
			t.Errorf("partition %d: read_committed %v, want the record written before the transaction first", p, got)
			continue
		}
		switch txn := strings.Join(got[1:], ","); txn {
		case "":
			none++
		case strings.Join(valuesOf(txnRecords(p)), ","):
			whole++
		default:
			t.Errorf("partition %d: read_committed shows %v of the transaction: part of it", p, got[1:])
		}
	}
	produced := map[string]int{"after-add": 0, "after-some": crashTxnPartitions / 2}[step]
	if step == "after-all" || step == "after-commit" || step == "after-abort" {
		produced = crashTxnPartitions
	}
	switch {
	case whole != 0 && whole != crashTxnPartitions:
		t.Errorf("the transaction is visible on %d of its %d partitions", whole, crashTxnPartitions)
	case whole > 0 && step != "after-commit":
		t.Errorf("%s: the transaction is visible, but its commit was never asked for", step)
	case whole == 0 && step == "after-commit":
		t.Errorf("the transaction's commit was answered, so it must be committed; it is invisible")
	}
	t.Logf("%s %s: %d records produced in the transaction's partitions, visible on %d of %d partitions afterwards",
		kill, step, produced, whole, crashTxnPartitions)

	// The producer's old epoch is fenced once the broker aborted for it (a
	// committed or aborted transaction leaves the epoch as it was).
	if step != "after-commit" && step != "after-abort" {
		waitForLong(t, "the coordinator to abort the abandoned transaction", func() bool {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{txnID}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
				return false
			}
			return resp.TransactionStates[0].State == "CompleteAbort"
		})
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, true
		asked := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("EndTxn after the restart: %v", err)
		}
		t.Logf("EndTxn after the restart answered in %v", time.Since(asked))
		code := resp.ErrorCode
		fenced := code == kerr.ProducerFenced.Code || code == kerr.InvalidProducerEpoch.Code
		if !fenced {
			t.Errorf("EndTxn(commit) with the epoch the broker aborted under: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH",
				kerr.ErrorForCode(code))
		}
	}
}

// txnRecords are the records the crash tests' transaction writes to
// partition p.
func txnRecords(p int32) []record.Record {
	now := time.Now().UnixMilli()
	var rs []record.Record
	for i := range 3 {
		rs = append(rs, record.Record{Value: fmt.Appendf(nil, "txn-p%d-%d", p, i), Timestamp: now})
	}
	return rs
}

func valuesOf(rs []record.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// listEnds returns topic's latest offsets at isolation level (0: the high
// watermarks, 1: the last stable offsets), nil when any partition fails.
func listEnds(ctx context.Context, cl *kgo.Client, topic string, isolation int8) []int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(crashTxnPartitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		return nil
	}
	out := make([]int64, crashTxnPartitions)
	for _, rp := range resp.Topics[0].Partitions {
		if rp.ErrorCode != 0 || rp.Partition < 0 || rp.Partition >= crashTxnPartitions {
			return nil
		}
		out[rp.Partition] = rp.Offset
	}
	return out
}

// readCommitted reads every partition of topic from its start to its last
// stable offset, read_committed.
func readCommitted(t *testing.T, addr, topic string) map[int32][]string {
	t.Helper()
	ctx := testContext(t)
	lso := listEnds(ctx, brokertest.Client(t, addr), topic, 1)
	if lso == nil {
		t.Fatalf("ListOffsets read_committed %s failed", topic)
	}
	// A sentinel past the last stable offset, written after it, marks the
	// end of what there is to read on each partition.
	sentinels := brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(crashTxnPartitions) {
		if err := sentinels.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("sentinel")}).FirstErr(); err != nil {
			t.Fatalf("producing the sentinel: %v", err)
		}
	}
	got := readPartitions(t, addr, topic, kgo.ReadCommitted(), func(got map[int32][]string) bool {
		for p := range int32(crashTxnPartitions) {
			if l := got[p]; len(l) == 0 || l[len(l)-1] != "sentinel" {
				return false
			}
		}
		return true
	}, nil)
	for p := range got {
		got[p] = got[p][:len(got[p])-1]
	}
	return got
}
