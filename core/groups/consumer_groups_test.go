package groups

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/groups/assignor"
	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/vfs"
)

type testTopics map[string]assignor.Topic

func (f testTopics) Topic(n string) (assignor.Topic, bool) { t, ok := f[n]; return t, ok }
func (f testTopics) Names() []string                       { return slices.Sorted(maps.Keys(f)) }

var topicT = assignor.Topic{ID: [16]byte{1}, Name: "t", Partitions: 2}

func consumerJoin(id string) consumer.HeartbeatRequest {
	return consumer.HeartbeatRequest{MemberID: id, RebalanceTimeoutMillis: 1000,
		SubscribedTopicNames: []string{"t"}, Owned: []consumer.TopicPartitions{}}
}

func openConsumerCoordinator(t *testing.T, fsys vfs.FS, clk *fakeClock) *Coordinator {
	return openCoordinator(t, fsys, clk, func(o *Options) {
		o.Topics = testTopics{"t": topicT}
		o.Consumer = consumer.Config{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}
	})
}

// TestConsumerGroupInCoordinator: a KIP-848 group beside the classic ones:
// commits with the member epoch, fetches naming the member, listing and
// describing, the classic protocol kept out while it has members, session
// timeouts run by the coordinator's timer, and deletion once empty.
func TestConsumerGroupInCoordinator(t *testing.T) {
	clk := newClock()
	c := openConsumerCoordinator(t, vfs.NewMem(), clk)

	r, err := c.ConsumerHeartbeat("g", consumerJoin("m1"))
	if err != nil || r.MemberEpoch != 1 || len(r.Assignment) != 1 || len(r.Assignment[0].Partitions) != 2 {
		t.Fatalf("join: %+v, %v", r, err)
	}
	per, err := c.Commit("g", "m1", nil, 1, []OffsetCommit{{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 42}})
	if err != nil || per[0] != nil {
		t.Fatalf("commit with the member epoch: %v %v", per, err)
	}
	_, err = c.Commit("g", "m1", nil, 7, []OffsetCommit{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 1}})
	wantErr(t, "commit with a wrong epoch", err, consumer.ErrStaleMemberEpoch)
	_, err = c.Commit("g", "", nil, -1, []OffsetCommit{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 1}})
	wantErr(t, "simple commit to a group with members", err, consumer.ErrUnknownMemberID)

	m1 := "m1"
	got, err := c.FetchMember("g", &m1, 1, nil)
	if err != nil || got[TopicPartition{Topic: "t"}].Offset != 42 {
		t.Fatalf("fetch: %v %v", got, err)
	}
	_, err = c.FetchMember("g", &m1, 0, nil)
	wantErr(t, "fetch with an old epoch", err, consumer.ErrStaleMemberEpoch)

	if l := c.List(); len(l) != 1 || l[0] != (Listing{Group: "g", ProtocolType: "consumer", State: "Stable", Type: "consumer"}) {
		t.Fatalf("list: %+v", l)
	}
	d, err := c.Describe("g")
	if err != nil || d.ProtocolType != "consumer" || d.Protocol != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v %v", d, err)
	}
	// ConsumerProtocolAssignment v0 of t-0, t-1.
	want := []byte{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}
	if !slices.Equal(d.Members[0].Assignment, want) {
		t.Fatalf("classic view of the assignment: %v", d.Members[0].Assignment)
	}
	cd, names, err := c.ConsumerDescribe("g")
	if err != nil || cd.Epoch != 1 || names[topicT.ID] != "t" {
		t.Fatalf("consumer describe: %+v %v %v", cd, names, err)
	}

	_, err = c.Join(bg, JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: protos("range"),
		SessionTimeout: 10 * time.Second})
	wantErr(t, "classic join of a consumer group", err, ErrInconsistentProtocol)
	wantErr(t, "delete of a consumer group with members", c.Delete("g"), ErrNotEmpty)

	// The session times out: the timer removes m1.
	clk.Advance(10 * time.Second)
	_, err = c.ConsumerHeartbeat("g", consumer.HeartbeatRequest{MemberID: "m1", MemberEpoch: 1, RebalanceTimeoutMillis: -1})
	wantErr(t, "heartbeat after the session timeout", err, consumer.ErrUnknownMemberID)
	if l := c.List(); len(l) != 1 || l[0].State != "Empty" {
		t.Fatalf("list after the timeout: %+v", l)
	}
	if err := c.Delete("g"); err != nil {
		t.Fatalf("delete of an empty consumer group: %v", err)
	}
	if got, _ := c.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("offsets after delete: %v", got)
	}
	_, _, err = c.ConsumerDescribe("g")
	wantErr(t, "describe of a deleted group", err, ErrGroupIDNotFound)
}

