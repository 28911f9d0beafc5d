package e2e_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
)

// Real clients never send a duplicate, a sequence gap or a corrupt batch on
// purpose, so these cases go over the wire by hand (kmsg), through the whole
// broker as a client would meet them.

// rawBatch builds one uncompressed batch of n records.
func rawBatch(t *testing.T, pid int64, epoch int16, seq int32, n, valueSize int) []byte {
	t.Helper()
	opts := record.DefaultBuildOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, epoch, seq
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: fmt.Appendf(make([]byte, 0, valueSize), "%0*d", valueSize, int(seq)+i),
			Timestamp: time.Now().UnixMilli()}
	}
	b, err := record.Build(opts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceRaw sends one Produce request (acks=all) of batch to topic/0 and
// returns the partition's answer.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Produce response: %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func wantCode(t *testing.T, what string, got int16, want error) {
	t.Helper()
	if err := kerr.ErrorForCode(got); !errors.Is(err, want) { // errors.Is(nil, nil) holds
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// TestIdempotentSequencesOverTheWire: a retried batch is answered with its
// original offset and not appended again; a sequence gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER; the next sequence in order is accepted.
func TestIdempotentSequencesOverTheWire(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "raw-idempotent"
	createTopic(t, b.Addr(), topic, 1, nil)
	cl := newClient(t, b.Addr())

	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionTimeoutMillis = 60_000
	initResp, err := initReq.RequestWith(testContext(t), cl)
	if err != nil || initResp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v, code %d", err, initResp.ErrorCode)
	}
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch

	first := rawBatch(t, pid, epoch, 0, 5, 10)
	r := produceRaw(t, cl, topic, first)
	wantCode(t, "first batch", r.ErrorCode, nil)
	if r.BaseOffset != 0 {
		t.Errorf("first batch at offset %d, want 0", r.BaseOffset)
	}
	r = produceRaw(t, cl, topic, first)
	wantCode(t, "retried batch", r.ErrorCode, nil)
	if r.BaseOffset != 0 {
		t.Errorf("retried batch answered with offset %d, want the original 0", r.BaseOffset)
	}
	r = produceRaw(t, cl, topic, rawBatch(t, pid, epoch, 10, 5, 10))
	wantCode(t, "sequence gap", r.ErrorCode, kerr.OutOfOrderSequenceNumber)
	r = produceRaw(t, cl, topic, rawBatch(t, pid, epoch, 5, 5, 10))
	wantCode(t, "next in order", r.ErrorCode, nil)
	if r.BaseOffset != 5 {
		t.Errorf("next batch at offset %d, want 5", r.BaseOffset)
	}
	if ends := endOffsets(t, b.Addr(), topic, 1); !slices.Equal(ends, []int64{10}) {
		t.Errorf("end offset %v, want 10: two batches of 5, the retry not appended", ends)
	}
}

// TestProduceRejectsCorruptAndOversized: a batch whose CRC does not match is
// CORRUPT_MESSAGE, one above max.message.bytes MESSAGE_TOO_LARGE; neither
// appends anything, and the connection goes on serving.
func TestProduceRejectsCorruptAndOversized(t *testing.T) {
	b := startBroker(t, t.TempDir())
	const topic = "raw-rejects"
	createTopic(t, b.Addr(), topic, 1, map[string]string{"max.message.bytes": "2000"})
	cl := newClient(t, b.Addr())

	corrupt := rawBatch(t, -1, -1, -1, 3, 10)
	corrupt[len(corrupt)-1] ^= 0xff // a record byte, covered by the CRC
	wantCode(t, "corrupt batch", produceRaw(t, cl, topic, corrupt).ErrorCode, kerr.CorruptMessage)
	wantCode(t, "oversized batch", produceRaw(t, cl, topic, rawBatch(t, -1, -1, -1, 3, 1000)).ErrorCode, kerr.MessageTooLarge)
	if ends := endOffsets(t, b.Addr(), topic, 1); !slices.Equal(ends, []int64{0}) {
		t.Fatalf("end offset %v after rejected batches, want 0", ends)
	}
	r := produceRaw(t, cl, topic, rawBatch(t, -1, -1, -1, 3, 10))
	wantCode(t, "good batch", r.ErrorCode, nil)
	if ends := endOffsets(t, b.Addr(), topic, 1); !slices.Equal(ends, []int64{3}) {
		t.Errorf("end offset %v, want 3", ends)
	}
}
