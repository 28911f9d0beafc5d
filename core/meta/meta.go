// Package meta is the cluster as one broker sees it: an immutable Image of
// the live brokers, the controller, and every topic's partitions (assigned
// replicas, leader, leader epoch, ISR), built from the coordination store
// and swapped atomically, so every request reads one consistent picture.
// Metadata, produce routing (NOT_LEADER_OR_FOLLOWER) and FindCoordinator
// answer from it.
//
// The types here are also the vocabulary of the controller (core/controller)
// and of the store's layout (core/coord/layout), which encodes them in
// Kafka's ZooKeeper-mode JSON. None of them does I/O.
package meta

import (
	"maps"
	"slices"
	"strings"
)

// NoLeader is the leader id of a partition without one.
const NoLeader int32 = -1

// Broker is a registered (live) broker.
type Broker struct {
	ID int32
	// Host and Port are the address old readers take: the first PLAINTEXT
	// endpoint, else the first endpoint (Kafka's registration writes the
	// first PLAINTEXT one at the top level). With no Endpoints, the broker
	// has one PLAINTEXT listener named PLAINTEXT at Host:Port.
	Host string
	Port int32
	// Endpoints are the broker's advertised listeners, in its order (Kafka's
	// advertised.listeners): clients of listener X are told each broker's
	// listener-X endpoint, and brokers replicate over the inter-broker
	// listener's. Nil means one PLAINTEXT endpoint at Host:Port.
	Endpoints []Endpoint
	Rack      *string
	// Epoch is the czxid of the broker's registration (KIP-380's broker
	// epoch): it grows each time the broker registers again, so a broker that
	// bounced is told apart from one that stayed.
	Epoch int64
}

// Endpoint is one advertised listener of a broker: "NAME://host:port" in
// its registration, with its security protocol from the registration's
// listener_security_protocol_map.
type Endpoint struct {
	Listener string // Kafka's listener name, such as "INTERNAL"
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Host     string
	Port     int32
}

// Listeners returns b's endpoints: Endpoints, or one PLAINTEXT endpoint
// named PLAINTEXT at Host:Port when there are none.
func (b Broker) Listeners() []Endpoint {
	if len(b.Endpoints) > 0 {
		return b.Endpoints
	}
	return []Endpoint{{Listener: "PLAINTEXT", Protocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
}

// Endpoint returns b's endpoint of the listener named listener (names
// compare as Kafka's ListenerName does: case-insensitively, upper case
// being canonical); false when b has no such listener.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Listeners() {
		if strings.EqualFold(e.Listener, listener) {
			return e, true
		}
	}
	return Endpoint{}, false
}

// PartitionState is one partition's leader and in-sync replicas, as the
// controller (and, for ISR changes, the leader) writes them.
type PartitionState struct {
	Leader      int32 // NoLeader when none
	LeaderEpoch int32 // grows with every leader change the controller makes
	ISR         []int32
	// ControllerEpoch is the epoch of the controller that wrote the state.
	ControllerEpoch int32
	// Version is the store version of the record (Kafka's zkVersion, the
	// partition epoch): writers compare-and-set on it. -1 when unknown.
	Version int32
}

// Clone returns a deep copy.
func (s PartitionState) Clone() PartitionState {
	s.ISR = slices.Clone(s.ISR)
	return s
}

// Equal reports whether two states say the same (versions aside).
func (s PartitionState) Equal(o PartitionState) bool {
	return s.Leader == o.Leader && s.LeaderEpoch == o.LeaderEpoch && s.ControllerEpoch == o.ControllerEpoch &&
		slices.Equal(s.ISR, o.ISR)
}

// Topic is one topic: its id, assignment, configs and partition states.
type Topic struct {
	Name string
	ID   [16]byte
	// Assignment[i] are partition i's replicas, the preferred leader first.
	Assignment [][]int32
	// Configs are the topic's own configs (Kafka names); broker defaults are
	// not included.
	Configs map[string]string
	// States[i] is partition i's state, nil where none was written yet (a
	// partition the controller has not started).
	States []*PartitionState
	// Deleting: a deletion was asked for (/admin/delete_topics/<name>).
	Deleting bool
}

// Partitions is the number of partitions.
func (t *Topic) Partitions() int { return len(t.Assignment) }

