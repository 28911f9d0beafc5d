package layout_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/cluster/zk/zktest"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

// TestZooKeeper runs the whole flow against a real ZooKeeper server
// (skipped when it is not installed, failed under CI=true): two brokers
// register and agree on the cluster id, one is elected, a topic is
// created and its states written and watched; the controller's session
// expires, the other broker is elected with epoch 2, and the deposed one,
// back with a new session, is fenced; producer ids are allocated from
// both; the topic is deleted with its acks.
func TestZooKeeper(t *testing.T) {
	zktest.Require(t)
	cl := zktest.Start(t, zktest.Options{})
	open := func(tap *zktest.Tap) *zk.Store {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		s, err := zk.Open(ctx, zk.Config{Servers: cl.Addrs(), Chroot: "/layout", SessionTimeout: 4 * time.Second,
			Dialer: tap.Dial, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))})
		must(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	tapA := zktest.NewTap()
	a, b := open(tapA), open(zktest.NewTap())
	c := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	epochA, err := layout.RegisterBroker(c(), a, meta.Broker{ID: 1, Host: "127.0.0.1", Port: 9092}, 1)
	must(t, err)
	_, err = layout.RegisterBroker(c(), b, meta.Broker{ID: 2, Host: "127.0.0.1", Port: 9093}, 1)
	must(t, err)
	_, err = layout.RegisterBroker(c(), b, meta.Broker{ID: 1, Host: "127.0.0.1", Port: 9093}, 1)
	wantErr(t, err, errs(layout.ErrBrokerIDInUse), "127.0.0.1:9092")
	brokers, brokersWatch, err := layout.ReadBrokers(c(), b)
	must(t, err)
	if len(brokers) != 2 || brokers[1].Epoch != epochA {
		t.Fatalf("brokers %+v", brokers)
	}
	if id, err := layout.ClusterID(c(), a, "cluster-a"); err != nil || id != "cluster-a" {
		t.Fatalf("cluster id %q, %v", id, err)
	}
	if id, err := layout.ClusterID(c(), b, "cluster-b"); err != nil || id != "cluster-a" {
		t.Fatalf("cluster id %q, %v; want the first broker's", id, err)
	}

	ctlA, err := layout.Elect(c(), a, 1, 0)
	must(t, err)
	if ctlA.Epoch != 1 {
		t.Fatalf("first controllership %+v", ctlA)
	}
	_, err = layout.Elect(c(), b, 2, 0)
	wantErr(t, err, errs(coord.ErrNodeExists))
	id, _, ctlWatch, err := layout.ReadController(c(), b)
	must(t, err)
	if id != 1 {
		t.Fatalf("controller %d", id)
	}

	tp := topic("orders", []int32{1, 2}, []int32{2, 1})
	must(t, layout.CreateTopic(c(), b, tp))
	wantErr(t, layout.CreateTopic(c(), a, tp), errs(layout.ErrTopicExists))
	for p := range int32(2) {
		_, err := layout.WriteState(c(), a, ctlA, "orders", p, meta.PartitionState{Leader: 1 + p, ISR: []int32{1, 2}, ControllerEpoch: 1}, true)
		must(t, err)
	}
	got, watches, err := layout.WatchTopic(c(), b, "orders")
	must(t, err)
	if got.ID != tp.ID || got.States[1] == nil || got.States[1].Leader != 2 || got.States[1].Version != 0 {
		t.Fatalf("topic %+v", got)
	}
	st := got.States[0].Clone()
	st.ISR = []int32{1}
	_, err = layout.WriteState(c(), a, ctlA, "orders", 0, st, false)
	must(t, err)
	wait(t, watches[3], coord.EventNodeDataChanged)

	// The controller's session expires; the other broker takes over.
	sid, passwd, _ := tapA.Session()
	must(t, zktest.ExpireSession(cl.Addrs()[0], sid, passwd, 10*time.Second))
	wait(t, ctlWatch, coord.EventNodeDeleted)
	wait(t, brokersWatch, coord.EventNodeChildrenChanged)
	ctlB, err := layout.Elect(c(), b, 2, 0)
	must(t, err)
	if ctlB.Epoch != 2 {
		t.Fatalf("second controllership %+v", ctlB)
	}
	waitNewSession(t, a, sid)
	st.Version, st.Leader = 1, 2
	_, err = layout.WriteState(c(), a, ctlA, "orders", 0, st, false)
	wantErr(t, err, errs(layout.ErrFenced))
	if v, err := layout.WriteState(c(), b, ctlB, "orders", 0, st, false); err != nil || v != 2 {
		t.Fatalf("the new controller's write: %d, %v", v, err)
	}
	epochA2, err := layout.RegisterBroker(c(), a, meta.Broker{ID: 1, Host: "127.0.0.1", Port: 9092}, 2)
	must(t, err)
	if epochA2 <= epochA {
		t.Fatalf("epoch after re-registering %d, want > %d", epochA2, epochA)
	}

	// Producer ids from both brokers at once.
	var mu sync.Mutex
	var firsts []int64
	var wg sync.WaitGroup
	for i, s := range []coord.Store{a, b} {
		wg.Go(func() {
			for range 5 {
				first, err := layout.AllocateProducerIDs(c(), s, int32(i+1), 1000)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				firsts = append(firsts, first)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(firsts)
	for i, f := range firsts {
		if f != int64(i)*1000 {
			t.Fatalf("blocks %v", firsts)
		}
	}

	must(t, layout.RequestDeletion(c(), a, "orders"))
	for _, broker := range []int32{1, 2} {
		must(t, layout.AckDeletion(c(), a, "orders", broker))
	}
	if acks, _, err := layout.DeletionAcks(c(), b, "orders"); err != nil || !slices.Equal(acks, []int32{1, 2}) {
		t.Fatalf("acks %v, %v", acks, err)
	}
	wantErr(t, layout.DeleteTopic(c(), a, ctlA, "orders"), errs(layout.ErrFenced))
	must(t, layout.DeleteTopic(c(), b, ctlB, "orders"))
	_, err = layout.ReadTopic(c(), a, "orders")
	wantErr(t, err, errs(coord.ErrNoNode))
	for _, p := range []string{layout.TopicsPath, layout.ConfigTopicsPath, layout.DeleteTopicsPath} {
		if names, _, err := b.Children(c(), p); err != nil || len(names) != 0 {
			t.Fatalf("%s: %v, %v", p, names, err)
		}
	}
	must(t, layout.Resign(c(), b, ctlB))
}

// wait waits for a watch to fire with typ.
func wait(t *testing.T, ch <-chan coord.Event, typ coord.EventType) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Type != typ {
			t.Fatalf("watch fired %+v, want %v", ev, typ)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not fire %v within 10 s", typ)
	}
}

// waitNewSession waits until s is connected with a session other than old.
func waitNewSession(t *testing.T, s coord.Store, old int64) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		sess := s.Session()
		if sess.State == coord.Connected && sess.ID != old {
			return
		}
		select {
		case <-sess.Changed:
		case <-deadline:
			t.Fatal("no new session within 15 s")
		}
	}
}

// TestZooKeeperMarkedForDeletion: on a real ZooKeeper server, CreateTopic
// refuses a name whose deletion request is pending, and DropOrphanDeletion
// (whose multi creates and deletes the topic's node to make sure it does
// not exist) keeps the request of a topic that exists and drops one that
// has none, after which the name is created.
func TestZooKeeperMarkedForDeletion(t *testing.T) {
	zktest.Require(t)
	cl := zktest.Start(t, zktest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := zk.Open(ctx, zk.Config{Servers: cl.Addrs(), Chroot: "/marked", SessionTimeout: 4 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))})
	must(t, err)
	defer s.Close()
	c, err := layout.Elect(ctx, s, 1, 0)
	must(t, err)
	must(t, layout.CreateTopic(ctx, s, topic("live", []int32{1})))
	must(t, layout.RequestDeletion(ctx, s, "live"))
	must(t, layout.RequestDeletion(ctx, s, "gone"))

	err = layout.CreateTopic(ctx, s, topic("gone", []int32{1}))
	wantErr(t, err, errs(layout.ErrTopicExists, layout.ErrMarkedForDeletion))
	_, err = layout.DropOrphanDeletion(ctx, s, c, "live")
	wantErr(t, err, errs(layout.ErrTopicExists, coord.ErrNodeExists))
	if ok, _, err := s.Exists(ctx, layout.DeleteTopicPath("live")); err != nil || !ok {
		t.Fatalf("the request of an existing topic: exists %v, %v; want kept", ok, err)
	}
	if dropped, err := layout.DropOrphanDeletion(ctx, s, c, "gone"); err != nil || !dropped {
		t.Fatalf("dropping the orphan: dropped %v, %v", dropped, err)
	}
	if ok, _, err := s.Exists(ctx, layout.TopicPath("gone")); err != nil || ok {
		t.Fatalf("the orphan's topic node: exists %v, %v; want none", ok, err)
	}
	must(t, layout.CreateTopic(ctx, s, topic("gone", []int32{1})))
}
