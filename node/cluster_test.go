package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

// A cluster of nodes in one process on one in-memory coordination store:
// the deterministic bed for the cluster's rules (the real thing, with
// ZooKeeper, sockets and real clients, is in transport/e2e).
type testCluster struct {
	t     *testing.T
	srv   *memstore.Server
	fs    vfs.FS
	nodes map[int32]*Node
}

func newTestCluster(t *testing.T, brokers ...int32) *testCluster {
	t.Helper()
	c := &testCluster{t: t, srv: memstore.NewServer(), fs: vfs.NewMem(), nodes: map[int32]*Node{}}
	for _, id := range brokers {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	return c
}

// start opens broker id on its data directory (kept across restarts).
func (c *testCluster) start(id int32) *Node {
	c.t.Helper()
	n, err := Open(c.config(id))
	if err != nil {
		c.t.Fatalf("broker %d: %v", id, err)
	}
	c.nodes[id] = n
	return n
}

func (c *testCluster) config(id int32) Config {
	return Config{DataDir: filepath.Join("/data", fmt.Sprint(id)), NodeID: id, FS: c.fs,
		Advertised: fmt.Sprintf("broker-%d.test:%d", id, 9092+id), Coord: c.srv.Connect(),
		OffsetsPartitions: 6, OffsetsReplicationFactor: 1, Logger: testLogger(c.t)}
}

// kill stops broker id the way a crash looks to the others: its session
// ends (its registration goes) and it serves nothing more.
func (c *testCluster) kill(id int32) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Fatal(err)
	}
	delete(c.nodes, id)
}

// await waits until every running node's image satisfies cond.
func (c *testCluster) await(what string, cond func(*meta.Image) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for id, n := range c.nodes {
		if _, err := n.image.waitFor(ctx, cond); err != nil {
			im, _ := n.image.load()
			c.t.Fatalf("broker %d: waiting for %s: %v (image: controller %d, brokers %v)", id, what, err, im.Controller, im.SortedBrokers())
		}
	}
}

func (c *testCluster) produce(n *Node, topic string, p int32, tag string) (int64, error) {
	req := ProduceRequest{Acks: -1, Partitions: []ProducePartition{{Topic: topic, Partition: p, Records: oneRecord(c.t, tag)}}}
	n.Produce(context.Background(), &req)
	return req.Partitions[0].BaseOffset, req.Partitions[0].Err
}

// led reports whether every partition of topic has a leader in im.
func led(im *meta.Image, topic string) bool {
	ls := leaders(im, topic)
	return len(ls) > 0 && !slices.Contains(ls, meta.NoLeader)
}

func leaders(im *meta.Image, topic string) []int32 {
	t := im.Topics[topic]
	if t == nil {
		return nil
	}
	out := make([]int32, len(t.Assignment))
	for p := range t.Assignment {
		out[p] = im.View(t, p).Leader
	}
	return out
}

