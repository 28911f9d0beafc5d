package transport

import (
	"context"
	"errors"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/credentials"
	"github.com/weir-broker/weir/core/filecache"
	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/producers"
	"github.com/weir-broker/weir/core/recompress"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/replica"
	"github.com/weir-broker/weir/core/segment"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/txn"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/fetchsession"
)

var (
	// ErrConfig: NewServer was given an invalid Config.
	ErrConfig = errors.New("transport: invalid config")

	// The transport's own reasons to refuse a request; each has its code in
	// errorTable.
	errOldMessageFormat = errors.New("transport: message format v0/v1 (Produce v0-v2) is not supported")
	errDuplicateTopic   = errors.New("transport: topic named twice in one request")
)

// errorTable is the one place where errors become Kafka error codes: the first
// entry whose error matches (errors.Is) gives the code. Errors that match
// nothing are UNKNOWN_SERVER_ERROR and are logged.
var errorTable = []struct {
	err  error
	code *kerr.Error
}{
	// Storage.
	{record.ErrCorrupt, kerr.CorruptMessage},
	{partlog.ErrBatchTooLarge, kerr.MessageTooLarge},
	{partlog.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{partlog.ErrFailed, kerr.KafkaStorageError},
	// Out of a resource the storage needs (descriptors, space, memory):
	// retriable, and the error message says which.
	{syscall.EMFILE, kerr.KafkaStorageError},
	{syscall.ENFILE, kerr.KafkaStorageError},
	{syscall.ENOSPC, kerr.KafkaStorageError},
	{syscall.EDQUOT, kerr.KafkaStorageError},
	{syscall.ENOMEM, kerr.KafkaStorageError},
	{filecache.ErrBudget, kerr.KafkaStorageError},
	{node.ErrPartitionStorage, kerr.KafkaStorageError},
	// A replica whose log failed resigned: the partition moves, and clients
	// and followers retry (Kafka answers an offline replica so).
	{replica.ErrLogFailed, kerr.KafkaStorageError},
	// A closed log belongs to a topic being deleted or a broker shutting
	// down: retriable, and the client refreshes its metadata.
	{partlog.ErrClosed, kerr.NotLeaderForPartition},
	{segment.ErrClosed, kerr.NotLeaderForPartition},

	// Topics and the idempotent producer.
	{node.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{node.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{node.ErrTopicExists, kerr.TopicAlreadyExists},
	{logs.ErrInvalidTopic, kerr.InvalidTopicException},
	{node.ErrInvalidPartitions, kerr.InvalidPartitions},
	{topicconfig.ErrInvalidConfig, kerr.InvalidConfig},
	{producers.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{producers.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{producers.ErrUnknownProducerID, kerr.UnknownProducerID},
	{producers.ErrDuplicateSequence, kerr.DuplicateSequenceNumber},
	// Transactions on the data path (txndata).
	{producers.ErrInvalidTxnState, kerr.InvalidTxnState},
	{producers.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	{logs.ErrControlBatch, kerr.InvalidRecord},
	{logs.ErrTransactionalWithoutProducer, kerr.InvalidRecord},
	// A closed node: the broker is shutting down (retriable).
	{node.ErrClosed, kerr.NotLeaderForPartition},
	{recompress.ErrUnsupportedCompression, kerr.UnsupportedCompressionType},

	// Groups.
	{groups.ErrUnknownMemberID, kerr.UnknownMemberID},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
	{groups.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{groups.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{groups.ErrNotEmpty, kerr.NonEmptyGroup},
	{groups.ErrInvalidGroupID, kerr.InvalidGroupID},
	{groups.ErrFencedInstanceID, kerr.FencedInstanceID},
	{groups.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{groups.ErrNotCoordinator, kerr.NotCoordinator},
	{groups.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{groups.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{groups.ErrInvalidCommitSize, kerr.InvalidCommitOffsetSize},
	{groups.ErrInvalidRequest, kerr.InvalidRequest},
	{groups.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	// KIP-848 consumer groups.
	{consumer.ErrUnknownMemberID, kerr.UnknownMemberID},
	{consumer.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{consumer.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{consumer.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{consumer.ErrFencedInstanceID, kerr.FencedInstanceID},
	{consumer.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{consumer.ErrInvalidRequest, kerr.InvalidRequest},
	{consumer.ErrInvalidRegex, kerr.InvalidRegularExpression},
	{consumer.ErrGroupFull, kerr.GroupMaxSizeReached},

	// Transactions (helper txncoord).
	{txn.ErrInvalidRequest, kerr.InvalidRequest},
	{txn.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txn.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txn.ErrProducerFenced, kerr.ProducerFenced},
	{txn.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txn.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{txn.ErrNotCoordinator, kerr.NotCoordinator},
	{txn.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{txn.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{node.ErrOperationNotAttempted, kerr.OperationNotAttempted},

	// The node's decisions.
	{node.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{node.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{node.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{node.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrNotReplica, kerr.NotLeaderForPartition},
	{replica.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{node.ErrInvalidAcks, kerr.InvalidRequiredAcks},
	{node.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{node.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{node.ErrUnknownTopicID, kerr.UnknownTopicID},
	{node.ErrNotLeader, kerr.NotLeaderForPartition},
	{node.ErrLeaderNotAvailable, kerr.LeaderNotAvailable},
	{node.ErrNotCoordinator, kerr.NotCoordinator},
	{node.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{node.ErrWriteToInternalTopic, kerr.InvalidTopicException},
	{node.ErrInvalidCoordinatorType, kerr.InvalidRequest},
	{node.ErrPolicyViolation, kerr.PolicyViolation},
	{groups.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},

	// The transport's own.
	{errOldMessageFormat, kerr.UnsupportedForMessageFormat},
	{errDuplicateTopic, kerr.InvalidRequest},
	{errUnsupportedResource, kerr.InvalidRequest},
	{node.ErrInvalidConfigRequest, kerr.InvalidRequest},

	// Security: SASL and SCRAM credentials (sasl.go, core/credentials).
	{errAuthFailed, kerr.SaslAuthenticationFailed},
	{errIllegalSaslState, kerr.IllegalSaslState},
	{errUnsupportedMechanism, kerr.UnsupportedSaslMechanism},
	{errNoCredentialStore, kerr.UnsupportedSaslMechanism},
	{credentials.ErrUnknownMechanism, kerr.UnsupportedSaslMechanism},
	{credentials.ErrUnacceptable, kerr.UnacceptableCredential},
	{credentials.ErrNotFound, kerr.ResourceNotFound},
	{credentials.ErrDuplicate, kerr.DuplicateResource},
	{credentials.ErrMalformed, kerr.UnknownServerError},

	// Fetch sessions.
	{fetchsession.ErrSessionNotFound, kerr.FetchSessionIDNotFound},
	{fetchsession.ErrInvalidEpoch, kerr.InvalidFetchSessionEpoch},

	// The coordination store (ZooKeeper) could not be reached: the
	// outcome is unknown, as Kafka's REQUEST_TIMED_OUT for a CreateTopics
	// says; clients retry.
	{coord.ErrConnectionLoss, kerr.RequestTimedOut},

	// A request cut short: its timeout passed, or the connection or server
	// is closing (then nobody reads the answer anyway).
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// errorCode returns the Kafka error code for err: 0 for nil, the errorTable
// entry's code, or UNKNOWN_SERVER_ERROR (-1).
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	if ke := kerrOf(err); ke != nil {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// kerrOf returns err's table entry, or nil when none matches.
func kerrOf(err error) *kerr.Error {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return nil
}

// errorMessage returns err's text for responses that carry one, nil for nil.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
