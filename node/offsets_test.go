package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// waitOffsets waits until cond holds, checking it again each time one of
// n's replays of an offsets partition ends.
func waitOffsets(t *testing.T, n *Node, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		ended := n.offsets.replayEnded()
		if cond() {
			return
		}
		select {
		case <-ended:
		case <-timeout:
			t.Fatalf("broker %d: timed out waiting for %s", n.cfg.NodeID, what)
		}
	}
}

// allLoaded reports whether n has loaded every partition of OffsetsTopic.
func allLoaded(n *Node) bool { return n.offsetsLoaded() }

// writeOldOffsets writes an offsets store of the layout before
// __consumer_offsets in dir, with records encoded by franz-go's kmsg (so
// they are Kafka's), and returns what it holds.
func writeOldOffsets(t *testing.T, fsys vfs.FS, dir string) map[string]map[groups.TopicPartition]int64 {
	t.Helper()
	want := map[string]map[groups.TopicPartition]int64{}
	l, _, err := partlog.Open(fsys, dir+"/offsets-000001", partlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var recs []record.Record
	for i, g := range []string{"billing", "search", "audit"} {
		want[g] = map[groups.TopicPartition]int64{}
		for p := range int32(3) {
			off := int64(100*i) + int64(p)
			k := kmsg.NewOffsetCommitKey()
			k.Version, k.Group, k.Topic, k.Partition = 1, g, "orders", p
			v := kmsg.NewOffsetCommitValue()
			v.Version, v.Offset, v.LeaderEpoch, v.CommitTimestamp = 3, off, -1, time.Now().UnixMilli()
			recs = append(recs, record.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)})
			want[g][groups.TopicPartition{Topic: "orders", Partition: p}] = off
		}
	}
	b, err := record.Build(record.DefaultBuildOptions(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileSynced(fsys, dir+"/CURRENT", []byte("offsets-000001\n")); err != nil {
		t.Fatal(err)
	}
	return want
}

// A data directory with committed offsets in the old per-broker store
// (<data>/__groups) moves them into __consumer_offsets at the first start:
// every group is served with them, and once they are durable there the old
// directory is removed; a restart finds them in the topic.
func TestMigrateOldOffsets(t *testing.T) {
	mem := vfs.NewMem()
	want := writeOldOffsets(t, mem, "/data/"+groupsDir)
	check := func(n *Node) {
		t.Helper()
		waitOffsets(t, n, "every offsets partition loaded", func() bool { return allLoaded(n) })
		for g, offs := range want {
			coord, err := n.GroupCoordinator(g)
			if err != nil {
				t.Fatal(err)
			}
			got, err := coord.Fetch(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(offs) {
				t.Fatalf("group %s: %d offsets, want %d", g, len(got), len(offs))
			}
			for tp, off := range offs {
				if got[tp].Offset != off {
					t.Fatalf("group %s %v: offset %d, want %d", g, tp, got[tp].Offset, off)
				}
			}
		}
	}
	n, err := singleNode(t, mem)
	if err != nil {
		t.Fatal(err)
	}
	check(n)
	waitOffsets(t, n, "the old directory removed", func() bool {
		_, err := mem.Stat("/data/" + groupsDir)
		return errors.Is(err, fs.ErrNotExist)
	})
	if ti, err := n.Topic(OffsetsTopic); err != nil || !ti.Internal {
		t.Fatalf("%s: %+v, %v", OffsetsTopic, ti, err)
	}
	n.Close()
	n, err = singleNode(t, mem.CrashClone()) // what was made durable before the removal
	if err != nil {
		t.Fatal(err)
	}
	check(n)
}

// A garbled old store refuses the start, naming the path: offsets are not
// silently dropped.
func TestMigrateOldOffsetsCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	writeOldOffsets(t, mem, "/data/"+groupsDir)
	if err := vfs.WriteFileSynced(mem, "/data/"+groupsDir+"/CURRENT", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	_, err := singleNode(t, mem)
	if !errors.Is(err, groups.ErrCorrupt) || !strings.Contains(err.Error(), "/data/"+groupsDir+"/CURRENT") {
		t.Fatalf("open with a garbled old offsets store: %v", err)
	}
}

// __consumer_offsets is compacted while the broker runs: after many commits
// of the same offsets, and many rebalances of the same groups, a pass of
// the log cleaner leaves the last commit of each offset and the last
// metadata record of each group, which a restarted broker loads.
func TestOffsetsTopicCompacted(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{DataDir: "/data", FS: mem, Advertised: "127.0.0.1:9092", Logger: testLogger(t),
		OffsetsPartitions: 1, OffsetsSegmentBytes: 4096}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close() }()
	ctx := context.Background()
	if _, err := n.CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if err := n.AwaitOffsetsLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	const commits = 400
	want := map[string]map[groups.TopicPartition]int64{}
	// rebalance runs one member of g through a rebalance (Stable: a group
	// metadata record) and out again (Empty: another).
	rebalance := func(g string) {
		t.Helper()
		coord, err := n.GroupCoordinator(g)
		if err != nil {
			t.Fatal(err)
		}
		jr, err := coord.Join(ctx, groups.JoinRequest{Group: g, ProtocolType: "consumer",
			Protocols: []groups.Protocol{{Name: "range", Metadata: []byte("sub")}}, SessionTimeout: time.Minute, ClientID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := coord.Sync(ctx, groups.SyncRequest{Group: g, MemberID: jr.MemberID, Generation: jr.Generation,
			Assignments: map[string][]byte{jr.MemberID: []byte("a")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := coord.Leave(g, []groups.LeaveMember{{MemberID: jr.MemberID}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range commits {
		g := fmt.Sprintf("g%d", i%4)
		tp := groups.TopicPartition{Topic: "t", Partition: int32(i % 2)}
		if _, err := n.CommitOffsets(g, "", nil, -1, []groups.OffsetCommit{{TopicPartition: tp, Offset: int64(i), LeaderEpoch: -1}}); err != nil {
			t.Fatal(err)
		}
		if want[g] == nil {
			want[g] = map[groups.TopicPartition]int64{}
		}
		want[g][tp] = int64(i)
		if (i/4)%5 == 0 {
			rebalance(g) // group metadata records, superseded too
		}
	}
	ti, err := n.Topic(OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	part, ok := n.localPartition(OffsetsTopic, ti.ID, 0)
	if !ok {
		t.Fatal("no local partition of " + OffsetsTopic)
	}
	before := part.Log().Size()
	if segs := len(part.Log().Segments()); segs < 3 {
		t.Fatalf("%d segments after %d commits: the segment size did not apply", segs, commits)
	}
	if err := n.cleanLogs(); err != nil {
		t.Fatal(err)
	}
	after := part.Log().Size()
	if after*3 > before {
		t.Fatalf("cleaning took the offsets log from %d to %d bytes, want a third or less", before, after)
	}
	check := func(n *Node) {
		t.Helper()
		for g, offs := range want {
			coord, err := n.GroupCoordinator(g)
			if err != nil {
				t.Fatal(err)
			}
			got, err := coord.Fetch(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			for tp, off := range offs {
				if got[tp].Offset != off {
					t.Fatalf("group %s %v: offset %d, want %d", g, tp, got[tp].Offset, off)
				}
			}
			if d, err := coord.Describe(g); err != nil || d.ProtocolType != "consumer" || d.State != "Empty" {
				t.Fatalf("group %s: %+v, %v; want an Empty consumer group", g, d, err)
			}
		}
	}
	check(n)
	n.Close()
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.AwaitOffsetsLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	check(n)
}
