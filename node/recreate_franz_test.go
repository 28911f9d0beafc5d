package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/core/coord/memstore"
)

// TestRecreateTopicFranz: a topic created, used, deleted and created again
// at once, 20 times, with franz-go's admin client on one broker. Every
// creation succeeds with a leader for every partition (a re-creation read
// as its predecessor's deletion once hung "Deleting" for good), every
// deletion finishes, and every incarnation takes a record and gives it
// back.
func TestRecreateTopicFranz(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, addr := startServedWith(t, memstore.NewServer(), 1, nil)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var ids [][16]byte
	for round := range 20 {
		created, err := adm.CreateTopic(ctx, 2, 1, nil, "t")
		if err == nil {
			err = created.Err
		}
		if err != nil {
			t.Fatalf("round %d: create: %v", round, err)
		}
		// The broker's own view (kadm's ListTopics may answer from the
		// client's metadata cache, which can still hold the last
		// incarnation).
		ti, err := n.Topic("t")
		if err != nil || ti.ID != created.ID || len(ti.Partitions) != 2 {
			t.Fatalf("round %d: topic %+v, %v; want 2 partitions, id %x", round, ti, err, [16]byte(created.ID))
		}
		for _, p := range ti.Partitions {
			if p.Leader != 1 {
				t.Fatalf("round %d: partition %d has leader %d, want 1", round, p.Index, p.Leader)
			}
		}
		for _, id := range ids {
			if id == ti.ID {
				t.Fatalf("round %d: topic id %x of an earlier incarnation", round, id)
			}
		}
		ids = append(ids, ti.ID)
		roundTrip(ctx, t, addr, fmt.Sprintf("round-%d", round))

		deleted, err := adm.DeleteTopic(ctx, "t")
		if err == nil {
			err = deleted.Err
		}
		if err != nil {
			t.Fatalf("round %d: delete: %v", round, err)
		}
		if ti, err := n.Topic("t"); err == nil {
			t.Fatalf("round %d: after the deletion, the topic is there: %+v", round, ti)
		}
	}
}

// roundTrip produces one record to topic t and consumes it back, with a
// client of its own (each incarnation is new to it).
func roundTrip(ctx context.Context, t *testing.T, addr, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", value, err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %v", value, err)
		}
		for _, e := range fs.Errors() {
			t.Logf("consume %s: %s/%d: %v", value, e.Topic, e.Partition, e.Err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if len(recs) != 1 || string(recs[0].Value) != value {
			t.Fatalf("consumed %d records (first %q), want exactly %q", len(recs), recs[0].Value, value)
		}
		return
	}
}
