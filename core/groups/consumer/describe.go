package consumer

// Description is a group as ConsumerGroupDescribe reports it.
type Description struct {
	Group, State           string
	Epoch, AssignmentEpoch int32
	Assignor               string
	Members                []MemberDescription // sorted by id
}

// MemberDescription is one member. Assigned is what it was last handed
// (partitions pending revocation excluded); Target is its share of the
// target assignment.
type MemberDescription struct {
	MemberID             string
	InstanceID, RackID   *string
	Epoch                int32
	ClientID, ClientHost string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	Assigned, Target     []TopicPartitions
}

// Describe describes the group. Topic names for ids are in TopicNames.
func (g *Group) Describe() Description {
	d := Description{Group: g.id, State: g.State(), Epoch: g.epoch, AssignmentEpoch: g.targetEpoch,
		Assignor: g.assignorName}
	if d.Assignor == "" {
		d.Assignor = g.preferred().Name()
	}
	for _, m := range g.sortedMembers() {
		md := MemberDescription{MemberID: m.id, InstanceID: cloneStr(m.instanceID), RackID: cloneStr(m.rackID),
			Epoch: m.epoch, ClientID: m.clientID, ClientHost: m.clientHost,
			SubscribedTopicNames: append([]string{}, m.topics...),
			Assigned:             m.assigned.list(), Target: g.target[m.id].list()}
		if m.regex != "" {
			md.SubscribedTopicRegex = cloneStr(&m.regex)
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// TopicNames maps the ids of the topics the group subscribes to to their
// names.
func (g *Group) TopicNames() map[[16]byte]string {
	out := make(map[[16]byte]string, len(g.subscribed))
	for n, t := range g.subscribed {
		out[t.ID] = n
	}
	return out
}

// Subscribes reports whether some member subscribes to topic, by name or by
// a regex matching it when the group last resolved its subscription (what
// OffsetDelete must refuse, GROUP_SUBSCRIBED_TO_TOPIC).
func (g *Group) Subscribes(topic string) bool {
	if g.names[topic] > 0 {
		return true
	}
	_, ok := g.subscribed[topic]
	return ok
}