// Partitions spread over the brokers, each answered only by its leader,
// and every broker's picture agrees.
func TestClusterSpreadsPartitions(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("three brokers and a controller", func(im *meta.Image) bool { return len(im.Brokers) == 3 && im.Controller != -1 })
	ti, err := c.nodes[2].CreateTopic(context.Background(), CreateTopic{Name: "t", Partitions: 6, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ti.Partitions) != 6 || ti.ReplicationFactor() != 1 {
		t.Fatalf("created %+v", ti)
	}
	c.await("leaders for t", func(im *meta.Image) bool { return led(im, "t") })
	im, _ := c.nodes[1].image.load()
	count := map[int32]int{}
	for p, l := range leaders(im, "t") {
		count[l]++
		for id, n := range c.nodes {
			_, err := c.produce(n, "t", int32(p), "x")
			switch {
			case id == l && err != nil:
				t.Errorf("produce to %d on its leader %d: %v", p, l, err)
			case id != l && !errors.Is(err, ErrNotLeader):
				t.Errorf("produce to %d on broker %d (leader %d): %v, want ErrNotLeader", p, id, l, err)
			}
		}
	}
	if count[1] != 2 || count[2] != 2 || count[3] != 2 {
		t.Errorf("leaders per broker %v, want 2 each", count)
	}
}

// A broker that dies leaves its partitions without a leader (leader epoch
// bumped); when it returns on the same data it leads them again, with
// everything it had.
func TestBrokerDiesAndReturns(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("three brokers", func(im *meta.Image) bool { return len(im.Brokers) == 3 && im.Controller != -1 })
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "t", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, "t") })
	im, _ := c.nodes[1].image.load()
	ls := leaders(im, "t")
	p := int32(slices.Index(ls, 3))
	if p < 0 {
		t.Fatalf("broker 3 leads nothing: %v", ls)
	}
	epoch := im.View(im.Topics["t"], int(p)).LeaderEpoch
	for i := range 5 {
		if _, err := c.produce(c.nodes[3], "t", p, fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.kill(3)
	c.await("broker 3 gone, its partition leaderless", func(im *meta.Image) bool {
		v := im.View(im.Topics["t"], int(p))
		return !im.Live(3) && v.Leader == meta.NoLeader && v.LeaderEpoch > epoch
	})
	if _, err := c.produce(c.nodes[1], "t", p, "x"); !errors.Is(err, ErrLeaderNotAvailable) {
		t.Errorf("produce to a leaderless partition: %v, want ErrLeaderNotAvailable", err)
	}
	n3 := c.start(3)
	c.await("broker 3 leads again", func(im *meta.Image) bool { return im.View(im.Topics["t"], int(p)).Leader == 3 })
	off, err := c.produce(n3, "t", p, "after")
	if err != nil || off != 5 {
		t.Fatalf("produce after the restart: offset %d, %v; want 5 (the 5 records kept)", off, err)
	}
}

// Killing the controller elects another (a larger controller epoch) and
// topics can be created again.
func TestControllerFailover(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("a controller", func(im *meta.Image) bool { return len(im.Brokers) == 3 && im.Controller != -1 })
	im, _ := c.nodes[1].image.load()
	old, oldEpoch := im.Controller, im.ControllerEpoch
	c.kill(old)
	// Seen gone too: a broker that still saw the old controller live
	// would assign it partitions of the new topic, which then wait for it.
	c.await("a new controller", func(im *meta.Image) bool {
		return im.Controller != -1 && im.Controller != old && im.ControllerEpoch > oldEpoch && !im.Live(old)
	})
	var any *Node
	for _, n := range c.nodes {
		any = n
	}
	if _, err := any.CreateTopic(context.Background(), CreateTopic{Name: "after", Partitions: 4, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("leaders of a topic created after the failover", func(im *meta.Image) bool {
		ls := leaders(im, "after")
		return len(ls) == 4 && !slices.Contains(ls, meta.NoLeader) && !slices.Contains(ls, old)
	})
}

// A broker that joins a running cluster is seen by every broker, and new
// topics use it.
func TestBrokerJoins(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	c.await("two brokers", func(im *meta.Image) bool { return len(im.Brokers) == 2 && im.Controller != -1 })
	c.start(4)
	c.await("the new broker", func(im *meta.Image) bool { return im.Live(4) && len(im.Brokers) == 3 })
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "new", Partitions: 6, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("broker 4 leading some of the new topic", func(im *meta.Image) bool { return slices.Contains(leaders(im, "new"), 4) })
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "rf4", Partitions: 1, ReplicationFactor: 4}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Errorf("replication factor 4 on 3 brokers: %v, want ErrInvalidReplicationFactor", err)
	}
	ti, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "rf3", Partitions: 2, ReplicationFactor: 3})
	if err != nil || ti.ReplicationFactor() != 3 {
		t.Fatalf("replication factor 3 on 3 brokers: %+v, %v", ti, err)
	}
	c.await("every replica of rf3 in its ISR", func(im *meta.Image) bool {
		t := im.Topics["rf3"]
		return t != nil && len(t.States) == 2 && t.States[0] != nil && t.States[1] != nil &&
			len(t.States[0].ISR) == 3 && len(t.States[1].ISR) == 3
	})
	_, err = c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "two", Partitions: -1, ReplicationFactor: -1,
		Assignment: []ReplicaAssignment{{Partition: 0, Replicas: []int32{1, 1}}}})
	if !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Errorf("an assignment naming a broker twice: %v, want ErrInvalidReplicaAssignment", err)
	}
}