// Clone returns a deep copy.
func (t *Topic) Clone() *Topic {
	c := *t
	c.Assignment = make([][]int32, len(t.Assignment))
	for i, r := range t.Assignment {
		c.Assignment[i] = slices.Clone(r)
	}
	c.Configs = maps.Clone(t.Configs)
	c.States = make([]*PartitionState, len(t.States))
	for i, s := range t.States {
		if s != nil {
			cs := s.Clone()
			c.States[i] = &cs
		}
	}
	return &c
}

// Image is the cluster as one broker sees it. It is immutable: build a new
// one (with Builder or by hand) to change anything, never modify one that
// was published.
type Image struct {
	ClusterID string
	// Controller is the controller's broker id, -1 when there is none.
	Controller      int32
	ControllerEpoch int32
	// Brokers are the live brokers, by id.
	Brokers map[int32]Broker
	// Topics by name.
	Topics map[string]*Topic
	// ShuttingDown are the live brokers in controlled shutdown, sorted.
	ShuttingDown []int32
	// Resigned are the resignations of live brokers from partitions whose
	// logs failed, sorted (see Resignation).
	Resigned []Resignation
	// BrokerConfigs are the dynamic broker configs (/config/brokers/<e>),
	// by entity: "<default>" for every broker's, or a broker id; each in
	// Kafka's broker config names (log.retention.ms).
	BrokerConfigs map[string]map[string]string
}

// Resignation says that Broker's log of a partition failed while it was in
// the ISR in leader epoch LeaderEpoch (core/replica's LogFailed): the
// controller takes it out of the ISR, moving the leadership if it led, as
// for a bounce of that broker. It is stale once the partition's state has
// another epoch.
type Resignation struct {
	Broker      int32
	Topic       string
	Partition   int32
	LeaderEpoch int32
}

// Compare orders resignations by topic, partition, broker and epoch.
func (r Resignation) Compare(o Resignation) int {
	if c := strings.Compare(r.Topic, o.Topic); c != 0 {
		return c
	}
	for _, d := range [3][2]int32{{r.Partition, o.Partition}, {r.Broker, o.Broker}, {r.LeaderEpoch, o.LeaderEpoch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Empty is an image with no brokers, no controller and no topics.
func Empty(clusterID string) *Image {
	return &Image{ClusterID: clusterID, Controller: -1, Brokers: map[int32]Broker{}, Topics: map[string]*Topic{}}
}

// Live reports whether broker id is registered.
func (im *Image) Live(id int32) bool {
	_, ok := im.Brokers[id]
	return ok
}

// SortedBrokers returns the live brokers by id.
func (im *Image) SortedBrokers() []Broker {
	out := make([]Broker, 0, len(im.Brokers))
	for _, b := range im.Brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Broker) int { return int(a.ID) - int(b.ID) })
	return out
}

// SortedTopics returns the topics by name.
func (im *Image) SortedTopics() []*Topic {
	out := make([]*Topic, 0, len(im.Topics))
	for _, t := range im.Topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TopicByID returns the topic with the given id, or nil.
func (im *Image) TopicByID(id [16]byte) *Topic {
	for _, t := range im.Topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// PartitionView is what clients are told about one partition: its state,
// with replicas and ISR split into live and offline ones (Kafka's Metadata
// answers: dead brokers are filtered out of the lists, and a leader that is
// not live means no leader).
type PartitionView struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32 // every assigned replica
	ISR         []int32 // in-sync replicas that are live
	Offline     []int32 // assigned replicas that are not live
}

// View returns partition p of t as clients see it in im.
func (im *Image) View(t *Topic, p int) PartitionView {
	v := PartitionView{Leader: NoLeader, Replicas: t.Assignment[p], ISR: []int32{}, Offline: []int32{}}
	for _, r := range t.Assignment[p] {
		if !im.Live(r) {
			v.Offline = append(v.Offline, r)
		}
	}
	if p < len(t.States) && t.States[p] != nil {
		st := t.States[p]
		v.LeaderEpoch = st.LeaderEpoch
		if st.Leader != NoLeader && im.Live(st.Leader) {
			v.Leader = st.Leader
		}
		for _, r := range st.ISR {
			if im.Live(r) {
				v.ISR = append(v.ISR, r)
			}
		}
	}
	return v
}
