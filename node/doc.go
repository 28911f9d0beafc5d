// Package node is a broker's state and decisions, between the wire and the
// storage: what the transport calls once it has decoded a request, the loop
// that keeps the broker's part in the cluster, and the composition root that
// opens, runs and closes everything a broker keeps.
//
//	transport (wire only)
//	    │ decoded requests
//	    ▼
//	node ── image (core/meta) ◀── loop ──▶ coordination store (core/coord: file, ZooKeeper, memory)
//	    │                          │  └──▶ controller (core/controller), while elected
//	    ▼                          ▼
//	core/logs (partition logs)   core/groups (group coordinator)
//	core/replica (per partition) ◀── fetchers (cluster/peer) ──▶ leaders
//
// # Decisions
//
// The transport decodes a request, calls one method here and encodes the
// answer; it makes no policy and never touches logs, segments or files. The
// node decides: whether an unknown topic is auto-created (Produce, Metadata),
// whether this broker leads a partition (NOT_LEADER_OR_FOLLOWER,
// LEADER_NOT_AVAILABLE otherwise), whether acks=all can be met
// (min.insync.replicas), how long a durable ack waits and which partitions of
// a request share fsync rounds, what a partition's high watermark and leader
// epoch are, which broker coordinates a group, how a new topic's partitions
// are assigned, what deleting a topic removes. A partition's log is never
// handed out: reads go through Partition (the high watermark, Read returning
// Records for sendfile, Wait for long polls, ListOffset), writes through
// Produce. Every answer about the cluster comes from one immutable image
// (core/meta), swapped whole, so a request sees one consistent picture.
//
// # One code path, three stores
//
// The cluster state lives in a coordination store in Kafka's ZooKeeper-mode
// layout (core/coord/layout): the file store in the data directory for a
// single node (the default: no ZooKeeper to install), a ZooKeeper ensemble
// (Config.ZooKeeper), or one given (Config.Coord: core/coord/memstore in
// tests). A single node is a cluster of one: it registers, elects itself
// controller, and the controller writes its partitions' states, exactly as a
// member of a larger cluster does.
//
// # The loop
//
// One goroutine (loop.go) owns the broker's session: it registers the broker
// (its ephemeral /brokers/ids/<id>; a registration of an older session at this
// broker's own address, left by a crash ZooKeeper has not noticed yet, is
// waited out, and one of another broker is ErrBrokerIDInUse), reads the
// brokers, the controller, the topics, their partition states and the
// deletion requests through one-shot watches (each path watched once at a
// time; everything read again after a new session, since "no event" never
// means "nothing changed"), opens the partition logs assigned here and
// removes those of topics being deleted (then acknowledges), sets aside
// directories nothing assigns here (a topic deleted while the broker was
// down), publishes the image, and, when no broker is controller, runs the
// election; while it is controller it feeds the controller state machine
// what changed and executes its fenced writes (control.go). While the store
// is unreachable the broker keeps serving what it leads from the image it
// has; a malformed node in the store is logged naming its path and its topic
// left out, never a crash.
//
// # Replication
//
// Each partition this broker holds a replica of is a replicated
// (replication.go): its log and its replication state, a core/replica value
// behind a mutex. The loop gives it the partition's state record from each
// image before publishing the image (syncReplicas), so a client told this
// broker leads finds it leading; appends (Produce, the group coordinator's
// commits), followers' fetches and the ISR expiration pass (every
// ReplicaLagTimeMax/2) step it too, and whoever stepped it executes its
// Ready at once: publish the high watermark (and wake long polls and
// acks=all waits, which watch it), record an epoch's start in the log,
// truncate or reset the log, point a fetcher at a leader, write an ISR
// change to the store (a compare-and-set, layout.WriteISR; a conflict has
// the loop read the record again). The replica fetchers (fetcher.go) are
// one goroutine per leader followed: each asks where the epochs of the
// partitions that just started following end (OffsetForLeaderEpoch), then
// fetches all its partitions in one Fetch and hands each answer back to its
// replica. The high watermarks are checkpointed in
// replication-offset-checkpoint every 5 s and at Close (hwcheckpoint.go).
// Close begins with a controlled shutdown (shutdown.go), while the broker
// still serves: it announces itself in the store and waits, up to
// ControlledShutdownTimeout, for the controller to move its leaderships
// away.
//
// # Topics
//
// Any broker creates a topic, as in Kafka's ZooKeeper mode: it assigns the
// partitions over the live brokers (Kafka's round-robin from a random start),
// writes the assignment and configs, and waits for the controller to elect
// leaders. Deleting a topic records a deletion request (the explicit
// instruction: nothing is deleted because something is missing); every
// replica broker removes its logs and committed offsets of the topic and
// acknowledges, then the controller removes the topic. __consumer_offsets is
// the internal topic whose partition leaders coordinate groups
// (hash(group) % partitions, as Kafka); committed offsets and group metadata
// are its records: the leader of each partition hands it to the group
// coordinator (core/groups), which replays it and writes commits and group
// metadata to it, and the topic is compacted. Its name, and the other names
// of Kafka's internal topics, are reserved (internal_topics.go): clients
// cannot create them, write to them or have them auto-created.
//
// # Configs
//
// A topic's own configs are in /config/topics/<t>, the dynamic broker
// defaults in /config/brokers/<default> and /config/brokers/<id> (Kafka's
// ZooKeeper layout); the loop watches them, so each image carries them, and
// reconcile applies a change of a topic's effective configs to its open
// partitions (logs.Partition.Reconfigure), on every broker, without a
// restart. Any broker describes and alters them (configs.go).
//
// # Admin
//
// admin.go answers the admin requests on partitions and records.
// CreatePartitions is topic creation's sibling: any broker places the new
// partitions (controller.AssignAdded, Kafka's createPartitions rules, or a
// checked manual assignment), rewrites the topic's assignment node by
// compare-and-set (layout.AddPartitions), and waits for the controller to
// elect their leaders; the loop's watch on the node opens them where
// assigned. DeleteRecords moves a led partition's log start offset
// (partlog.DeleteRecordsBefore, checkpointed in the partition directory);
// followers move theirs to the leader's log start from each fetch answer,
// bounded by their own high watermark (followLogStartLocked), and report it
// in their next fetch (FollowerLogStart), which the leader's DeleteRecords
// waits for, as Kafka's DelayedDeleteRecords does. OffsetDelete
// goes to the group's coordinator (groups.Coordinator.DeleteOffsets);
// DescribeProducers reads a led partition's producer state, and LogDir
// lists every open partition log with its size.
//
// # Data directory
//
//	<DataDir>/
//	    meta.properties          cluster.id and node.id (Kafka's file): a fresh broker takes the cluster's id,
//	                             a broker whose id differs from the store's refuses to start
//	    weir-coord.json          the file store's snapshot (single node only)
//	    weir-coord.log           the file store's journal of the changes since
//	    weir-meta.json.migrated  the metadata file of weirs before the store, once migrated
//	    <topic>-<partition>/     one partition log each (core/logs, core/partlog)
//	    __consumer_offsets-<n>/  committed offsets (the internal topic's partitions)
//	    replication-offset-checkpoint  every partition's high watermark (Kafka's format)
//	    __groups/                committed offsets of weirs before __consumer_offsets: moved into
//	                             the topic at the first start, then removed
//
// # Lifetime
//
// Open opens the identity, the plugin host, the log manager, the group
// coordinator and the store (checking the cluster id, migrating an old
// weir-meta.json, registering), starts the loop and waits for the first
// image (and, briefly, for leaders of the partitions assigned here), then
// starts the retention loop, which runs on Config.Clock (core/clock). Close
// stops them in the reverse order (see Close). Whoever serves the node
// (transport/broker) stops calling it before Close.
//
// The node owns the Prometheus registry: it registers the Go and process
// collectors and the partition metrics (offsets, size, fsyncs, read at
// scrape time); the transport registers its request and connection metrics
// into the same registry.
package node
