package transport

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnservedAPILogged: a request for an API weir does not serve
// (AddOffsetsToTxn), and one for a version of a served API below what it
// serves (Fetch v3), each close their connection with one INFO line naming
// the API, the version and the client id, so the operator can tell which
// client needs what.
func TestUnservedAPILogged(t *testing.T) {
	b := startBroker(t)
	for _, tc := range []struct {
		req      kmsg.Request
		clientID string
		want     []string
	}{
		{&kmsg.AddOffsetsToTxnRequest{Version: 1, TransactionalID: "tx", Group: "g"}, "txn-tool",
			[]string{"INFO ", "api=AddOffsetsToTxn", "key=25", "version=1", "client_id=txn-tool", "does not serve"}},
		{&kmsg.FetchRequest{Version: 3, ReplicaID: -1}, "old-consumer",
			[]string{"INFO ", "api=Fetch", "key=1", "version=3", "client_id=old-consumer", "serves v4-v"}},
	} {
		rc := b.dial(t)
		id := tc.clientID
		// Two requests in one write: should the server read the second
		// before closing, still one line.
		rc.write(append(frame(tc.req, 1, &id), frame(tc.req, 2, &id)...))
		rc.expectClosed()
		var lines []string
		pollUntil(t, "the unserved request logged", func() bool {
			lines = b.logs.find("client_id=" + tc.clientID)
			return len(lines) > 0
		})
		if len(lines) != 1 {
			t.Errorf("%s: %d log lines, want 1: %q", tc.clientID, len(lines), lines)
		}
		for _, w := range tc.want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("log line %q lacks %q", lines[0], w)
			}
		}
	}
	b.checkAlive(t)
}

// TestTransactionalInitProducerIDRefused: a transactional InitProducerId is
// answered INVALID_REQUEST (non-retriable; its text sends the user to the
// broker logs), and the broker logs, at WARN, that transactions are not
// supported, with the transactional id and the client id. A plain
// (idempotent) InitProducerId still gets an id.
func TestTransactionalInitProducerIDRefused(t *testing.T) {
	b := startBroker(t)
	rc := b.dial(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.TransactionalID = kmsg.StringPtr("orders-tx")
	req.TransactionTimeoutMillis = 60000
	resp := rc.do(req).(*kmsg.InitProducerIDResponse)
	err := kerr.ErrorForCode(resp.ErrorCode)
	if err != kerr.InvalidRequest || kerr.IsRetriable(err) || resp.ProducerID != -1 {
		t.Fatalf("transactional InitProducerId: %v, producer id %d; want INVALID_REQUEST, -1", err, resp.ProducerID)
	}
	lines := b.logs.find("transactional_id=orders-tx")
	if len(lines) != 1 {
		t.Fatalf("%d log lines name the transactional id, want 1: %q", len(lines), b.logs.find("transaction"))
	}
	for _, w := range []string{"WARN ", "transactions", "client_id=weir-test"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("log line %q lacks %q", lines[0], w)
		}
	}

	plain := kmsg.NewPtrInitProducerIDRequest()
	plain.Version = 4
	presp := rc.do(plain).(*kmsg.InitProducerIDResponse)
	if presp.ErrorCode != 0 || presp.ProducerID < 0 {
		t.Errorf("idempotent InitProducerId: error %d, producer id %d", presp.ErrorCode, presp.ProducerID)
	}
}
