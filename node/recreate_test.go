package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/vfs"
)

var errHeld = errors.New("held by the test")

// pollUntil polls cond until it holds, failing the test after 20 s.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		<-tick.C
	}
}

// TestCreateWhileDeletionPending drives the order of a re-creation on one
// broker: while a topic's deletion is requested and not finished (the
// controller's removal of the topic is held), CreateTopics refuses the name
// with Kafka's "marked for deletion" (TOPIC_ALREADY_EXISTS); so it does
// for a request whose topic is gone already (the image knows nothing of it:
// the store tells), until the controller drops that orphan. Once the
// deletion finished, the name is created again: a new incarnation with a
// leader for every partition, which takes a record.
func TestCreateWhileDeletionPending(t *testing.T) {
	srv := memstore.NewServer()
	n, err := Open(Config{DataDir: "/data", NodeID: 1, FS: vfs.NewMem(), Advertised: "localhost:9092",
		Coord: srv.Connect(), OffsetsPartitions: 1, OffsetsReplicationFactor: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}

	hold := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.DeleteTopicPath("t")),
		Times: -1, Err: errHeld})
	deleted := make(chan error, 1)
	go func() {
		_, err := n.DeleteTopic(ctx, "t")
		deleted <- err
	}()
	pollUntil(t, "the controller's first attempt to finish the deletion", func() bool { return hold.Struck() > 0 })
	refused := func(name string) {
		t.Helper()
		_, err := n.CreateTopic(ctx, CreateTopic{Name: name, Partitions: 2, ReplicationFactor: 1})
		if want := "Topic '" + name + "' is marked for deletion."; !errors.Is(err, ErrTopicExists) ||
			!strings.Contains(err.Error(), want) {
			t.Fatalf("create %s while its deletion is pending: %v, want ErrTopicExists saying %q", name, err, want)
		}
	}
	refused("t")

	// An orphan request (its topic deleted already, as a broker with a
	// stale picture may ask): the image has no such topic, the store
	// refuses the name until the controller dropped the request.
	store := srv.Connect()
	defer store.Close()
	holdOrphan := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.DeleteTopicPath("o")),
		Times: -1, Err: errHeld})
	if err := layout.RequestDeletion(ctx, store, "o"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the controller's first attempt to drop the orphan request", func() bool { return holdOrphan.Struck() > 0 })
	if im, _ := n.image.load(); im.Topics["o"] != nil {
		t.Fatalf("the image has a topic o: %+v", im.Topics["o"])
	}
	refused("o")
	holdOrphan.Cancel()
	pollUntil(t, "the orphan request dropped", func() bool {
		ok, _, err := store.Exists(ctx, layout.DeleteTopicPath("o"))
		return err == nil && !ok
	})
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "o", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create o after its orphan request was dropped: %v", err)
	}

	hold.Cancel()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, err := n.image.waitFor(ctx, func(im *meta.Image) bool { return im.Topics["t"] == nil }); err != nil {
		t.Fatalf("t is still in the image after its deletion: %v", err)
	}
	ti, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("create t after its deletion finished: %v", err)
	}
	if ti.ID == old.ID {
		t.Fatalf("the new t has the old one's id %x", ti.ID)
	}
	for _, p := range ti.Partitions {
		if p.Leader != 1 {
			t.Fatalf("new t partition %d: leader %d, want 1", p.Index, p.Leader)
		}
	}
	for p := range int32(2) {
		req := ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: "t", Partition: p, Records: oneRecord(t, "v")}}}
		n.Produce(ctx, &req)
		if err := req.Partitions[0].Err; err != nil || req.Partitions[0].BaseOffset != 0 {
			t.Fatalf("produce to the new t/%d: offset %d, %v; want 0", p, req.Partitions[0].BaseOffset, err)
		}
	}
}

// TestRecreateTopicInCluster: on three brokers, a topic (3 replicas) is
// created on one broker, used, deleted on the next and created again at
// once on the third, ten times. A broker whose picture still has the
// deletion pending refuses the name (TOPIC_ALREADY_EXISTS, as Kafka: the
// client retries); every deletion finishes on every broker, and every
// incarnation gets a leader on every broker's picture and takes a record.
func TestRecreateTopicInCluster(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("three brokers and a controller", func(im *meta.Image) bool { return len(im.Brokers) == 3 && im.Controller != -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[[16]byte]bool{}
	refusals := 0
	for round := range 10 {
		creator := c.nodes[int32(round%3+1)]
		var ti TopicInfo
		pollUntil(t, fmt.Sprintf("round %d: the creation", round), func() bool {
			var err error
			ti, err = creator.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 3})
			if errors.Is(err, ErrTopicExists) {
				refusals++
				return false // the last deletion is not over in this broker's picture
			}
			if err != nil {
				t.Fatalf("round %d: create: %v", round, err)
			}
			return true
		})
		if seen[ti.ID] {
			t.Fatalf("round %d: the id %x of an earlier incarnation", round, ti.ID)
		}
		seen[ti.ID] = true
		c.await(fmt.Sprintf("round %d: leaders of the new t", round), func(im *meta.Image) bool {
			nt := im.Topics["t"]
			return nt != nil && nt.ID == ti.ID && !nt.Deleting && led(im, "t")
		})
		im, _ := c.nodes[1].image.load()
		for p, l := range leaders(im, "t") {
			// acks=1: the test brokers' followers cannot reach their
			// leaders (no listeners), a deletion's acks need no data.
			req := ProduceRequest{Acks: 1, Partitions: []ProducePartition{{Topic: "t", Partition: int32(p), Records: oneRecord(t, "x")}}}
			c.nodes[l].Produce(ctx, &req)
			if off, err := req.Partitions[0].BaseOffset, req.Partitions[0].Err; err != nil || off != 0 {
				t.Fatalf("round %d: produce to t/%d on its leader %d: offset %d, %v; want 0", round, p, l, off, err)
			}
		}
		if _, err := c.nodes[int32((round+1)%3+1)].DeleteTopic(ctx, "t"); err != nil {
			t.Fatalf("round %d: delete: %v", round, err)
		}
	}
	c.await("the last deletion finished", func(im *meta.Image) bool { return im.Topics["t"] == nil })
	t.Logf("creations refused while a deletion was pending in the creator's picture: %d", refusals)
}
