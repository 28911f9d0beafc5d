package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/wakeup"
)

// Partition.Watch fires a follower's fetch when the log grows, a
// consumer's only when the high watermark moves, and both when the
// partition changes role.
func TestPartitionWatch(t *testing.T) {
	n, rp := ledByBroker1(t)
	ctx := context.Background()
	end := rp.Log().EndOffset()
	follower, err := n.FetchPartition("r", 0, 2, end, -1)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := n.Partition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	fw, cw := wakeup.NewWaiter(1), wakeup.NewWaiter(1)
	defer fw.Close()
	defer cw.Close()
	if !follower.Watch(fw, 1) || !consumer.Watch(cw, 0) {
		t.Fatal("an open partition's Watch says closed")
	}

	// An append the follower has not fetched: the log grows, the high
	// watermark (replicated to 1 and 2) does not.
	res, err := rp.AppendEpoch(ctx, oneRecord(t, "x"), rp.epoch.Load())
	if err != nil {
		t.Fatal(err)
	}
	rp.appended()
	if got := fw.Fired(nil); !slices.Contains(got, 1) {
		t.Fatalf("follower after an append: fired %v", got)
	}
	if got := cw.Fired(nil); len(got) != 0 || consumer.ReadLimit() != end {
		t.Fatalf("consumer after an append it may not read yet: fired %v, read limit %d", got, consumer.ReadLimit())
	}

	// The follower fetches it: the high watermark moves.
	if _, err := n.FetchPartition("r", 0, 2, res.NextOffset, -1); err != nil {
		t.Fatal(err)
	}
	if got := cw.Fired(nil); !slices.Equal(got, []int{0}) || consumer.ReadLimit() != res.NextOffset {
		t.Fatalf("consumer after the high watermark moved: fired %v, read limit %d", got, consumer.ReadLimit())
	}
	fw.Fired(nil)

	// Broker 2 leads now: both look again.
	rp.mu.Lock()
	epoch := rp.r.Epoch()
	rp.mu.Unlock()
	rp.setState(time.Now(), []int32{1, 2}, &meta.PartitionState{Leader: 2, LeaderEpoch: epoch + 1, ISR: []int32{1, 2}, Version: 1000}, nil)
	if got := fw.Fired(nil); !slices.Contains(got, 1) {
		t.Fatalf("follower after a role change: fired %v", got)
	}
	if got := cw.Fired(nil); !slices.Equal(got, []int{0}) {
		t.Fatalf("consumer after a role change: fired %v", got)
	}
}
