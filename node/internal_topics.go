package node

import (
	"fmt"
	"strings"
)

// Internal topics. Kafka keeps its own state in topics whose names start
// with "__": __consumer_offsets (committed offsets and group metadata),
// __transaction_state (the transaction log), and, in its newer modes,
// __cluster_metadata, __share_group_state and __remote_log_metadata. Kafka
// reports the first two as internal in Metadata (Topic.isInternal), never
// lets a client write to them, and creates them itself with their own
// configs. weir does the same for the names it (or Kafka) owns:
//
//   - reserved (IsReservedTopic): the names above and every name starting
//     with "__weir" (for weir's own future state). A client cannot create
//     one (CreateTopics: INVALID_TOPIC_EXCEPTION, with a message saying it
//     is reserved), Metadata and Produce never auto-create one as an
//     ordinary topic, and Produce to one is refused
//     (ErrWriteToInternalTopic). The broker creates OffsetsTopic itself, as
//     the compacted internal topic, when a group request, FindCoordinator or
//     a Metadata request naming it first needs it; TransactionStateTopic
//     likewise for a transactional request.
//   - internal (IsInternalTopic): __consumer_offsets and
//     __transaction_state, listed with IsInternal in Metadata; DeleteTopics
//     of one is refused.
//
// Other names starting with "__" are ordinary topics, as in Kafka: tools
// keep their own state in such topics (Cruise Control's
// __CruiseControlMetrics, Confluent's __consumer_timestamps), and refusing
// them would break those tools.

// TransactionStateTopic is Kafka's transaction log, the transaction
// coordinator's state (txn.go), created by the broker like OffsetsTopic.
const TransactionStateTopic = "__transaction_state"

// reservedTopics are the names of Kafka's own topics (see the comment
// above).
var reservedTopics = map[string]bool{
	OffsetsTopic:            true,
	TransactionStateTopic:   true,
	"__cluster_metadata":    true,
	"__share_group_state":   true,
	"__remote_log_metadata": true,
}

// reservedPrefix starts the names weir keeps for its own future topics.
const reservedPrefix = "__weir"

// IsInternalTopic reports whether name is one of Kafka's internal topics,
// which Metadata lists as internal: __consumer_offsets and
// __transaction_state (Kafka's Topic.isInternal).
func IsInternalTopic(name string) bool {
	return name == OffsetsTopic || name == TransactionStateTopic
}

// IsReservedTopic reports whether name is reserved for the broker's own
// state: clients cannot create it, write to it, or have it auto-created.
func IsReservedTopic(name string) bool {
	return reservedTopics[name] || strings.HasPrefix(name, reservedPrefix)
}

// reservedTopic is the error for a client's attempt to create a reserved
// topic.
func reservedTopic(name string) error {
	return fmt.Errorf("%w: %q is reserved for the broker's internal use (names %s and %s*)",
		ErrInvalidTopic, name, "__consumer_offsets, __transaction_state, __cluster_metadata, __share_group_state, __remote_log_metadata",
		reservedPrefix)
}
