package layout_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/meta"
)

func topicEqual(a, b *meta.Topic) bool {
	return a.Name == b.Name && a.ID == b.ID && slices.EqualFunc(a.Assignment, b.Assignment, slices.Equal) &&
		maps.Equal(a.Configs, b.Configs) && a.Deleting == b.Deleting &&
		slices.EqualFunc(a.States, b.States, func(x, y *meta.PartitionState) bool {
			return x == nil && y == nil || x != nil && y != nil && x.Equal(*y) && x.Version == y.Version
		})
}

func TestCreateTopic(t *testing.T) {
	_, ss := cluster(2)
	s := ss[0]
	names, watch, err := layout.ReadTopicNames(ctx(t), ss[1])
	must(t, err)
	if len(names) != 0 {
		t.Fatalf("names %v", names)
	}
	t1 := topic("t1", []int32{1, 2}, []int32{2, 3}, []int32{3, 1})
	must(t, layout.CreateTopic(ctx(t), s, t1))
	fired(t, watch, coord.EventNodeChildrenChanged)
	if data, _ := get(t, s, "/brokers/topics/t1"); data != string(layout.EncodeAssignment(t1.ID, t1.Assignment)) {
		t.Fatalf("assignment node %s", data)
	}
	if data, _ := get(t, s, "/config/topics/t1"); data != `{"version":1,"config":{"min.insync.replicas":"2"}}` {
		t.Fatalf("config node %s", data)
	}
	got, err := layout.ReadTopic(ctx(t), ss[1], "t1")
	must(t, err)
	want := t1.Clone()
	want.States = make([]*meta.PartitionState, 3)
	if !topicEqual(got, want) {
		t.Fatalf("read %+v, want %+v", got, want)
	}

	err = layout.CreateTopic(ctx(t), ss[1], topic("t1", []int32{1}))
	wantErr(t, err, errs(layout.ErrTopicExists, coord.ErrNodeExists), "/brokers/topics/t1")

	// A config node left by a half-done creation is overwritten.
	must(t, s.Create(ctx(t), "/config/topics/t2", []byte(`{"version":1,"config":{"old":"1"}}`), coord.Persistent))
	t2 := topic("t2", []int32{1})
	t2.Configs = nil
	must(t, layout.CreateTopic(ctx(t), s, t2))
	if got, err := layout.ReadTopic(ctx(t), s, "t2"); err != nil || len(got.Configs) != 0 || got.Configs == nil {
		t.Fatalf("t2: %+v, %v", got, err)
	}
	if names, _, err = layout.ReadTopicNames(ctx(t), s); err != nil || !slices.Equal(names, []string{"t1", "t2"}) {
		t.Fatalf("names %v, %v", names, err)
	}
}

func TestCreateTopicInvalid(t *testing.T) {
	_, ss := cluster(1)
	for _, name := range []string{"", ".", "..", "a/b", "a b", "ü", strings.Repeat("x", 250)} {
		wantErr(t, layout.CreateTopic(ctx(t), ss[0], topic(name, []int32{1})), errs(layout.ErrInvalid))
	}
	for _, asg := range [][][]int32{nil, {{}}, {{1, 1}}, {{-1}}, {{1}, {}}} {
		wantErr(t, layout.CreateTopic(ctx(t), ss[0], topic("t", asg...)), errs(layout.ErrInvalid))
	}
	if len(dump(t, ss[0])) != 0 {
		t.Fatalf("invalid topics wrote %v", dump(t, ss[0]))
	}
}

// After a lost reply, the topic node holding exactly what was written is
// success.
func TestCreateTopicLostReply(t *testing.T) {
	srv, ss := cluster(1)
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, "/brokers/topics/t"), Lost: true})
	must(t, layout.CreateTopic(ctx(t), ss[0], topic("t", []int32{1})))
	if inj.Struck() != 1 || !exists(t, ss[0], "/config/topics/t") {
		t.Fatalf("struck %d", inj.Struck())
	}
}

func TestReadTopicMissing(t *testing.T) {
	_, ss := cluster(1)
	_, err := layout.ReadTopic(ctx(t), ss[0], "nope")
	wantErr(t, err, errs(coord.ErrNoNode), `"nope"`)
	_, _, err = layout.WatchTopic(ctx(t), ss[0], "nope")
	wantErr(t, err, errs(coord.ErrNoNode))
	_, err = layout.ReadTopic(ctx(t), ss[0], "a/b")
	wantErr(t, err, errs(layout.ErrInvalid))
}

