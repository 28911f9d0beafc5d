package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnListDescribe: an id with a transaction open (InitProducerId and
// AddPartitionsToTxn sent with franz-go) is listed by `weir txn list` and
// described by `weir txn describe`; one between transactions is listed only
// with --all; an unknown id is an error naming it.
func TestTxnListDescribe(t *testing.T) {
	addr := startTestBroker(t)
	cl := newTestClient(t, addr)
	createTestTopic(t, addr, "out", 2, nil)
	open := initProducer(t, cl, "open-tx")
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = "open-tx", open.ProducerID, open.ProducerEpoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "out", Partitions: []int32{1, 0}}}
	resp, err := req.RequestWith(waitContext(t), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v, %+v", err, resp)
	}
	initProducer(t, cl, "idle-tx")

	out, _ := mustCLI(t, "", "txn", "list", "-b", addr)
	if !strings.Contains(out, "open-tx") || !strings.Contains(out, "Ongoing") || strings.Contains(out, "idle-tx") {
		t.Fatalf("weir txn list:\n%s", out)
	}
	out, _ = mustCLI(t, "", "txn", "list", "--all", "-b", addr)
	if !strings.Contains(out, "open-tx") || !strings.Contains(out, "idle-tx") {
		t.Fatalf("weir txn list --all:\n%s", out)
	}
	out, _ = mustCLI(t, "", "txn", "describe", "open-tx", "-b", addr)
	for _, want := range []string{"state: Ongoing", "partitions: out-0 out-1", "timeout: 1m0s", "producer epoch: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("weir txn describe lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := cli(t, "", "txn", "describe", "nobody", "-b", addr); err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("describe of an unknown id: %v", err)
	}
}

func initProducer(t *testing.T, cl *kgo.Client, id string) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60_000
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId of %q: %v", id, err)
	}
	return resp
}