// TestClassicAndConsumerShareIDs: a classic group with members refuses
// consumer heartbeats; once empty, a consumer member takes the id over, and
// the other way round.
func TestClassicAndConsumerShareIDs(t *testing.T) {
	clk := newClock()
	c := openConsumerCoordinator(t, vfs.NewMem(), clk)
	jr := JoinRequest{Group: "g", ProtocolType: "consumer", Protocols: protos("range"), SessionTimeout: 10 * time.Second}
	res, err := c.Join(bg, jr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ConsumerHeartbeat("g", consumerJoin("m1"))
	wantErr(t, "consumer join of a classic group with members", err, ErrGroupIDNotFound)
	if _, err := c.Leave("g", []LeaveMember{{MemberID: res.MemberID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConsumerHeartbeat("g", consumerJoin("m1")); err != nil {
		t.Fatalf("consumer join of an empty classic group: %v", err)
	}
	if _, err := c.ConsumerHeartbeat("g", consumer.HeartbeatRequest{MemberID: "m1", MemberEpoch: consumer.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(bg, jr); err != nil {
		t.Fatalf("classic join of an empty consumer group: %v", err)
	}
}

// TestConsumerGroupAfterRestart: membership is not kept, offsets are: a
// member heartbeating after a restart is told to rejoin, and its commits
// read back.
func TestConsumerGroupAfterRestart(t *testing.T) {
	fsys := vfs.NewMem()
	clk := newClock()
	c := openConsumerCoordinator(t, fsys, clk)
	if _, err := c.ConsumerHeartbeat("g", consumerJoin("m1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit("g", "m1", nil, 1, []OffsetCommit{{TopicPartition: TopicPartition{Topic: "t", Partition: 1}, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	closeCoordinator(t, c)
	c = openConsumerCoordinator(t, fsys, clk)
	_, err := c.ConsumerHeartbeat("g", consumer.HeartbeatRequest{MemberID: "m1", MemberEpoch: 1, RebalanceTimeoutMillis: -1})
	if !errors.Is(err, consumer.ErrUnknownMemberID) {
		t.Fatalf("heartbeat after a restart: %v", err)
	}
	r, err := c.ConsumerHeartbeat("g", consumerJoin("m1"))
	if err != nil || r.MemberEpoch != 1 {
		t.Fatalf("rejoin: %+v %v", r, err)
	}
	m1 := "m1"
	if got, err := c.FetchMember("g", &m1, 1, nil); err != nil || got[TopicPartition{Topic: "t", Partition: 1}].Offset != 7 {
		t.Fatalf("offsets after a restart: %v %v", got, err)
	}
}

// TestConsumerGroupOffsetDelete: OffsetDelete on a KIP-848 group with
// members keeps the offsets of the topics it subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the others'; once the group is
// empty, all of them go.
func TestConsumerGroupOffsetDelete(t *testing.T) {
	clk := newClock()
	c := openConsumerCoordinator(t, vfs.NewMem(), clk)
	if _, err := c.ConsumerHeartbeat("g", consumerJoin("m1")); err != nil {
		t.Fatal(err)
	}
	subscribed, other := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "u", Partition: 0}
	per, err := c.Commit("g", "m1", nil, 1, []OffsetCommit{{TopicPartition: subscribed, Offset: 5}, {TopicPartition: other, Offset: 6}})
	if err != nil || per[0] != nil || per[1] != nil {
		t.Fatalf("commit: %v %v", per, err)
	}
	per, err = c.DeleteOffsets("g", []TopicPartition{subscribed, other})
	if err != nil || !errors.Is(per[0], ErrGroupSubscribedToTopic) || per[1] != nil {
		t.Fatalf("delete while subscribed: %v %v", per, err)
	}
	got, err := c.Fetch("g", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[subscribed]; !ok {
		t.Fatalf("the subscribed topic's offset went: %v", got)
	}
	if _, ok := got[other]; ok {
		t.Fatalf("the other topic's offset stayed: %v", got)
	}

	if _, err := c.ConsumerHeartbeat("g", consumer.HeartbeatRequest{MemberID: "m1", MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	per, err = c.DeleteOffsets("g", []TopicPartition{subscribed})
	if err != nil || per[0] != nil {
		t.Fatalf("delete once empty: %v %v", per, err)
	}
	if got, _ := c.Fetch("g", nil); len(got) != 0 {
		t.Fatalf("offsets left after the group emptied: %v", got)
	}
}