func TestWriteState(t *testing.T) {
	_, ss := cluster(1)
	s := ss[0]
	c, err := layout.Elect(ctx(t), s, 1, 0)
	must(t, err)
	must(t, layout.CreateTopic(ctx(t), s, topic("t", []int32{1, 2}, []int32{2, 1})))
	st := meta.PartitionState{Leader: 2, LeaderEpoch: 0, ControllerEpoch: c.Epoch, ISR: []int32{2, 1}}
	if v, err := layout.WriteState(ctx(t), s, c, "t", 1, st, true); err != nil || v != 0 {
		t.Fatalf("create: %d, %v", v, err)
	}
	if data, _ := get(t, s, "/brokers/topics/t/partitions/1/state"); data != `{"version":1,"leader":2,"leader_epoch":0,"controller_epoch":1,"isr":[2,1]}` {
		t.Fatalf("state node %s", data)
	}
	if data, _ := get(t, s, "/brokers/topics/t/partitions/1"); data != "" {
		t.Fatalf("partition node %q, want empty as Kafka makes it", data)
	}
	got, err := layout.ReadTopic(ctx(t), s, "t")
	must(t, err)
	if got.States[0] != nil || got.States[1] == nil || !got.States[1].Equal(st) || got.States[1].Version != 0 {
		t.Fatalf("states %v %+v", got.States[0], got.States[1])
	}

	st.Version, st.LeaderEpoch, st.Leader = 0, 1, 1
	if v, err := layout.WriteState(ctx(t), s, c, "t", 1, st, false); err != nil || v != 1 {
		t.Fatalf("update: %d, %v", v, err)
	}
	_, err = layout.WriteState(ctx(t), s, c, "t", 1, st, false) // version 0 again
	wantErr(t, err, errs(coord.ErrBadVersion), "t-1")
	_, err = layout.WriteState(ctx(t), s, c, "t", 1, st, true)
	wantErr(t, err, errs(coord.ErrNodeExists))
	_, err = layout.WriteState(ctx(t), s, c, "t", 0, st, false)
	wantErr(t, err, errs(coord.ErrNoNode))
	_, err = layout.WriteState(ctx(t), s, c, "gone", 0, st, true)
	wantErr(t, err, errs(coord.ErrNoNode))
	st.Version = -1
	_, err = layout.WriteState(ctx(t), s, c, "t", 1, st, false)
	wantErr(t, err, errs(layout.ErrInvalid))
	for _, bad := range []meta.PartitionState{{Leader: -2}, {LeaderEpoch: -1}, {ControllerEpoch: -1}, {ISR: []int32{1, 1}}, {ISR: []int32{-1}}} {
		_, err = layout.WriteState(ctx(t), s, c, "t", 0, bad, true)
		wantErr(t, err, errs(layout.ErrInvalid))
	}
	_, err = layout.WriteState(ctx(t), s, c, "t", -1, st, true)
	wantErr(t, err, errs(layout.ErrInvalid))
}

// A leader's ISR change is a CAS on the state's version, not fenced by a
// controller epoch: a deposed controller's epoch does not stop it, a moved
// version does.
func TestWriteISR(t *testing.T) {
	_, ss := cluster(2)
	s := ss[0]
	c, err := layout.Elect(ctx(t), s, 1, 0)
	must(t, err)
	must(t, layout.CreateTopic(ctx(t), s, topic("t", []int32{1, 2, 3})))
	st := meta.PartitionState{Leader: 1, LeaderEpoch: 3, ControllerEpoch: c.Epoch, ISR: []int32{1, 2, 3}}
	_, err = layout.WriteState(ctx(t), s, c, "t", 0, st, true)
	must(t, err)
	st.ISR = []int32{1, 2}
	v, err := layout.WriteISR(ctx(t), ss[1], "t", 0, st, 0)
	if err != nil || v != 1 {
		t.Fatalf("ISR write: %d, %v", v, err)
	}
	got, err := layout.ReadTopic(ctx(t), s, "t")
	must(t, err)
	if !got.States[0].Equal(st) || got.States[0].Version != 1 {
		t.Fatalf("state after the ISR write: %+v", got.States[0])
	}
	_, err = layout.WriteISR(ctx(t), ss[1], "t", 0, st, 0) // the version moved
	wantErr(t, err, errs(coord.ErrBadVersion), "t-0")
	_, err = layout.WriteISR(ctx(t), ss[1], "t", 1, st, 0)
	wantErr(t, err, errs(coord.ErrNoNode))
	for _, bad := range []meta.PartitionState{{Leader: 3, ISR: []int32{1, 2}}, {Leader: meta.NoLeader, ISR: []int32{1}}, {Leader: 1, ISR: []int32{1, 1}}} {
		_, err = layout.WriteISR(ctx(t), ss[1], "t", 0, bad, 1)
		wantErr(t, err, errs(layout.ErrInvalid))
	}
}

