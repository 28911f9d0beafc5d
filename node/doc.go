// Package node is a broker's state and decisions, between the wire and the
// storage: what the transport calls once it has decoded a request, and the
// composition root that opens, runs and closes everything a broker keeps.
//
//	transport (wire only) ──▶ node (decisions) ──▶ core/topics, core/groups, core/partlog (storage and state machines)
//
// The transport decodes a request, calls one method here and encodes the
// answer; it makes no policy and never touches logs, segments or files. The
// node decides: whether an unknown topic is auto-created (Produce, Metadata),
// whether acks=all can be met (min.insync.replicas), how long a durable ack
// waits and which partitions of a request share fsync rounds, what a
// partition's high watermark and leader epoch are, which broker coordinates
// a group, what deleting a topic removes (its logs and its committed
// offsets), which replication factors and assignments are possible. A
// partition's log is never handed out: reads go through Partition (the high
// watermark, Read returning Records for sendfile, Wait for long polls,
// ListOffset), writes through Produce.
//
// Errors come back as the core packages' sentinels (or the node's own, in
// errors.go), wrapped; the transport maps them to Kafka codes in one table.
//
// # Data directory
//
//	<DataDir>/
//	    meta.properties          cluster.id and node.id, written once (Kafka's file of the same name)
//	    weir-meta.json           topics and their configs (core/topics)
//	    <topic>-<partition>/     one partition log each (core/partlog)
//	    __groups/                committed offsets (core/groups)
//
// The cluster id is made up on the first start and kept, so clients that
// remember it (librdkafka logs a change) see the same cluster after a
// restart.
//
// # Lifetime
//
// Open opens the identity, the plugin host, the topics (recovering every
// partition log), the group coordinator, and starts the retention loop, which
// runs on Config.Clock (core/clock), so a test drives it with a manual clock
// instead of sleeping. Close stops them in the reverse order (see Close).
// Whoever serves the node (transport/broker) stops calling it before Close.
//
// The node owns the Prometheus registry: it registers the Go and process
// collectors and the partition metrics (offsets, size, fsyncs, read at
// scrape time); the transport registers its request and connection metrics
// into the same registry.
package node
