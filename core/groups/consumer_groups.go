package groups

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/weir-broker/weir/core/groups/consumer"
)

// KIP-848 consumer groups live beside the classic ones, in the same
// coordinator: the same lock, partitions of __consumer_offsets and
// committed offsets, and the same timer. A group id is either a classic
// group or a consumer group at any time. An empty group of one kind turns
// into the other when a member of the other protocol joins (as Kafka
// does); while it has members, a ConsumerGroupHeartbeat for a classic group
// gets ErrGroupIDNotFound and a JoinGroup for a consumer group gets
// ErrInconsistentProtocol. Membership is not persisted: after a restart or
// a move of the group's partition, heartbeats get ErrUnknownMemberID and the
// members rejoin with epoch 0; committed offsets are kept in
// __consumer_offsets like every group's.

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat (see package consumer).
func (c *Coordinator) ConsumerHeartbeat(group string, r consumer.HeartbeatRequest) (consumer.HeartbeatResponse, error) {
	fail := consumer.HeartbeatResponse{MemberID: r.MemberID, MemberEpoch: r.MemberEpoch}
	if group == "" {
		return fail, fmt.Errorf("%w: empty group id", ErrInvalidGroupID)
	}
	if err := c.o.Consumer.Check(r); err != nil {
		return fail, err
	}
	r.SubscribedTopicNames = slices.Clone(r.SubscribedTopicNames)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.storeOf(group); err != nil {
		return fail, err
	}
	if g := c.groups[group]; g != nil {
		if g.state != stateEmpty || !g.empty() {
			return fail, fmt.Errorf("%w: group %q is a classic group with members, not a consumer group", ErrGroupIDNotFound, group)
		}
		delete(c.groups, group)
	}
	cg := c.cgroups[group]
	if cg == nil {
		if r.MemberEpoch != consumer.JoinEpoch {
			return fail, fmt.Errorf("%w: consumer group %q does not exist (the coordinator may have restarted); rejoin",
				consumer.ErrUnknownMemberID, group)
		}
		cg = consumer.New(group, c.o.Consumer)
		c.cgroups[group] = cg
	}
	epoch := cg.Epoch()
	resp, err := cg.Heartbeat(c.o.Clock.Now(), c.o.Topics, r)
	if cg.Epoch() != epoch {
		c.o.Logger.Info("consumer group epoch bumped", "group", group, "epoch", cg.Epoch(), "state", cg.State(),
			"member", r.MemberID, "member_epoch", r.MemberEpoch)
	}
	c.settleConsumer(cg)
	return resp, err
}

// ConsumerDescribe describes a consumer group (ConsumerGroupDescribe), with
// the names of the topics its assignments name by id. A classic group or no
// group is ErrGroupIDNotFound, as in Kafka.
func (c *Coordinator) ConsumerDescribe(group string) (consumer.Description, map[[16]byte]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.storeOf(group); err != nil {
		return consumer.Description{}, nil, err
	}
	cg := c.cgroups[group]
	if cg == nil {
		return consumer.Description{}, nil, fmt.Errorf("%w: group %q is not a consumer group", ErrGroupIDNotFound, group)
	}
	return cg.Describe(), cg.TopicNames(), nil
}

// FetchMember is Fetch for OffsetFetch v9+, which names the member asking:
// a consumer group checks its member id and epoch (consumer.CheckFetch).
func (c *Coordinator) FetchMember(group string, memberID *string, epoch int32, parts []TopicPartition) (map[TopicPartition]Committed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetchMemberLocked(group, memberID, epoch, parts)
}

// fetchMemberLocked is FetchMember with mu held.
func (c *Coordinator) fetchMemberLocked(group string, memberID *string, epoch int32, parts []TopicPartition) (map[TopicPartition]Committed, error) {
	store, err := c.storeOf(group)
	if err != nil {
		return nil, err
	}
	if cg := c.cgroups[group]; cg != nil {
		if err := cg.CheckFetch(memberID, epoch); err != nil {
			return nil, err
		}
	}
	return store.fetch(group, parts), nil
}