// A parent created by someone else between the read and the Multi: the
// Multi is built again.
func TestWriteStateParentRace(t *testing.T) {
	srv, ss := cluster(2)
	c, err := layout.Elect(ctx(t), ss[0], 1, 0)
	must(t, err)
	must(t, layout.CreateTopic(ctx(t), ss[0], topic("t", []int32{1})))
	inj := srv.Inject(memstore.Fault{Match: memstore.On(memstore.KindMulti, layout.StatePath("t", 0)),
		Before: func(memstore.Request) {
			must(t, ss[1].Create(ctx(t), layout.PartitionsPath("t"), nil, coord.Persistent))
		}})
	v, err := layout.WriteState(ctx(t), ss[0], c, "t", 0, meta.PartitionState{Leader: 1, ISR: []int32{1}, ControllerEpoch: 1}, true)
	if err != nil || v != 0 || inj.Struck() != 1 {
		t.Fatalf("%d, %v, struck %d", v, err, inj.Struck())
	}
}

func TestWatchTopic(t *testing.T) {
	_, ss := cluster(2)
	s, admin := ss[0], ss[1]
	c, err := layout.Elect(ctx(t), s, 1, 0)
	must(t, err)
	must(t, layout.CreateTopic(ctx(t), admin, topic("t", []int32{1}, []int32{1})))
	st := meta.PartitionState{Leader: 1, ISR: []int32{1}, ControllerEpoch: 1}
	_, err = layout.WriteState(ctx(t), s, c, "t", 1, st, true)
	must(t, err)

	watchAll := func() []<-chan coord.Event {
		t.Helper()
		_, ws, err := layout.WatchTopic(ctx(t), s, "t")
		must(t, err)
		if len(ws) != 5 {
			t.Fatalf("%d watches, want 3 + 2 partitions", len(ws))
		}
		quiet(t, ws...)
		return ws
	}
	ws := watchAll()
	_, err = layout.WriteState(ctx(t), s, c, "t", 0, st, true)
	must(t, err)
	fired(t, ws[3], coord.EventNodeCreated)
	quiet(t, ws[0], ws[1], ws[2], ws[4])

	ws = watchAll()
	st.Version = 0
	_, err = layout.WriteState(ctx(t), s, c, "t", 1, st, false)
	must(t, err)
	fired(t, ws[4], coord.EventNodeDataChanged)
	quiet(t, ws[0], ws[1], ws[2], ws[3])

	ws = watchAll()
	must(t, layout.RequestDeletion(ctx(t), admin, "t"))
	fired(t, ws[2], coord.EventNodeCreated)
	got, ws, err := layout.WatchTopic(ctx(t), s, "t")
	must(t, err)
	if !got.Deleting || got.States[0] == nil || got.States[1].Version != 1 {
		t.Fatalf("topic %+v", got)
	}
	_, err = admin.Set(ctx(t), layout.ConfigTopicPath("t"), layout.EncodeTopicConfig(nil), coord.AnyVersion)
	must(t, err)
	fired(t, ws[1], coord.EventNodeDataChanged)
	_, err = admin.Set(ctx(t), layout.TopicPath("t"), layout.EncodeAssignment([16]byte{}, [][]int32{{1}, {1}, {1}}), coord.AnyVersion)
	must(t, err)
	fired(t, ws[0], coord.EventNodeDataChanged)

	// A missing config node is watched for its creation.
	must(t, admin.Delete(ctx(t), layout.ConfigTopicPath("t"), coord.AnyVersion))
	got, ws, err = layout.WatchTopic(ctx(t), s, "t")
	must(t, err)
	if len(got.Configs) != 0 || len(ws) != 6 {
		t.Fatalf("configs %v, %d watches", got.Configs, len(ws))
	}
	must(t, admin.Create(ctx(t), layout.ConfigTopicPath("t"), layout.EncodeTopicConfig(nil), coord.Persistent))
	fired(t, ws[1], coord.EventNodeCreated)
}

func TestReadTopicMalformed(t *testing.T) {
	_, ss := cluster(1)
	s := ss[0]
	must(t, layout.CreateTopic(ctx(t), s, topic("t", []int32{1})))
	must(t, coord.CreateAll(ctx(t), s, layout.StatePath("t", 0), []byte(`{"version":1}`), coord.Persistent))
	_, err := layout.ReadTopic(ctx(t), s, "t")
	wantErr(t, err, errs(layout.ErrMalformed), "/brokers/topics/t/partitions/0/state")
	_, err = s.Set(ctx(t), layout.ConfigTopicPath("t"), []byte(`{`), coord.AnyVersion)
	must(t, err)
	_, err = layout.ReadTopic(ctx(t), s, "t")
	wantErr(t, err, errs(layout.ErrMalformed), "/config/topics/t")
}