// A broker cut off from the store keeps serving what it leads from the
// picture it has; once back, it coordinates again. An expired session is
// replaced and the broker registers again.
func TestStoreOutageAndExpiry(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	c.await("two brokers", func(im *meta.Image) bool { return len(im.Brokers) == 2 && im.Controller != -1 })
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "t", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("leaders", func(im *meta.Image) bool { return led(im, "t") })
	n := c.nodes[2]
	im, _ := n.image.load()
	p := int32(slices.Index(leaders(im, "t"), 2))
	store := n.store.(*memstore.Store)
	c.srv.Disconnect(store)
	for i := range 3 {
		if _, err := c.produce(n, "t", p, fmt.Sprint("cut-off-", i)); err != nil {
			t.Fatalf("produce while the store is unreachable: %v", err)
		}
	}
	c.srv.Reconnect(store)
	if _, err := c.produce(n, "t", p, "back"); err != nil {
		t.Fatal(err)
	}
	// Expiry: the registration goes; the broker registers again.
	im, _ = c.nodes[1].image.load()
	oldEpoch := im.Brokers[2].Epoch
	c.srv.Expire(store)
	c.srv.Reconnect(store) // the client learns of the expiry
	c.srv.Reconnect(store) // and opens a new session
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.nodes[1].image.waitFor(ctx, func(im *meta.Image) bool {
		b, ok := im.Brokers[2]
		return ok && b.Epoch > oldEpoch
	}); err != nil {
		t.Fatal(err)
	}
	data, st, err := store.Get(ctx, layout.BrokerPath(2))
	if err != nil || st.EphemeralOwner != store.Session().ID || len(data) == 0 {
		t.Fatalf("registration after expiry: %v, owner %d, session %d", err, st.EphemeralOwner, store.Session().ID)
	}
}

// A broker id registered by a live broker elsewhere refuses to start.
func TestBrokerIDInUse(t *testing.T) {
	c := newTestCluster(t, 1)
	cfg := c.config(1)
	cfg.DataDir, cfg.Advertised = "/data/other", "elsewhere.test:9999"
	if _, err := Open(cfg); !errors.Is(err, ErrBrokerIDInUse) {
		t.Fatalf("second broker 1: %v, want ErrBrokerIDInUse", err)
	}
}

// Garbage in the store is an error naming the path, never a crash: the
// topic is left out and the others are served.
func TestMalformedTopicInStore(t *testing.T) {
	c := newTestCluster(t, 1)
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "good", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	s := c.srv.Connect()
	defer s.Close()
	ctx := context.Background()
	if err := coord.CreateAll(ctx, s, layout.TopicPath("bad"), []byte(`{"version":3,"partitions":{"0":"not a list"}}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "later", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("the good topics", func(im *meta.Image) bool {
		return im.Topics["good"] != nil && im.Topics["later"] != nil && im.Topics["bad"] == nil
	})
	if _, err := c.produce(c.nodes[1], "later", 0, "x"); err != nil {
		t.Fatal(err)
	}
}

// oneRecord is a batch of one record with value v.
func oneRecord(t testing.TB, v string) []byte {
	t.Helper()
	b, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte(v), Timestamp: 1_700_000_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is a log destination safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A broker joining with a fresh data directory takes the cluster's id, and
// says so when it has opened (it used to log the id it had made up before
// joining, a different one on every broker).
func TestJoiningBrokerLogsClusterID(t *testing.T) {
	c := newTestCluster(t, 1)
	var logs syncBuffer
	cfg := c.config(2)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[2] = n
	want := c.nodes[1].ClusterID()
	if n.ClusterID() != want {
		t.Fatalf("broker 2 is in cluster %q, broker 1 in %q", n.ClusterID(), want)
	}
	var opened string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="node opened"`) {
			opened = line
		}
	}
	if !strings.Contains(opened, "cluster_id="+want+" ") {
		t.Errorf("broker 2 logged %q, want cluster_id=%s", opened, want)
	}
}