// classicJoinAllowed tells whether a classic JoinGroup may use group: not
// while it is a consumer group with members; an empty one is dropped (its
// offsets stay). Called with mu held.
func (c *Coordinator) classicJoinAllowed(group string) error {
	cg := c.cgroups[group]
	switch {
	case cg == nil:
		return nil
	case !cg.Empty():
		return fmt.Errorf("%w: group %q is a consumer group (KIP-848) with members", ErrInconsistentProtocol, group)
	}
	delete(c.cgroups, group)
	return nil
}

// consumerCommitCheck is OffsetCommit's check for a consumer group: the
// generation is the member epoch (consumer.CheckCommit).
func consumerCommitCheck(cg *consumer.Group, memberID string, epoch int32, offsets []OffsetCommit) error {
	ps := make([]consumer.Partition, len(offsets))
	for i, o := range offsets {
		ps[i] = consumer.Partition{Topic: o.Topic, Partition: o.Partition}
	}
	return cg.CheckCommit(memberID, epoch, ps)
}

// settleConsumer forgets an empty consumer group without offsets and
// makes sure the timer fires by the group's next deadline. Called with mu
// held after every event.
func (c *Coordinator) settleConsumer(cg *consumer.Group) {
	if cg.Empty() && c.cgroups[cg.ID()] == cg {
		if sh := c.shards[c.o.PartitionFor(cg.ID())]; sh == nil || sh.store == nil ||
			sh.store.offsets[cg.ID()] == nil && !sh.store.pendingFor(cg.ID()) {
			delete(c.cgroups, cg.ID())
		}
	}
	c.arm(cg.NextDeadline())
}

// tickConsumers ticks every consumer group and returns the earliest next
// deadline, counting next. Called with mu held.
func (c *Coordinator) tickConsumers(now, next time.Time) time.Time {
	for _, cg := range c.cgroups {
		for _, why := range cg.Tick(now) {
			c.o.Logger.Info("consumer group member removed", "group", cg.ID(), "why", why, "epoch", cg.Epoch())
		}
		if cg.Empty() {
			c.settleConsumer(cg)
		}
		if d := cg.NextDeadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	return next
}

// classicView describes a consumer group for DescribeGroups, which tools
// built for classic groups use: protocol type "consumer", the assignor as
// the protocol, and each member's subscription and assignment encoded as a
// classic consumer's (ConsumerProtocol v0), so they read who owns what.
// (Kafka answers DescribeGroups for a consumer group as Dead; describing it
// serves the same tools better.)
func classicView(cg *consumer.Group) Description {
	d := cg.Describe()
	names := cg.TopicNames()
	out := Description{Group: d.Group, State: d.State, ProtocolType: "consumer", Protocol: d.Assignor}
	for _, m := range d.Members {
		out.Members = append(out.Members, Member{MemberID: m.MemberID, InstanceID: m.InstanceID,
			ClientID: m.ClientID, ClientHost: m.ClientHost,
			Metadata: encodeSubscription(m.SubscribedTopicNames), Assignment: encodeAssignment(m.Assigned, names)})
	}
	return out
}

// encodeSubscription is a ConsumerProtocolSubscription v0: int16 version,
// topics, user data (null).
func encodeSubscription(topics []string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = appendStr(b, t)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff)
}

// encodeAssignment is a ConsumerProtocolAssignment v0: int16 version,
// [topic, [partition]], user data (null).
func encodeAssignment(tps []consumer.TopicPartitions, names map[[16]byte]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	var known []consumer.TopicPartitions
	for _, t := range tps {
		if _, ok := names[t.Topic]; ok {
			known = append(known, t)
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(known)))
	for _, t := range known {
		b = appendStr(b, names[t.Topic])
		b = binary.BigEndian.AppendUint32(b, uint32(len(t.Partitions)))
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff)
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
