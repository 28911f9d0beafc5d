package node

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/vfs/errorfs"
)

// waitLeading polls until n has partition 0 of topic (incarnation id) open
// and leads it.
func waitLeading(t *testing.T, n *Node, topic string, id [16]byte) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if rp, ok := n.localPartition(topic, id, 0); ok && rp.leading.Load() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-0 (%x) not open and led here in time", topic, id[:4])
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// A topic created while a broker starts (registered, its Open not returned
// yet: here it waits for a partition whose open keeps failing) gets its
// directories created then: a new replica, in the ISR because the broker
// was live at the creation, not a log that a crash lost. It must not
// resign: only partitions the broker was assigned when it came up (its
// first picture of the cluster) can have lost their directory to a crash.
func TestTopicCreatedDuringStartIsNotUnclean(t *testing.T) {
	c := newTestCluster(t, 1)
	var failing atomic.Bool
	fsys := errorfs.Wrap(c.fs, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if failing.Load() && strings.Contains(path, "/data/2/a-0/") {
			return syscall.EIO
		}
		return nil
	}))
	var logs syncBuffer
	cfg := func() Config {
		cfg := c.config(2)
		cfg.FS = fsys
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return cfg
	}
	n2, err := Open(cfg())
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[2] = n2
	c.await("broker 2 registered", func(im *meta.Image) bool { return im.Live(2) })
	ctx := context.Background()
	if _, err := c.nodes[1].CreateTopic(ctx, CreateTopic{Name: "a", Partitions: -1, ReplicationFactor: -1,
		Assignment: []ReplicaAssignment{{Partition: 0, Replicas: []int32{2, 1}}}}); err != nil {
		t.Fatal(err)
	}
	c.await("topic a", func(im *meta.Image) bool { return im.Topics["a"] != nil })
	im, _ := n2.image.load()
	waitLeading(t, n2, "a", im.Topics["a"].ID) // a-0's directory is there
	c.kill(2)                                  // a clean close: a-0 is no unclean log either

	failing.Store(true)
	type opening struct {
		n   *Node
		err error
	}
	opened := make(chan opening, 1)
	go func() {
		n, err := Open(cfg())
		opened <- opening{n, err}
	}()
	// Broker 2 registers and its loop runs, a-0 failing: its Open waits.
	// A topic created now has broker 2 in its ISR.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "open a-0"); {
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 never tried a-0: %s", logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	// Broker 1 sees it registered (its picture of the cluster may lag
	// behind broker 2's own loop).
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.nodes[1].image.waitFor(lctx, func(im *meta.Image) bool { return im.Live(2) }); err != nil {
		t.Fatalf("broker 1 never saw broker 2 registered again: %v", err)
	}
	if _, err := c.nodes[1].CreateTopic(ctx, CreateTopic{Name: "new", NoWait: true, Partitions: -1, ReplicationFactor: -1,
		Assignment: []ReplicaAssignment{{Partition: 0, Replicas: []int32{2, 1}}}}); err != nil {
		t.Fatal(err)
	}
	// Broker 2 opens new-0 (its directory appears) while a-0 still fails.
	for deadline := time.Now().Add(20 * time.Second); ; {
		names, _ := c.fs.List("/data/2")
		if slices.Contains(names, "new-0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 did not open new-0: %v", names)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	select {
	case o := <-opened:
		t.Fatalf("broker 2's Open returned (%v) while a-0 could not open", o.err)
	default:
	}
	failing.Store(false)
	o := <-opened
	if o.err != nil {
		t.Fatal(o.err)
	}
	n2 = o.n
	c.nodes[2] = n2
	im, _ = n2.image.load()
	nt := im.Topics["new"]
	if nt == nil {
		t.Fatal("broker 2 does not see topic new")
	}
	// new-0 was opened, and given its first state, before Open returned
	// (Open waits for every partition assigned here to be open and led): a
	// resignation, or the warning, would be in the log by now.
	if _, ok := n2.localPartition("new", nt.ID, 0); !ok {
		t.Fatal("new-0 is not open on broker 2")
	}
	if got := logs.String(); strings.Contains(got, "unclean shutdown") {
		t.Fatalf("new-0, created while broker 2 started, was taken for a log back from an unclean shutdown:\n%s", got)
	}
}
