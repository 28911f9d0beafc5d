package groups

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/weir-broker/weir/core/groups/assignor"
	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/partlog"
)

// Options configures a Coordinator. Zero values take the defaults named on
// each field (Kafka's broker defaults, where Kafka has one).
type Options struct {
	// PartitionFor maps a group to its partition of __consumer_offsets (Kafka:
	// abs(hash(group)) % partitions); the coordinator serves a group only
	// while that partition is loaded (Load). Default: every group in
	// partition 0.
	PartitionFor func(group string) int32
	// Clock tells the time and runs the session, rebalance and sync
	// deadlines. Default partlog.SystemClock.
	Clock partlog.Clock
	// Logger receives rebalances, expirations and store reports. Default:
	// discarded.
	Logger *slog.Logger
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for. Defaults 6s and 30m (Kafka
	// group.min.session.timeout.ms, group.max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty group
	// waits for more members, extended by the same delay while members keep
	// joining, up to the rebalance timeout (Kafka
	// group.initial.rebalance.delay.ms, 3s there). Zero (the default here)
	// completes it as soon as every member has joined; negative is invalid.
	InitialRebalanceDelay time.Duration
	// MaxMetadataBytes is the longest metadata string a committed offset may
	// carry. Default 4096 (Kafka offset.metadata.max.bytes).
	MaxMetadataBytes int

	// Consumer configures KIP-848 consumer groups (see consumer.Config for
	// the defaults), and Topics is the topic metadata they assign from.
	// Default Topics: none (every subscription matches nothing).
	Consumer consumer.Config
	Topics   consumer.Topics

	// newMemberID makes member ids; tests make them predictable. Default:
	// prefix + "-" + a random UUID, as Kafka does.
	newMemberID func(prefix string) string
}

// Defaults, exported for documentation and for callers building Options.
const (
	DefaultMinSessionTimeout = 6 * time.Second
	DefaultMaxSessionTimeout = 30 * time.Minute
	DefaultMaxMetadataBytes  = 4096
)

func (o Options) validate() (Options, error) {
	if o.PartitionFor == nil {
		o.PartitionFor = func(string) int32 { return 0 }
	}
	if o.Clock == nil {
		o.Clock = partlog.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MinSessionTimeout == 0 {
		o.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if o.MaxSessionTimeout == 0 {
		o.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if o.MinSessionTimeout < 0 || o.MaxSessionTimeout < o.MinSessionTimeout {
		return o, fmt.Errorf("groups: session timeouts: min %v, max %v", o.MinSessionTimeout, o.MaxSessionTimeout)
	}
	if o.InitialRebalanceDelay < 0 {
		return o, fmt.Errorf("groups: negative InitialRebalanceDelay %v", o.InitialRebalanceDelay)
	}
	switch {
	case o.MaxMetadataBytes == 0:
		o.MaxMetadataBytes = DefaultMaxMetadataBytes
	case o.MaxMetadataBytes < 0 || o.MaxMetadataBytes > maxString:
		return o, fmt.Errorf("groups: MaxMetadataBytes %d outside [0, %d]", o.MaxMetadataBytes, maxString)
	}
	var err error
	if o.Consumer, err = o.Consumer.Validate(); err != nil {
		return o, fmt.Errorf("groups: %w", err)
	}
	if o.Topics == nil {
		o.Topics = noTopics{}
	}
	if o.newMemberID == nil {
		o.newMemberID = randomMemberID
	}
	return o, nil
}

// Protocol is one assignment protocol a member supports (for consumers:
// "range", "roundrobin", "cooperative-sticky", ...) with the member's metadata
// for it (its subscription), opaque to the coordinator.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member describes a group member. In JoinResult.Members, Metadata is the
// member's metadata for the selected protocol and Assignment is empty.
type Member struct {
	MemberID             string
	InstanceID           *string
	ClientID, ClientHost string
	Metadata, Assignment []byte
}

// JoinRequest is one JoinGroup request. The coordinator copies what it keeps.
type JoinRequest struct {
	Group, MemberID string
	InstanceID      *string
	ProtocolType    string
	// Protocols in the member's order of preference.
	Protocols []Protocol
	// SessionTimeout bounds the time between heartbeats; RebalanceTimeout
	// how long a rebalance waits for members to rejoin (JoinGroup v0 has
	// none: zero means SessionTimeout).
	SessionTimeout, RebalanceTimeout time.Duration
	// RequireKnownMemberID: JoinGroup v4+; a new member first gets an id with
	// ErrMemberIDRequired and rejoins with it.
	RequireKnownMemberID bool
	ClientID, ClientHost string
}

// JoinResult answers a JoinGroup. On error Generation is -1, except that
// ErrMemberIDRequired carries the MemberID to rejoin with.
type JoinResult struct {
	Generation                                 int32
	ProtocolType, Protocol, LeaderID, MemberID string
	// Members is filled for the leader only: every member with its metadata
	// for the selected protocol, in join order.
	Members []Member
}

// SyncRequest is one SyncGroup request. Assignments (member id to
// assignment) come from the leader; others send none.
type SyncRequest struct {
	Group, MemberID        string
	InstanceID             *string
	Generation             int32
	ProtocolType, Protocol *string // SyncGroup v5+; nil: not checked
	Assignments            map[string][]byte
}

// SyncResult answers a SyncGroup: the member's assignment from the leader.
type SyncResult struct {
	ProtocolType, Protocol string
	Assignment             []byte
}

// LeaveMember names one member leaving (LeaveGroup v3+ carries several). An
// empty MemberID with an InstanceID removes that static member.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetCommit is one partition's committed offset. A nil Metadata is
// stored as "".
type OffsetCommit struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// Committed is a partition's committed offset as Fetch returns it.
type Committed struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Description describes a group (DescribeGroups). Protocol and the members'
// Metadata and Assignment are filled only when the group is Stable, as Kafka
// does. An unknown group is described as State "Dead" with nothing else.
type Description struct {
	Group, State, ProtocolType, Protocol string
	Members                              []Member
}

// Listing is one group in List (ListGroups). Type is "consumer" for a
// KIP-848 group (whose ProtocolType is "consumer" too), "" for a classic one.
type Listing struct {
	Group, ProtocolType, State string
	Type                       string
}

// noTopics is the topic metadata of a coordinator given none.
type noTopics struct{}

func (noTopics) Topic(string) (assignor.Topic, bool) { return assignor.Topic{}, false }
func (noTopics) Names() []string                     { return nil }
