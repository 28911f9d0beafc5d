package consumer

import "errors"

// The sentinels the state machine answers with; every error wraps one of
// them, and the transport maps each to its Kafka code.
var (
	// ErrUnknownMemberID: no member with this id (it left, was fenced by its
	// session timeout, or the coordinator restarted). UNKNOWN_MEMBER_ID; the
	// client rejoins with epoch 0 and a new id.
	ErrUnknownMemberID = errors.New("consumer group: unknown member id")
	// ErrFencedMemberEpoch: a heartbeat's member epoch is not the member's.
	// FENCED_MEMBER_EPOCH; the client gives up its partitions and rejoins.
	ErrFencedMemberEpoch = errors.New("consumer group: fenced member epoch")
	// ErrStaleMemberEpoch: an OffsetCommit or OffsetFetch with an epoch
	// other than the member's (see CheckCommit). STALE_MEMBER_EPOCH.
	ErrStaleMemberEpoch = errors.New("consumer group: stale member epoch")
	// ErrUnreleasedInstanceID: a static member joins under an instance id
	// whose previous member has not left. UNRELEASED_INSTANCE_ID.
	ErrUnreleasedInstanceID = errors.New("consumer group: unreleased instance id")
	// ErrFencedInstanceID: the instance id belongs to another member id.
	// FENCED_INSTANCE_ID.
	ErrFencedInstanceID = errors.New("consumer group: fenced instance id")
	// ErrUnsupportedAssignor: a server assignor not served.
	// UNSUPPORTED_ASSIGNOR.
	ErrUnsupportedAssignor = errors.New("consumer group: unsupported assignor")
	// ErrInvalidRequest: a heartbeat breaking the protocol's rules (a join
	// without a subscription or with owned partitions, an empty member id,
	// an epoch below -2). INVALID_REQUEST.
	ErrInvalidRequest = errors.New("consumer group: invalid request")
	// ErrInvalidRegex: a subscription regex that does not compile.
	// INVALID_REGULAR_EXPRESSION.
	ErrInvalidRegex = errors.New("consumer group: invalid regular expression")
	// ErrGroupFull: the group has Config.MaxSize members. GROUP_MAX_SIZE_REACHED.
	ErrGroupFull = errors.New("consumer group: group max size reached")
)