// A group's committed offsets stay with it when its coordinator dies: with
// one replica of the offsets topic (these brokers have no network to
// replicate over; transport/broker's tests replicate it), they are on the
// coordinating broker's disk and the group waits for its coordinator
// (COORDINATOR_NOT_AVAILABLE) rather than moving to a broker that has none
// of its offsets. With three replicas (Kafka's default, used until now) the
// group moved at once and its committed offsets read back as none: a
// consumer resuming re-read everything, or skipped, by auto.offset.reset.
func TestCoordinatorDiesOffsetsKept(t *testing.T) {
	c := newTestCluster(t, 1, 2, 3)
	c.await("three brokers", func(im *meta.Image) bool { return len(im.Brokers) == 3 && im.Controller != -1 })
	ctx := context.Background()
	if _, err := c.nodes[1].CreateTopic(ctx, CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := c.nodes[1].FindCoordinator(ctx, CoordinatorGroup, "g")
	if err != nil {
		t.Fatal(err)
	}
	c.await("leaders of "+OffsetsTopic, func(im *meta.Image) bool { return led(im, OffsetsTopic) })
	ti, err := c.nodes[1].Topic(OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if rf := ti.ReplicationFactor(); rf != 1 {
		t.Errorf("%s has %d replicas, want the 1 configured", OffsetsTopic, rf)
	}
	waitLoaded(t, c.nodes[b.ID], "g")
	perCommit, err := c.nodes[b.ID].CommitOffsets("g", "", nil, -1,
		[]groups.OffsetCommit{{TopicPartition: groups.TopicPartition{Topic: "t"}, Offset: 42, LeaderEpoch: -1}})
	if err != nil || perCommit[0] != nil {
		t.Fatalf("commit at the coordinator %d: %v, %v", b.ID, err, perCommit)
	}
	c.kill(b.ID)
	other := int32(1)
	if b.ID == 1 {
		other = 2
	}
	c.await(fmt.Sprintf("broker %d gone", b.ID), func(im *meta.Image) bool { return !im.Live(b.ID) })
	if nb, err := c.nodes[other].FindCoordinator(ctx, CoordinatorGroup, "g"); !errors.Is(err, ErrCoordinatorNotAvailable) {
		t.Errorf("coordinator %d dead: FindCoordinator says broker %d, %v; want ErrCoordinatorNotAvailable", b.ID, nb.ID, err)
	}
	n := c.start(b.ID)
	c.await(fmt.Sprintf("broker %d back, leading g's partition of %s", b.ID, OffsetsTopic), func(im *meta.Image) bool {
		t := im.Topics[OffsetsTopic]
		return im.View(t, int(javaAbs(javaHash("g"))%int32(len(t.Assignment)))).Leader == b.ID
	})
	if nb, err := c.nodes[other].FindCoordinator(ctx, CoordinatorGroup, "g"); err != nil || nb.ID != b.ID {
		t.Fatalf("after broker %d returned: FindCoordinator says broker %d, %v", b.ID, nb.ID, err)
	}
	waitLoaded(t, n, "g")
	coord, err := n.GroupCoordinator("g")
	if err != nil {
		t.Fatal(err)
	}
	got, err := coord.Fetch("g", []groups.TopicPartition{{Topic: "t"}})
	if err != nil || got[groups.TopicPartition{Topic: "t"}].Offset != 42 {
		t.Errorf("committed offset after the coordinator returned: %+v, %v; want 42", got, err)
	}
}

// waitLoaded waits until n has loaded the partition of OffsetsTopic that
// holds group.
func waitLoaded(t *testing.T, n *Node, group string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		ended := n.offsets.replayEnded()
		if n.groups.Loaded(n.offsetsPartitionFor(group)) {
			return
		}
		select {
		case <-ended:
		case <-timeout:
			t.Fatalf("broker %d did not load the offsets of group %q", n.cfg.NodeID, group)
		}
	}
}

// A broker id registered at another address is another broker: Open fails
// at once, even when this broker's address is a prefix of that one (the
// check compared strings, so "host:909" matched "host:9093" and Open waited
// twice the session timeout for a registration that was never its own).
func TestBrokerIDInUseAtAPrefixAddress(t *testing.T) {
	c := newTestCluster(t, 1)
	cfg := c.config(1)
	live := cfg.Advertised
	cfg.DataDir, cfg.Advertised = "/data/other", live[:len(live)-1] // broker-1.test:909
	cfg.ZooKeeperSessionTimeout = time.Minute
	cfg.Logger = slog.New(slog.DiscardHandler)
	done := make(chan error, 1)
	go func() {
		n, err := Open(cfg)
		if err == nil {
			n.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBrokerIDInUse) || !strings.Contains(err.Error(), live) {
			t.Fatalf("second broker 1 at %s: %v, want ErrBrokerIDInUse naming %s", cfg.Advertised, err, live)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("second broker 1 at %s, with broker 1 live at %s: Open still waiting after 10 s", cfg.Advertised, live)
	}
}

// A broker restarted before its previous session expired finds its old
// registration, at its own address, and waits for it to go, also when the
// address is IPv6 (the check formatted the address as host:port, without
// the brackets the registration's host:port has, so it never matched and
// Open failed at once with ErrBrokerIDInUse).
func TestRestartWithinOldSessionIPv6(t *testing.T) {
	c := newTestCluster(t, 1)
	old := c.srv.Connect()
	ctx := context.Background()
	if _, err := layout.RegisterBroker(ctx, old, meta.Broker{ID: 5, Host: "::1", Port: 9095}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg := c.config(5)
	cfg.Advertised = "[::1]:9095"
	cfg.ZooKeeperSessionTimeout = 10 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	type opened struct {
		n   *Node
		err error
	}
	done := make(chan opened, 1)
	go func() {
		n, err := Open(cfg)
		done <- opened{n, err}
	}()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(logs.String(), "waiting for it to expire") {
		select {
		case o := <-done:
			if o.n != nil {
				o.n.Close()
			}
			t.Fatalf("broker 5 restarted within its old session: Open returned %v without waiting for the old registration", o.err)
		case <-deadline:
			t.Fatal("broker 5 neither waited nor returned")
		case <-time.After(10 * time.Millisecond): // polling the log
		}
	}
	c.srv.Expire(old)
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("after the old session expired: %v", o.err)
		}
		c.nodes[5] = o.n
	case <-time.After(20 * time.Second):
		t.Fatal("Open did not return after the old session expired")
	}
}

// A broker hands out idempotent producer ids while the store is away: it
// reserves its first block when it opens, as Kafka's ProducerIdManager
// does, not on the first InitProducerID (which then failed with the store
// unreachable, so a producer started during an outage could not produce).
func TestProducerIDsWhileStoreAway(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	c.await("two brokers", func(im *meta.Image) bool { return len(im.Brokers) == 2 })
	ids := map[int64]int32{}
	for _, id := range []int32{1, 2} {
		n := c.nodes[id]
		store := n.store.(*memstore.Store)
		c.srv.Disconnect(store)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pid, epoch, err := n.InitProducerID(ctx)
		cancel()
		c.srv.Reconnect(store)
		if err != nil || pid < 0 || epoch != 0 {
			t.Fatalf("broker %d, store unreachable: InitProducerID = %d, %d, %v", id, pid, epoch, err)
		}
		if other, ok := ids[pid]; ok {
			t.Fatalf("brokers %d and %d both handed out producer id %d", other, id, pid)
		}
		ids[pid] = id
	}
}

// A partition directory left by an older topic of the same name (deleted
// while this broker was away) is set aside, and the new topic's partition
// opens beside it.
func TestOlderIncarnationSetAside(t *testing.T) {
	c := newTestCluster(t, 1)
	m, err := logs.NewManager(logs.Options{FS: c.fs, Dir: "/data/1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Open("t", 0, [16]byte{0xee}, logs.PartitionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := c.nodes[1].CreateTopic(context.Background(), CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.produce(c.nodes[1], "t", 0, "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fs.Stat("/data/1/t-0.ee000000000000000000000000000000-stray"); err != nil {
		t.Errorf("the older incarnation's directory: %v", err)
	}
}

// CreateTopic waits for leaders only as long as its ctx allows: a topic
// created while the controller cannot write (cut off from the store, its
// session still alive) comes back as created, with the deadline error, and
// is led once the controller is back.
func TestCreateTopicTimesOutWithoutController(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	c.await("two brokers and a controller", func(im *meta.Image) bool { return len(im.Brokers) == 2 && im.Controller != -1 })
	im, _ := c.nodes[1].image.load()
	ctl := c.nodes[im.Controller]
	other := c.nodes[3-im.Controller]
	store := ctl.store.(*memstore.Store)
	c.srv.Disconnect(store)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ti, err := other.CreateTopic(ctx, CreateTopic{Name: "late", Partitions: 2, ReplicationFactor: 1})
	if !errors.Is(err, context.DeadlineExceeded) || ti.Name != "late" || len(ti.Partitions) != 2 {
		t.Fatalf("CreateTopic without a controller: %+v, %v; want the topic and a deadline error", ti, err)
	}
	if _, err := other.CreateTopic(context.Background(), CreateTopic{Name: "late", Partitions: 2, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("the topic was not created: %v", err)
	}
	c.srv.Reconnect(store)
	c.await("leaders of late", func(im *meta.Image) bool { return led(im, "late") })
}

// A partition state the controller creates between a broker's read of it
// (missing) and the watch the broker then sets (on a node that exists by
// then) is still read: an exists watch set on an existing node fires only
// on its next change, which may never come. Staged deterministically: the
// controller's create waits until the other broker missed the state, and
// that broker's ExistsW waits until the state exists.
func TestStateCreatedBetweenReadAndWatch(t *testing.T) {
	c := newTestCluster(t, 1, 2)
	c.await("two brokers and a controller", func(im *meta.Image) bool { return len(im.Brokers) == 2 && im.Controller != -1 })
	im, _ := c.nodes[1].image.load()
	ctl, other := im.Controller, int32(1)
	if ctl == 1 {
		other = 2
	}
	ctlStore, otherStore := c.nodes[ctl].cfg.Coord, c.nodes[other].cfg.Coord
	spath := layout.StatePath("t", 0)
	missed := make(chan struct{})
	obs := c.srv.Connect()
	defer obs.Close()
	bounded := func(what string, ch <-chan struct{}) {
		select {
		case <-ch:
		case <-time.After(10 * time.Second): // a safety net, not a synchronisation
			t.Errorf("staging: %s never happened", what)
		}
	}
	created := c.srv.Inject(memstore.Fault{
		Match: func(r memstore.Request) bool {
			return coord.Store(r.Store) == ctlStore && len(r.Ops) > 0 && r.Touches(spath)
		},
		Before: func(memstore.Request) { bounded("the other broker's miss", missed) },
	})
	watched := c.srv.Inject(memstore.Fault{
		Match: func(r memstore.Request) bool {
			return coord.Store(r.Store) == otherStore && r.Kind == memstore.KindExists && r.Watch && r.Path == spath
		},
		Before: func(memstore.Request) {
			close(missed)
			exists := make(chan struct{})
			go func() {
				defer close(exists)
				for {
					ok, _, ch, err := obs.ExistsW(context.Background(), spath)
					if err != nil || ok {
						return
					}
					<-ch
				}
			}()
			bounded("the state's creation", exists)
		},
	})
	if _, err := c.nodes[ctl].CreateTopic(context.Background(), CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.await("a leader for t", func(im *meta.Image) bool { return led(im, "t") })
	if created.Struck() != 1 || watched.Struck() != 1 {
		t.Fatalf("the race was not staged: create struck %d, exists struck %d", created.Struck(), watched.Struck())
	}
}

// A broker starting while the store drops its requests (ZooKeeper
// restarting: a lost connection, the outcome unknown) retries each step
// until it gets through, and registers; it does not fail its start.
func TestStartWhileStoreDropsRequests(t *testing.T) {
	c := newTestCluster(t, 1)
	lost := c.srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindCreate, layout.BrokerPath(2)), Times: 3,
		Err: coord.ErrConnectionLoss})
	defer lost.Cancel()
	replies := c.srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindGet, layout.BrokerPath(2)), Times: 2, Lost: true})
	defer replies.Cancel()
	c.start(2)
	if lost.Struck() != 3 || replies.Struck() != 2 {
		t.Fatalf("faults struck %d and %d times, want 3 and 2: the start did not go through them", lost.Struck(), replies.Struck())
	}
	c.await("broker 2 registered", func(im *meta.Image) bool { return im.Live(2) })
}