// A broker in controlled shutdown is listed while its session lives; a
// malformed child is an error naming the path.
func TestShuttingDown(t *testing.T) {
	_, ss := cluster(2)
	ids, _, err := layout.ReadShuttingDown(ctx(t), ss[0])
	must(t, err)
	if len(ids) != 0 {
		t.Fatalf("shutting down %v before any announcement", ids)
	}
	must(t, layout.AnnounceShutdown(ctx(t), ss[1], 7))
	must(t, layout.AnnounceShutdown(ctx(t), ss[1], 7)) // again, same session
	ids, _, err = layout.ReadShuttingDown(ctx(t), ss[0])
	must(t, err)
	if !slices.Equal(ids, []int32{7}) {
		t.Fatalf("shutting down %v, want [7]", ids)
	}
	if err := layout.AnnounceShutdown(ctx(t), ss[0], 7); err == nil {
		t.Fatal("another session announced broker 7's shutdown")
	}
	must(t, ss[1].Close())
	ids, _, err = layout.ReadShuttingDown(ctx(t), ss[0])
	must(t, err)
	if len(ids) != 0 {
		t.Fatalf("shutting down %v after the session ended", ids)
	}
	must(t, coord.CreateAll(ctx(t), ss[0], layout.ShuttingDownPath+"/x", nil, coord.Persistent))
	_, _, err = layout.ReadShuttingDown(ctx(t), ss[0])
	wantErr(t, err, errs(layout.ErrMalformed), layout.ShuttingDownPath+"/x")
}

// A resignation is listed while its session lives and until withdrawn; a
// malformed child is an error naming the path; names that break the
// store's rules are refused before anything is written.
func TestResignations(t *testing.T) {
	_, ss := cluster(2)
	rs, _, err := layout.ReadResignations(ctx(t), ss[0])
	must(t, err)
	if len(rs) != 0 {
		t.Fatalf("resignations %v before any", rs)
	}
	a := meta.Resignation{Broker: 3, Topic: "a.b-c_d", Partition: 12, LeaderEpoch: 7}
	b := meta.Resignation{Broker: 1, Topic: "a.b-c_d", Partition: 2, LeaderEpoch: 0}
	c := meta.Resignation{Broker: 2, Topic: "z", Partition: 0, LeaderEpoch: 40}
	must(t, layout.ResignReplica(ctx(t), ss[1], a))
	must(t, layout.ResignReplica(ctx(t), ss[1], a)) // again, same session
	must(t, layout.ResignReplica(ctx(t), ss[1], b))
	must(t, layout.ResignReplica(ctx(t), ss[0], c))
	if err := layout.ResignReplica(ctx(t), ss[0], a); err == nil {
		t.Fatal("another session made broker 3's resignation")
	}
	rs, watch, err := layout.ReadResignations(ctx(t), ss[0])
	must(t, err)
	if want := []meta.Resignation{b, a, c}; !slices.Equal(rs, want) {
		t.Fatalf("resignations %v, want %v", rs, want)
	}
	must(t, layout.WithdrawResignation(ctx(t), ss[1], b))
	must(t, layout.WithdrawResignation(ctx(t), ss[1], b)) // gone already
	<-watch
	must(t, ss[1].Close())
	rs, _, err = layout.ReadResignations(ctx(t), ss[0])
	must(t, err)
	if want := []meta.Resignation{c}; !slices.Equal(rs, want) {
		t.Fatalf("resignations %v after a withdrawal and the end of a session, want %v", rs, want)
	}
	for _, bad := range []meta.Resignation{{Broker: -1, Topic: "t"}, {Broker: 1, Topic: "a/b"}, {Broker: 1, Topic: ""}} {
		if err := layout.ResignReplica(ctx(t), ss[0], bad); !errors.Is(err, layout.ErrInvalid) {
			t.Errorf("ResignReplica(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	for _, name := range []string{"x", "1:t:0", "1::0:0", "a:t:0:0", "1:t:-1:0", "1:t:0:01"} {
		must(t, coord.CreateAll(ctx(t), ss[0], layout.ResignedPath+"/"+name, nil, coord.Persistent))
		_, _, err = layout.ReadResignations(ctx(t), ss[0])
		wantErr(t, err, errs(layout.ErrMalformed), layout.ResignedPath+"/"+name)
		must(t, ss[0].Delete(ctx(t), layout.ResignedPath+"/"+name, coord.AnyVersion))
	}
}
