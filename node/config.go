package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-broker/weir/core/filecache"
	"log/slog"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/replica"
	"github.com/weir-broker/weir/core/vfs"
)

// ErrInvalidConfig: a Config field is out of range; the message names it.
var ErrInvalidConfig = errors.New("node: invalid config")

// Defaults used when a Config field is zero.
const (
	DefaultRetentionCheckInterval = 5 * time.Minute    // Kafka log.retention.check.interval.ms
	DefaultOffsetsRetention       = 7 * 24 * time.Hour // Kafka offsets.retention.minutes
	DefaultOffsetsSegmentBytes    = 100 << 20          // Kafka offsets.topic.segment.bytes
	DefaultGroupMinSessionTimeout = 6 * time.Second    // Kafka group.min.session.timeout.ms
	DefaultGroupMaxSessionTimeout = 30 * time.Minute   // Kafka group.max.session.timeout.ms
)

// Config configures a node. DataDir and Advertised are required; Validate
// fills the defaults named on each field.
type Config struct {
	// DataDir holds everything the node keeps (see the package doc). Created
	// if missing.
	DataDir string
	// NodeID is this broker's id. Default 0.
	NodeID int32
	// Advertised is the host:port clients are told to connect to for this
	// broker (Metadata, FindCoordinator).
	Advertised string
	// Listeners are the broker's advertised listeners (Kafka's
	// advertised.listeners with their security protocols), all registered:
	// the other brokers reach this one at its InterBrokerListener endpoint,
	// and clients of each listener are told every broker's endpoint of
	// that name. Empty: one PLAINTEXT listener named PLAINTEXT at
	// Advertised.
	Listeners []Endpoint
	// InterBrokerListener is the name of the listener brokers reach each
	// other on (Kafka's inter.broker.listener.name): this broker replicates
	// from, and sends transaction markers and requests to, the other
	// brokers at their endpoint of this name. Default: the first of
	// Listeners (PLAINTEXT without them).
	InterBrokerListener string

	// TopicDefaults are broker-wide topic configs (Kafka names, such as
	// retention.ms or weir.durable.acks) that every topic inherits unless it
	// sets its own.
	TopicDefaults map[string]string
	// DefaultPartitions is the partition count of auto-created topics and of
	// CreateTopics asking for -1. Default 1.
	DefaultPartitions int32
	// AutoCreateTopics creates a topic the first time a client asks for it
	// by name (Metadata, Produce), like Kafka's auto.create.topics.enable.
	AutoCreateTopics bool

	// OffsetsPartitions is the partition count of __consumer_offsets when
	// this broker creates it. Default DefaultOffsetsPartitions (50, Kafka's
	// offsets.topic.num.partitions).
	OffsetsPartitions int32
	// OffsetsReplicationFactor is its replication factor, at most the live
	// brokers when it is created. Default 3 (Kafka's
	// offsets.topic.replication.factor): committed offsets are the topic's
	// records, so a coordinator's death moves its groups to a replica that
	// has them.
	OffsetsReplicationFactor int16

	// Transactions. TransactionMaxTimeout bounds the
	// transaction timeout a producer may ask for (Kafka's
	// transaction.max.timeout.ms; default 15 minutes).
	// TransactionalIDExpiration forgets a transactional id idle this long
	// between transactions (transactional.id.expiration.ms; default 7 days;
	// negative: never).
	TransactionMaxTimeout     time.Duration
	TransactionalIDExpiration time.Duration
	// NoTransactionVerification turns off KIP-890's check that a
	// transactional produce or TxnOffsetCommit belongs to a transaction
	// its coordinator has open (Kafka's
	// transaction.partition.verification.enable=false). Default: checked.
	NoTransactionVerification bool

	// ZooKeeper, when set, is the ZooKeeper ensemble the broker joins, as
	// Kafka's zookeeper.connect: "host:port[,host:port...][/chroot]".
	// Without it the broker is a single node on the file store in DataDir
	// (the same code path as a cluster of one).
	ZooKeeper string
	// ZooKeeperSessionTimeout is the session timeout asked of ZooKeeper: how
	// long a broker that stops answering stays registered. Default 18 s
	// (Kafka's zookeeper.session.timeout.ms).
	ZooKeeperSessionTimeout time.Duration
	// ZooKeeperDialer, when set, dials each ZooKeeper server instead of
	// net.DialTimeout. Tests only: zktest.Tap's Dial cuts a broker off
	// ZooKeeper (a death that leaves its session behind) and captures the
	// session, so the test can expire it.
	ZooKeeperDialer func(network, address string, timeout time.Duration) (net.Conn, error)
	// Coord, when set, is the coordination store to use instead (tests:
	// core/coord/memstore). The node closes it at Close.
	Coord coord.Store

	// RetentionCheckInterval is how often retention is applied to every
	// partition. Default DefaultRetentionCheckInterval.
	RetentionCheckInterval time.Duration
	// ReplicaLagTimeMax: a follower that has not caught up with its leader
	// for this long leaves the ISR (Kafka replica.lag.time.max.ms). Default
	// replica.DefaultLagTimeMax (30 s).
	ReplicaLagTimeMax time.Duration
	// ReplicaDialer, when set, dials the leaders this broker follows (tests
	// put a faulty network here). Default: net.Dialer.
	ReplicaDialer func(ctx context.Context, network, address string) (net.Conn, error)
	// ReplicaRoutes maps a broker id to the host:port this broker dials to
	// replicate from that broker, instead of the address it advertises: a
	// fault-injecting proxy in between (cluster/faultproxy, `weir broker
	// --replica-route`). Brokers without a route are dialled at their
	// advertised address. Clients and the other brokers are not affected.
	// Default: none.
	ReplicaRoutes map[int32]string
	// LeaderImbalanceCheckInterval is how often the controller hands
	// partitions back to their preferred leaders (the first replica of each
	// assignment) when they are in sync (Kafka auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds). Default 5 minutes; negative
	// turns it off.
	LeaderImbalanceCheckInterval time.Duration
	// ControlledShutdownTimeout bounds how long Close waits for the
	// controller to move this broker's leaderships to other in-sync
	// replicas before it stops (Kafka's controlled shutdown). Default 30 s;
	// negative skips the controlled shutdown.
	ControlledShutdownTimeout time.Duration
	// CleanerBackoff is how often the log cleaner looks for compacted
	// partitions to clean (Kafka log.cleaner.backoff.ms). Default
	// DefaultCleanerBackoff (15 s).
	CleanerBackoff time.Duration
	// CleanerIOMaxBytesPerSecond bounds the bytes the log cleaner reads and
	// writes per second, all partitions together (Kafka
	// log.cleaner.io.max.bytes.per.second). 0: the default,
	// DefaultCleanerIOMaxBytesPerSecond (48 MiB/s); negative: no bound
	// (Kafka's default).
	CleanerIOMaxBytesPerSecond int64
	// OffsetsSegmentBytes is the segment size of __consumer_offsets (Kafka
	// offsets.topic.segment.bytes): the cleaner compacts sealed segments
	// only. Default DefaultOffsetsSegmentBytes (100 MiB).
	OffsetsSegmentBytes int64
	// OffsetsRetention: each retention pass also deletes the committed offsets
	// of groups that have been empty (and seen no commit) for this long.
	// Default DefaultOffsetsRetention; negative keeps them forever.
	OffsetsRetention time.Duration
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts that consumer group members may ask for. Defaults
	// DefaultGroupMinSessionTimeout and DefaultGroupMaxSessionTimeout.
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// GroupInitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members to join. Zero means no wait (Kafka's
	// broker default is 3s, which `weir broker` uses; tests want 0).
	GroupInitialRebalanceDelay time.Duration
	// ConsumerGroupSessionTimeout and ConsumerGroupHeartbeatInterval are
	// the session timeout and heartbeat interval of KIP-848 consumer groups
	// (zero: Kafka's defaults, 45s and 5s; see core/groups/consumer).
	ConsumerGroupSessionTimeout, ConsumerGroupHeartbeatInterval time.Duration

	// PluginDir is searched for external plugins named by topic configs
	// (weir.flush.policy, compression.type) as weir-<kind>-<name>; specs
	// may also give a plugin's path. Empty: paths and built-ins only.
	PluginDir string
	// PluginCallTimeout bounds each call into an external plugin; a plugin
	// that outlives it is killed as hung and restarted on the next call.
	// Default: the plugin host's (5 s).
	PluginCallTimeout time.Duration

	// MaxOpenFiles bounds the descriptors the partitions' segment files
	// hold (package filecache): files are opened when used and the least
	// recently used idle ones closed to stay within it. Default (0):
	// filecache.DefaultLimit of the process's open-file limit; negative:
	// no bound.
	MaxOpenFiles int

	// FS is the file system everything is stored on. Default vfs.Default.
	FS vfs.FS
	// Clock drives retention, group timeouts and the logs' flush deadlines.
	// Default clock.System.
	Clock clock.Clock
	// Logger receives the node's logs. Default: discarded.
	Logger *slog.Logger
}

