package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/replica"
)

// A follower may fetch past what the replica has been told of the leader's
// log end: a produce's records are readable as soon as the log publishes
// them, before the producer's goroutine reports the append. The fetch is
// in range (it must not send the follower through an epoch query and a
// long poll, which held acks=all for replica.fetch.wait.max.ms) and moves
// the follower's log end and the high watermark.
func TestFollowerFetchPastReportedEnd(t *testing.T) {
	n, rp := ledByBroker1(t)
	ctx := context.Background()
	// The append the producer's goroutine has not reported yet.
	res, err := rp.AppendEpoch(ctx, oneRecord(t, "x"), rp.epoch.Load())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.FetchPartition("r", 0, 2, res.NextOffset, -1); err != nil {
		t.Fatalf("a follower's fetch at the log end %d: %v", res.NextOffset, err)
	}
	rp.mu.Lock()
	leo, hw := rp.r.FollowerLogEnd(2), rp.r.HighWatermark()
	rp.mu.Unlock()
	if leo != res.NextOffset || hw != res.NextOffset {
		t.Fatalf("follower log end %d, high watermark %d; want both %d", leo, hw, res.NextOffset)
	}
	if _, err := n.FetchPartition("r", 0, 2, res.NextOffset+1, -1); !errors.Is(err, replica.ErrOffsetOutOfRange) {
		t.Fatalf("a fetch past the log end: %v, want out of range", err)
	}
}

// The replica lag metric counts the followers heard from in the leader's
// term: one not heard from yet has an unknown lag, not the whole log (a
// spike at every election otherwise).
func TestReplicaLagOfFollowersHeardFrom(t *testing.T) {
	now := time.Now()
	r := replica.New(replica.Config{Self: 1}, 100, 100)
	r.SetState(now, []int32{1, 2, 3}, &meta.PartitionState{Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}, Version: 1}, 100)
	rp := &replicated{r: r}
	if st := rp.replicationStats(); !st.leading || st.lag != 0 {
		t.Fatalf("no follower heard from: %+v, want leading with lag 0", st)
	}
	if err := r.FollowerFetch(now, 2, 60); err != nil {
		t.Fatal(err)
	}
	if st := rp.replicationStats(); st.lag != 40 {
		t.Fatalf("follower 2 at 60 of 100, follower 3 not heard from: lag %d, want 40", st.lag)
	}
}

// A produce accepted while this broker led, whose append comes after it
// became a follower, is refused (NOT_LEADER): appended, it would sit where
// the new leader has other records, and the replicas would differ for
// good. appendTo stamps with the partition's epoch as it is then, the one
// the broker now follows; the log is fenced above it.
func TestLateProduceAfterLeadershipLostRefused(t *testing.T) {
	n, rp := ledByBroker1(t)
	ctx := context.Background()
	w := &ProducePartition{Topic: "r", Partition: 0, Records: oneRecord(t, "late")}
	rp.appends.begin() // as Produce does, having found this broker leading
	// Now another broker leads, in the next epoch.
	rp.mu.Lock()
	epoch, version := rp.r.Epoch(), int32(1000)
	rp.mu.Unlock()
	rp.setState(time.Now(), []int32{1, 2}, &meta.PartitionState{Leader: 2, LeaderEpoch: epoch + 1, ISR: []int32{1, 2}, Version: version}, nil)
	end := rp.Log().EndOffset()
	n.appendTo(ctx, rp, w, 1)
	if !errors.Is(w.Err, ErrNotLeader) || rp.Log().EndOffset() != end {
		t.Fatalf("a produce appended after the broker became a follower: err %v, log end %d -> %d", w.Err, end, rp.Log().EndOffset())
	}
}

// ledByBroker1 starts brokers 1 and 2 with topic "r" of one partition
// replicated on both, and returns broker 1 and its replica once it leads.
func ledByBroker1(t *testing.T) (*Node, *replicated) {
	t.Helper()
	c := newTestCluster(t, 1, 2)
	c.await("both brokers", func(im *meta.Image) bool { return im.Live(1) && im.Live(2) })
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "r", Partitions: -1, ReplicationFactor: -1,
		Assignment: []ReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
	c.await("a leader", func(im *meta.Image) bool { return led(im, "r") })
	p, err := c.nodes[1].Partition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	return c.nodes[1], p.p
}
