package mirror_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// TestMirrorForwardsTransactions: a source partition holding committed
// and aborted transactions between plain records is forwarded; the target
// holds the plain and committed records in source order, none of the
// aborted ones, and the mirror's position reaches the source end (past the
// transaction markers, which are not copied).
func TestMirrorForwardsTransactions(t *testing.T) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	brokertest.CreateTopic(t, src, "tx", 1, nil)
	plain := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("fwd-test"))
	ctx := brokertest.Context(t)
	var want []string
	for round := range 6 {
		v := fmt.Sprintf("plain %d", round)
		if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := round%2 == 0
		for i := range 3 {
			v := fmt.Sprintf("txn %d/%d commit=%v", round, i, commit)
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				want = append(want, v)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t, src, dst, "tx")
	cfg.Forward = true
	_, stop := runMirror(t, cfg)
	end := brokertest.ListOffsets(t, src, "tx", 1, -1)
	waitFor(t, "the position at the source end", func() bool {
		return fmt.Sprint(brokertest.CommittedOffsets(t, dst, mirror.DefaultName, "tx", 1)) == fmt.Sprint(end)
	})
	stop()
	got := readAll(t, dst, "tx", 1)[0]
	if len(got) != len(want) {
		t.Fatalf("target holds %d records, want %d (source end %v)", len(got), len(want), end)
	}
	for i, r := range got {
		if string(r.Value) != want[i] {
			t.Fatalf("target record %d is %q, want %q", i, r.Value, want[i])
		}
	}
}
