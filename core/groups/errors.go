package groups

import "errors"

// The sentinels below are the coordinator's answers; every error it returns
// wraps one of them (errors.Is), and the transport maps each to its Kafka
// error code.
var (
	// ErrUnknownMemberID: the member id is not in the group (it was removed,
	// the broker restarted, or it was never there). The client rejoins with an
	// empty member id. UNKNOWN_MEMBER_ID.
	ErrUnknownMemberID = errors.New("groups: unknown member id")
	// ErrIllegalGeneration: the request names a generation other than the
	// group's current one. ILLEGAL_GENERATION.
	ErrIllegalGeneration = errors.New("groups: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the member must
	// rejoin. REBALANCE_IN_PROGRESS.
	ErrRebalanceInProgress = errors.New("groups: rebalance in progress")
	// ErrMemberIDRequired: JoinGroup v4+ with an empty member id; the result
	// carries the id to rejoin with. MEMBER_ID_REQUIRED.
	ErrMemberIDRequired = errors.New("groups: member id required")
	// ErrInconsistentProtocol: the member's protocol type or protocols do not
	// match the group's. INCONSISTENT_GROUP_PROTOCOL.
	ErrInconsistentProtocol = errors.New("groups: inconsistent group protocol")
	// ErrInvalidSessionTimeout: outside [MinSessionTimeout, MaxSessionTimeout].
	// INVALID_SESSION_TIMEOUT.
	ErrInvalidSessionTimeout = errors.New("groups: invalid session timeout")
	// ErrGroupIDNotFound: Delete of a group that does not exist.
	// GROUP_ID_NOT_FOUND.
	ErrGroupIDNotFound = errors.New("groups: group id not found")
	// ErrNotEmpty: Delete of a group that still has members. NON_EMPTY_GROUP.
	ErrNotEmpty = errors.New("groups: group not empty")
	// ErrInvalidGroupID: an empty group id where one is required (or one too
	// long to store). INVALID_GROUP_ID.
	ErrInvalidGroupID = errors.New("groups: invalid group id")
	// ErrFencedInstanceID: a static member (group.instance.id) was replaced
	// by a newer member with the same instance id. FENCED_INSTANCE_ID.
	ErrFencedInstanceID = errors.New("groups: fenced instance id")
	// ErrCoordinatorNotAvailable: the coordinator is closed, or the offsets
	// store failed; the client retries. COORDINATOR_NOT_AVAILABLE.
	ErrCoordinatorNotAvailable = errors.New("groups: coordinator not available")
	// ErrNotCoordinator: the group's partition of __consumer_offsets is not
	// loaded here (another broker leads it, or it moved); the client looks
	// for the coordinator again. NOT_COORDINATOR.
	ErrNotCoordinator = errors.New("groups: not the coordinator")
	// ErrCoordinatorLoadInProgress: the group's partition is being loaded;
	// the client retries. COORDINATOR_LOAD_IN_PROGRESS.
	ErrCoordinatorLoadInProgress = errors.New("groups: coordinator load in progress")
	// ErrOffsetMetadataTooLarge: a committed offset's metadata is longer than
	// Options.MaxMetadataBytes. OFFSET_METADATA_TOO_LARGE.
	ErrOffsetMetadataTooLarge = errors.New("groups: offset metadata too large")
	// ErrInvalidCommitSize: a commit the offsets store cannot hold (a topic
	// name longer than 32767 bytes). INVALID_COMMIT_OFFSET_SIZE.
	ErrInvalidCommitSize = errors.New("groups: invalid commit offset size")
	// ErrCorrupt: offsets on disk cannot be read (a record weir did not
	// write, or an old-layout store's pointer file garbled). Load and
	// ReadLegacy fail rather than lose offsets.
	ErrCorrupt = errors.New("groups: corrupt offsets store")
)
