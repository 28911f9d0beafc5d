package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/core/coord"
)

// The top-level paths, Kafka's (ZkData.scala).
const (
	BrokerIDsPath       = "/brokers/ids"
	TopicsPath          = "/brokers/topics"
	ControllerPath      = "/controller"
	ControllerEpochPath = "/controller_epoch"
	DeleteTopicsPath    = "/admin/delete_topics"
	ConfigTopicsPath    = "/config/topics"
	ClusterIDPath       = "/cluster/id"
	ProducerIDBlockPath = "/latest_producer_id_block"
)

// BrokerPath is broker id's registration, /brokers/ids/<id>.
func BrokerPath(id int32) string { return BrokerIDsPath + "/" + strconv.FormatInt(int64(id), 10) }

// TopicPath is the topic's assignment node, /brokers/topics/<t>.
func TopicPath(topic string) string { return TopicsPath + "/" + topic }

// PartitionsPath is /brokers/topics/<t>/partitions.
func PartitionsPath(topic string) string { return TopicPath(topic) + "/partitions" }

// PartitionPath is /brokers/topics/<t>/partitions/<p>, the parent of the
// state node (empty, as Kafka creates it).
func PartitionPath(topic string, p int32) string {
	return PartitionsPath(topic) + "/" + strconv.FormatInt(int64(p), 10)
}

// StatePath is /brokers/topics/<t>/partitions/<p>/state.
func StatePath(topic string, p int32) string { return PartitionPath(topic, p) + "/state" }

// ConfigTopicPath is the topic's config node, /config/topics/<t>.
func ConfigTopicPath(topic string) string { return ConfigTopicsPath + "/" + topic }

// DeleteTopicPath is the topic's deletion request, /admin/delete_topics/<t>.
func DeleteTopicPath(topic string) string { return DeleteTopicsPath + "/" + topic }

// DeletionAckPath is weir's own: /admin/delete_topics/<t>/<broker>, created
// by a replica broker once it has removed its logs of the topic.
func DeletionAckPath(topic string, broker int32) string {
	return DeleteTopicPath(topic) + "/" + strconv.FormatInt(int64(broker), 10)
}

var (
	// ErrMalformed: a node's content (or name) is not what this layout
	// writes or Kafka wrote: hand-written, truncated, or another version.
	// The message names the path and what is wrong.
	ErrMalformed = errors.New("layout: malformed node")
	// ErrBrokerIDInUse: RegisterBroker found the id registered by another
	// session; the message says which host:port registered it.
	ErrBrokerIDInUse = errors.New("layout: broker id in use")
	// ErrFenced: a controller write failed its /controller_epoch check: a
	// newer controller was elected since, and this one was deposed.
	ErrFenced = errors.New("layout: fenced: controller was deposed")
	// ErrTopicExists: CreateTopic found the topic's node.
	ErrTopicExists = errors.New("layout: topic exists")
	// ErrMarkedForDeletion: CreateTopic found a deletion request of the
	// name still pending (always wrapped with ErrTopicExists).
	ErrMarkedForDeletion = errors.New("layout: topic marked for deletion")
	// ErrInvalid: an argument this layout would not write (a topic name
	// Kafka rejects, a negative id, a state or assignment that its decoder
	// would call malformed). Nothing was written.
	ErrInvalid = errors.New("layout: invalid argument")
)

// malformed is ErrMalformed for path, saying what is wrong.
func malformed(path, format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrMalformed, path, fmt.Sprintf(format, args...))
}

// maxTopicLen is Kafka's limit (Topic.MAX_NAME_LENGTH).
const maxTopicLen = 249

// checkTopicName checks a name CreateTopic may write: Kafka's rules
// (org.apache.kafka.common.internals.Topic.validate), so that Kafka and its
// tools can read what weir writes.
func checkTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicLen {
		return fmt.Errorf("%w: topic name %q: want 1 to %d characters, not \".\" or \"..\"", ErrInvalid, name, maxTopicLen)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q: only ASCII letters, digits, '.', '_' and '-'", ErrInvalid, name)
		}
	}
	return nil
}

// checkTopicRef checks a name the other operations look up: anything that
// is one path component (a topic written by an older tool may break
// today's rules, and can still be read and deleted).
func checkTopicRef(name string) error {
	if strings.Contains(name, "/") {
		return fmt.Errorf("%w: topic name %q contains '/'", ErrInvalid, name)
	}
	if err := coord.ValidatePath(TopicPath(name)); err != nil {
		return fmt.Errorf("%w: topic name %q: %w", ErrInvalid, name, err)
	}
	return nil
}

// parseID reads a node name that is a broker or partition id: a canonical
// non-negative decimal int32 (as Kafka writes them).
func parseID(name string) (int32, bool) {
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name {
		return 0, false
	}
	return int32(n), true
}
