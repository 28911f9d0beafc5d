package consumer

import (
	"fmt"
	"testing"
)

// BenchmarkHeartbeat: one full heartbeat of a member of a settled group of
// 100 members over 10 topics of 100 partitions (what every member sends
// every heartbeat interval).
func BenchmarkHeartbeat(b *testing.B) {
	cfg, _ := Config{SessionTimeout: session, HeartbeatInterval: hbEvery}.Validate()
	g := New("g", cfg)
	topics := fakeTopics{}
	var names []string
	for i := range 10 {
		n := fmt.Sprintf("t%d", i)
		topics.set(n, 100)
		names = append(names, n)
	}
	owned := map[string][]TopicPartitions{}
	epochs := map[string]int32{}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%03d", i)
		r, err := g.Heartbeat(t0, topics, HeartbeatRequest{MemberID: ids[i], RebalanceTimeoutMillis: 1000,
			SubscribedTopicNames: names, Owned: []TopicPartitions{}})
		if err != nil {
			b.Fatal(err)
		}
		epochs[ids[i]], owned[ids[i]] = r.MemberEpoch, r.Assignment
	}
	for range 4 { // settle: revoke, then take
		for _, id := range ids {
			r, err := g.Heartbeat(t0, topics, HeartbeatRequest{MemberID: id, MemberEpoch: epochs[id],
				RebalanceTimeoutMillis: 1000, SubscribedTopicNames: names, Owned: owned[id]})
			if err != nil {
				b.Fatal(err)
			}
			epochs[id], owned[id] = r.MemberEpoch, r.Assignment
		}
	}
	if g.State() != "Stable" {
		b.Fatalf("group %s", g.State())
	}
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		i++
		if _, err := g.Heartbeat(t0, topics, HeartbeatRequest{MemberID: id, MemberEpoch: epochs[id],
			RebalanceTimeoutMillis: 1000, SubscribedTopicNames: names, Owned: owned[id]}); err != nil {
			b.Fatal(err)
		}
	}
}