// Validate returns a copy of c with the defaults filled in, or an error
// wrapping ErrInvalidConfig naming the first bad field.
func (c Config) Validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.DataDir == "" {
		return bad("DataDir is required")
	}
	if _, _, err := SplitHostPort(c.Advertised); err != nil {
		return bad("Advertised %q: %v", c.Advertised, err)
	}
	c.Listeners = slices.Clone(c.Listeners)
	switch {
	case c.InterBrokerListener == "" && len(c.Listeners) > 0:
		c.InterBrokerListener = c.Listeners[0].Listener
	case c.InterBrokerListener == "":
		c.InterBrokerListener = "PLAINTEXT"
	}
	if _, ok := (meta.Broker{Endpoints: c.Listeners}).Endpoint(c.InterBrokerListener); !ok {
		return bad("InterBrokerListener %q is not one of Listeners", c.InterBrokerListener)
	}
	c.TopicDefaults = maps.Clone(c.TopicDefaults)
	switch {
	case c.DefaultPartitions == 0:
		c.DefaultPartitions = 1
	case c.DefaultPartitions < 0 || c.DefaultPartitions > MaxPartitions:
		return bad("DefaultPartitions %d outside [1, %d]", c.DefaultPartitions, MaxPartitions)
	}
	switch {
	case c.OffsetsPartitions == 0:
		c.OffsetsPartitions = DefaultOffsetsPartitions
	case c.OffsetsPartitions < 0 || c.OffsetsPartitions > MaxPartitions:
		return bad("OffsetsPartitions %d outside [1, %d]", c.OffsetsPartitions, MaxPartitions)
	}
	switch {
	case c.OffsetsReplicationFactor == 0:
		c.OffsetsReplicationFactor = 3
	case c.OffsetsReplicationFactor < 0:
		return bad("OffsetsReplicationFactor %d is negative", c.OffsetsReplicationFactor)
	}
	if err := c.txnDefaults(); err != nil { // helper txncoord
		return Config{}, err
	}
	if c.ZooKeeper != "" && c.Coord != nil {
		return bad("ZooKeeper and Coord are both set")
	}
	if c.ZooKeeperSessionTimeout < 0 {
		return bad("ZooKeeperSessionTimeout %v is negative", c.ZooKeeperSessionTimeout)
	}
	switch {
	case c.RetentionCheckInterval == 0:
		c.RetentionCheckInterval = DefaultRetentionCheckInterval
	case c.RetentionCheckInterval < 0:
		return bad("RetentionCheckInterval %v is negative", c.RetentionCheckInterval)
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = filecache.DefaultLimit(filecache.ProcessLimit())
	}
	if c.LeaderImbalanceCheckInterval == 0 {
		c.LeaderImbalanceCheckInterval = 5 * time.Minute
	}
	if c.ControlledShutdownTimeout == 0 {
		c.ControlledShutdownTimeout = 30 * time.Second
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReplicaLagTimeMax", &c.ReplicaLagTimeMax, replica.DefaultLagTimeMax},
		{"CleanerBackoff", &c.CleanerBackoff, DefaultCleanerBackoff},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			return bad("%s %v is negative", d.name, *d.v)
		}
	}
	switch {
	case c.OffsetsSegmentBytes == 0:
		c.OffsetsSegmentBytes = DefaultOffsetsSegmentBytes
	case c.OffsetsSegmentBytes < 1024 || c.OffsetsSegmentBytes > math.MaxInt32:
		return bad("OffsetsSegmentBytes %d outside [1024, %d]", c.OffsetsSegmentBytes, math.MaxInt32)
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = DefaultOffsetsRetention
	}
	if c.GroupMinSessionTimeout == 0 {
		c.GroupMinSessionTimeout = DefaultGroupMinSessionTimeout
	}
	if c.GroupMaxSessionTimeout == 0 {
		c.GroupMaxSessionTimeout = DefaultGroupMaxSessionTimeout
	}
	if c.GroupMinSessionTimeout < 0 || c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		return bad("group session timeouts: min %v, max %v", c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout)
	}
	if c.GroupInitialRebalanceDelay < 0 {
		return bad("GroupInitialRebalanceDelay %v is negative", c.GroupInitialRebalanceDelay)
	}
	if c.NodeID < 0 {
		return bad("NodeID %d is negative", c.NodeID)
	}
	for id, addr := range c.ReplicaRoutes {
		if id < 0 {
			return bad("ReplicaRoutes: broker id %d is negative", id)
		}
		if _, _, err := SplitHostPort(addr); err != nil {
			return bad("ReplicaRoutes: broker %d's address %q: %v", id, addr, err)
		}
	}
	c.ReplicaRoutes = maps.Clone(c.ReplicaRoutes)
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// SplitHostPort splits host:port and checks that the host is not empty and
// the port is a valid TCP port (1..65535).
func SplitHostPort(addr string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, int32(port), nil
}