// Brokers register every listener; a broker reaches another at its
// endpoint of the inter-broker listener (not the registration's top-level
// address, EXTERNAL's here, the PLAINTEXT one). A garbage registration is
// logged naming its path and the other brokers are kept.
func TestListenerRegistrations(t *testing.T) {
	c := newTestCluster(t)
	var logs syncBuffer
	for _, id := range []int32{1, 2} {
		cfg := c.config(id)
		cfg.Listeners = []Endpoint{
			{Listener: "EXTERNAL", Protocol: "PLAINTEXT", Host: fmt.Sprintf("ext-%d.test", id), Port: 443},
			{Listener: "INTERNAL", Protocol: "SASL_SSL", Host: fmt.Sprintf("broker-%d.test", id), Port: 9093},
		}
		cfg.InterBrokerListener = "internal"
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[id] = n
	}
	c.await("both brokers", func(im *meta.Image) bool { return len(im.Brokers) == 2 })
	n2 := c.nodes[2]
	var b1 Broker
	for _, b := range n2.Brokers() {
		if b.ID == 1 {
			b1 = b
		}
	}
	if e, ok := b1.Endpoint("EXTERNAL"); !ok || e.Host != "ext-1.test" || e.Port != 443 || b1.Host != "ext-1.test" {
		t.Errorf("broker 1 as broker 2 sees it: %+v", b1)
	}
	if addr, err := n2.peerAddr(b1); err != nil || addr != "broker-1.test:9093" {
		t.Errorf("broker 2 reaches broker 1 at %q, %v; want its INTERNAL endpoint broker-1.test:9093", addr, err)
	}
	if _, err := c.nodes[1].peerAddr(Broker{ID: 7, Host: "h", Port: 1}); err == nil || !strings.Contains(err.Error(), "no endpoint for the inter-broker listener internal") {
		t.Errorf("a broker without the inter-broker listener: %v", err)
	}

	s := c.srv.Connect()
	defer s.Close()
	bad := []byte(`{"version":5,"host":null,"port":-1,"endpoints":["REPLICATION://h:9092"],"jmx_port":-1,"listener_security_protocol_map":{"INTERNAL":"SSL"}}`)
	if err := s.Create(context.Background(), layout.BrokerPath(9), bad, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	// The loop logs it when it reads the registrations again (the watch on
	// /brokers/ids fires); polled, with a deadline.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "/brokers/ids/9"); {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the garbage registration /brokers/ids/9: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	if !strings.Contains(logs.String(), "listener REPLICATION has no security protocol") || len(n2.Brokers()) != 2 {
		t.Errorf("after a garbage registration: brokers %+v; log %s", n2.Brokers(), logs.String())
	}
}
