package groups

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrGroupSubscribedToTopic: OffsetDelete of a partition whose topic the
// group's members are subscribed to (GROUP_SUBSCRIBED_TO_TOPIC).
var ErrGroupSubscribedToTopic = errors.New("groups: the group is subscribed to the topic")

// DeleteOffsets deletes a group's committed offsets of parts (Kafka's
// OffsetDelete, GroupCoordinator.handleDeleteOffsets). An Empty group (or
// one known only by its offsets, as after a restart) loses them all. A
// consumer group with members (protocol type "consumer") keeps the offsets
// of the topics its members subscribe to, as their subscriptions in the
// selected protocol's metadata say (ConsumerProtocolSubscription; a member
// whose metadata does not parse counts as subscribed to every topic):
// those partitions get ErrGroupSubscribedToTopic, the others are deleted.
// A KIP-848 consumer group with members keeps the offsets of the topics it
// subscribes to the same way. Any other group with members is ErrNotEmpty,
// as a whole. A group with
// neither members nor offsets is ErrGroupIDNotFound. perPartition[i] is
// the outcome of parts[i] (nil: deleted, or there was nothing to delete)
// when err is nil.
func (c *Coordinator) DeleteOffsets(group string, parts []TopicPartition) (perPartition []error, err error) {
	if len(group) > maxString {
		return nil, fmt.Errorf("%w: group id of %d bytes", ErrInvalidGroupID, len(group))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	store, err := c.storeOf(group)
	if err != nil {
		return nil, err
	}
	// subscribes, when not nil, says which topics an active group keeps.
	var subscribes func(topic string) bool
	g := c.groups[group]
	switch cg := c.cgroups[group]; {
	case cg != nil && !cg.Empty():
		// A KIP-848 consumer group with members (Kafka's
		// ConsumerGroup.isSubscribedToTopic).
		subscribes = cg.Subscribes
	case (g == nil || g.state == stateDead) && len(store.offsets[group]) == 0:
		return nil, fmt.Errorf("%w: %q", ErrGroupIDNotFound, group)
	case g != nil && g.state != stateEmpty && g.state != stateDead:
		if g.protocolType != "consumer" {
			return nil, fmt.Errorf("%w: %q is %v with %d members of protocol type %q", ErrNotEmpty, group, g.state,
				len(g.order), g.protocolType)
		}
		subscribed := g.subscribedTopics() // nil: every topic
		subscribes = func(topic string) bool { return subscribed == nil || subscribed[topic] }
	}
	perPartition = make([]error, len(parts))
	drop := map[TopicPartition]bool{}
	for i, tp := range parts {
		if subscribes != nil && subscribes(tp.Topic) {
			perPartition[i] = fmt.Errorf("%w: %q subscribes to %q", ErrGroupSubscribedToTopic, group, tp.Topic)
			continue
		}
		drop[tp] = true
	}
	if len(drop) == 0 {
		return perPartition, nil
	}
	err = store.removeWhere(c.o.Clock.Now(), func(k offsetKey) bool { return k.group == group && drop[k.TopicPartition] })
	if err != nil {
		err = fmt.Errorf("%w: deleting offsets: %v", ErrCoordinatorNotAvailable, err)
		c.o.Logger.Error("offset delete failed", "group", group, "err", err)
		return nil, err
	}
	return perPartition, nil
}

// subscribedTopics is the union of the members' subscriptions in the
// selected protocol's metadata (Kafka's GroupMetadata.subscribedTopics), nil
// when some member's does not parse (then every topic counts as
// subscribed).
func (g *group) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.order {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}
