// Package topicconfig is what a topic's configs mean: the keys a topic
// accepts (Kafka's names, plus weir's own), their validation (Normalize), how
// a topic's own configs combine with the broker defaults (Resolve), and what
// they mean to a partition log (Parse). It also defines Plugins, the seam
// through which configs naming flush policies and codecs are built.
//
// # Keys and values
//
// The catalog (catalog.go, Catalog, Lookup) is every topic config Kafka
// defines (TopicConfig, LogConfig and QuotaConfig of Kafka 3.x), with
// Kafka's type, default, validation and broker synonym (the broker config
// that defaults it: log.retention.ms for retention.ms), plus weir's own
// weir.flush.policy (a plugins/flushpolicy spec, say "messages:n=1000") and
// weir.durable.acks (true|false). weir honours retention.ms,
// retention.bytes, segment.bytes, segment.ms, max.message.bytes,
// index.interval.bytes, flush.messages, flush.ms, compression.type (and
// compression.gzip.level with gzip), min.insync.replicas, cleanup.policy,
// delete.retention.ms, min.cleanable.dirty.ratio, min.compaction.lag.ms and
// max.compaction.lag.ms (read by the log cleaner through Config),
// unclean.leader.election.enable (read by the controller) and its own keys.
// Every other Kafka key is accepted with Kafka's validation, stored,
// described, and ignored: its documentation (Key.Doc, what DescribeConfigs
// reports) opens with "Accepted for compatibility and ignored by weir" and
// says why. So a tool that sends Kafka's defaults (kaf's cleanup.policy=delete)
// or writes back everything DescribeConfigs listed never fails. Unknown keys
// and out-of-range values are
// refused with ErrInvalidConfig naming the key and value. A topic's metadata
// keeps only what it set explicitly; the broker defaults fill the other keys
// (Resolve) every time the topic is opened, so changing a broker default
// changes the topics that do not override it. The effective result holds
// keys set by the topic or by the defaults, nothing for keys left at Kafka's
// default. The three flush
// keys come as a group from the topic if it sets any of them, otherwise from
// the defaults; within a group weir.flush.policy wins over flush.*, and
// flush.messages with flush.ms fsyncs when either asks, as Kafka does.
//
// cleanup.policy is delete (Kafka's default: retention by time and size),
// compact (the log cleaner keeps the last record of each key; no retention by
// time or size, so retention.ms and retention.bytes are ignored) or both
// (compact,delete: cleaned, and old segments deleted too).
//
// # Layers
//
// A topic's value of a key comes, most specific first, from the topic
// itself (/config/topics/<t>, DYNAMIC_TOPIC_CONFIG), this broker's dynamic
// configs (/config/brokers/<id>), every broker's (/config/brokers/<default>),
// the broker's command line (STATIC_BROKER_CONFIG), or Kafka's default
// (Layers). Broker configs carry Kafka's broker names (log.retention.ms);
// BrokerToTopic maps them onto topic keys. DescribeTopic and DescribeBroker
// say, per key, the value in effect, where it comes from and its synonyms,
// as Kafka's DescribeConfigs does.
//
// Where partlog cannot say exactly what Kafka means, the mapping takes the
// nearest meaning: retention.ms=0 and retention.bytes=0 ("keep only the
// active segment") become 1 ns and 1 byte; index.interval.bytes=0 becomes 1.
// segment.bytes must be at least 1024 (Kafka allows 14) and
// max.message.bytes at least 61, the smallest batch (Kafka allows 0, which
// refuses every batch).
package topicconfig
