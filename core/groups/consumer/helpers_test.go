package consumer

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/groups/assignor"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	session = 10 * time.Second
	hbEvery = time.Second
)

// fakeTopics is topic metadata the test changes at will.
type fakeTopics map[string]assignor.Topic

func (f fakeTopics) Topic(n string) (assignor.Topic, bool) { t, ok := f[n]; return t, ok }
func (f fakeTopics) Names() []string                       { return slices.Sorted(maps.Keys(f)) }

func topicID(n string) [16]byte {
	var id [16]byte
	copy(id[:], n)
	return id
}

func (f fakeTopics) set(name string, partitions int32) {
	f[name] = assignor.Topic{ID: topicID(name), Name: name, Partitions: partitions}
}

func newTestGroup(t *testing.T) *Group {
	t.Helper()
	cfg, err := Config{SessionTimeout: session, HeartbeatInterval: hbEvery}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return New("g", cfg)
}

func join(id string, topics ...string) HeartbeatRequest {
	return HeartbeatRequest{MemberID: id, MemberEpoch: 0, RebalanceTimeoutMillis: 30000,
		SubscribedTopicNames: append([]string{}, topics...), Owned: []TopicPartitions{}}
}

// beat is a full heartbeat owning owned.
func beat(id string, epoch int32, owned []TopicPartitions) HeartbeatRequest {
	if owned == nil {
		owned = []TopicPartitions{}
	}
	return HeartbeatRequest{MemberID: id, MemberEpoch: epoch, RebalanceTimeoutMillis: -1, Owned: owned}
}

// tps builds an assignment of one topic.
func tps(topic string, ps ...int32) []TopicPartitions {
	if len(ps) == 0 {
		return []TopicPartitions{}
	}
	return []TopicPartitions{{Topic: topicID(topic), Partitions: ps}}
}

// checkInvariants asserts the state machine's invariants: no partition is
// held by two members (assigned or pending revocation), holders match the
// members exactly, static ids map to their members, and a member's epoch is
// never ahead of the target.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	seen := map[tp]string{}
	for id, m := range g.members {
		if m.id != id {
			t.Fatalf("member %q indexed as %q", m.id, id)
		}
		for _, set := range []parts{m.assigned, m.revoking} {
			set.each(func(k tp) {
				if o, dup := seen[k]; dup {
					t.Fatalf("partition %x-%d held by %s and %s", k.topic[:2], k.p, o, id)
				}
				seen[k] = id
				if h := g.holders[k]; h.member != id {
					t.Fatalf("partition %x-%d: holder %q, member %s has it", k.topic[:2], k.p, h.member, id)
				}
			})
		}
		if m.epoch > g.targetEpoch {
			t.Fatalf("member %s at epoch %d, target %d", id, m.epoch, g.targetEpoch)
		}
		if m.state == unrevoked && m.revoking.count() == 0 {
			t.Fatalf("member %s revoking nothing", id)
		}
	}
	if len(seen) != len(g.holders) {
		t.Fatalf("%d partitions held, %d holders", len(seen), len(g.holders))
	}
	for inst, id := range g.static {
		if m := g.members[id]; m == nil || m.instanceID == nil || *m.instanceID != inst {
			t.Fatalf("instance %q maps to %q", inst, id)
		}
	}
	names, res := map[string]int{}, map[string]int{}
	for _, m := range g.members {
		for _, n := range m.topics {
			names[n]++
		}
		if m.re != nil {
			res[m.regex]++
		}
	}
	if !maps.Equal(names, g.names) || !maps.Equal(res, g.reCount) || len(g.regexes) != len(res) {
		t.Fatalf("subscription counts %v %v, members subscribe to %v %v", g.names, g.reCount, names, res)
	}
	if g.targetEpoch > g.epoch {
		t.Fatalf("target epoch %d ahead of group epoch %d", g.targetEpoch, g.epoch)
	}
}
