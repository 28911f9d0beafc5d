package broker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"time"

	"github.com/weir-broker/weir/core/acl"
	"github.com/weir-broker/weir/core/clock"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

// ErrInvalidConfig (returned by Start): a Config field is out of range; the
// message names it. It is the node's, which checks most fields.
var ErrInvalidConfig = node.ErrInvalidConfig

// Defaults used when a Config field is zero.
const (
	DefaultListen                 = "127.0.0.1:9092"
	DefaultRetentionCheckInterval = node.DefaultRetentionCheckInterval
	DefaultOffsetsRetention       = node.DefaultOffsetsRetention
	DefaultGroupMinSessionTimeout = node.DefaultGroupMinSessionTimeout
	DefaultGroupMaxSessionTimeout = node.DefaultGroupMaxSessionTimeout
	DefaultMaxRequestBytes        = 100 << 20 // Kafka socket.request.max.bytes
)

// Transaction defaults (helper txncoord): Kafka's transaction.max.timeout.ms
// and transactional.id.expiration.ms.
const (
	DefaultTransactionMaxTimeout     = node.DefaultTransactionMaxTimeout
	DefaultTransactionalIDExpiration = node.DefaultTransactionalIDExpiration
)

// Config configures a broker. Only DataDir is required; validate fills the
// defaults named on each field.
type Config struct {
	// DataDir holds everything the broker keeps (see the package doc). Created
	// if missing.
	DataDir string
	// Listen is the TCP address the Kafka protocol is served on. Default
	// DefaultListen; port 0 picks a free port (Broker.Addr tells which).
	Listen string
	// Advertised is the host:port clients are told to connect to (Metadata,
	// FindCoordinator). Default: the address actually bound, with an
	// unspecified host (0.0.0.0, ::) replaced by the machine's hostname.
	Advertised string
	// MetricsListen is the TCP address of the HTTP endpoint serving
	// Prometheus metrics at /metrics. Empty disables it.
	MetricsListen string
	// Security: listeners with their security protocols, TLS, SASL
	// (security.go). The zero value is one PLAINTEXT listener on Listen.
	Security Security

	// TopicDefaults are broker-wide topic configs (Kafka names, such as
	// retention.ms or weir.durable.acks) that every topic inherits unless it
	// sets its own.
	TopicDefaults map[string]string
	// DefaultPartitions is the partition count of auto-created topics.
	// Default 1.
	DefaultPartitions int32
	// AutoCreateTopics creates a topic the first time a client asks for it
	// by name (Metadata, Produce), like Kafka's auto.create.topics.enable.
	AutoCreateTopics bool

	// RetentionCheckInterval is how often retention is applied to every
	// partition. Default DefaultRetentionCheckInterval.
	RetentionCheckInterval time.Duration
	// MaxOpenFiles bounds the descriptors of the segment files; see
	// node.Config.MaxOpenFiles.
	MaxOpenFiles int
	// Coord, when set, is the coordination store (tests: an in-memory one);
	// see node.Config.Coord.
	Coord coord.Store
	// ReplicaDialer, when set, dials the leaders this broker follows (tests:
	// a faulty network); see node.Config.ReplicaDialer.
	ReplicaDialer func(ctx context.Context, network, address string) (net.Conn, error)
	// ReplicaRoutes maps a broker id to the host:port dialled to replicate
	// from it instead of its advertised address (a fault-injecting proxy);
	// see node.Config.ReplicaRoutes.
	ReplicaRoutes map[int32]string
	// ReplicaLagTimeMax, LeaderImbalanceCheckInterval and
	// ControlledShutdownTimeout: see node.Config.
	ReplicaLagTimeMax            time.Duration
	LeaderImbalanceCheckInterval time.Duration
	ControlledShutdownTimeout    time.Duration
	// OffsetsReplicationFactor and OffsetsPartitions: see node.Config.
	OffsetsReplicationFactor int16
	OffsetsPartitions        int32
	// CleanerBackoff is how often the log cleaner looks for compacted
	// partitions to clean. Default node.DefaultCleanerBackoff (15 s).
	CleanerBackoff time.Duration
	// CleanerIOMaxBytesPerSecond: see node.Config.
	CleanerIOMaxBytesPerSecond int64
	// OffsetsRetention: each retention pass also deletes the committed offsets
	// of groups that have been empty (and seen no commit) for this long.
	// Default DefaultOffsetsRetention; negative keeps them forever.
	OffsetsRetention time.Duration
	// TransactionMaxTimeout and TransactionalIDExpiration: see node.Config
	// (DefaultTransactionMaxTimeout, DefaultTransactionalIDExpiration).
	TransactionMaxTimeout, TransactionalIDExpiration time.Duration
	// NoTransactionVerification: see node.Config (Kafka's
	// transaction.partition.verification.enable=false). Default false.
	NoTransactionVerification bool
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts that consumer group members may ask for. Defaults
	// DefaultGroupMinSessionTimeout and DefaultGroupMaxSessionTimeout.
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// GroupInitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members to join. Zero means no wait (Kafka's
	// broker default is 3s, which `weir broker` uses; tests want 0).
	GroupInitialRebalanceDelay time.Duration

	// NodeID is this broker's id (Kafka's broker.id). Default 0.
	NodeID int32
	// ZooKeeper, when set, is the ensemble the broker joins as a cluster
	// member, as Kafka's zookeeper.connect: "host:port[,...][/chroot]".
	// Empty: a single node on the file store in DataDir.
	ZooKeeper string
	// ZooKeeperSessionTimeout is the ZooKeeper session timeout asked for.
	// Default 0: 18 s (Kafka's zookeeper.session.timeout.ms).
	ZooKeeperSessionTimeout time.Duration
	// ZooKeeperDialer, when set, dials the ZooKeeper servers (tests only:
	// node.Config.ZooKeeperDialer).
	ZooKeeperDialer func(network, address string, timeout time.Duration) (net.Conn, error)
	// MaxRequestBytes is the largest request accepted, checked before
	// allocating. Default DefaultMaxRequestBytes.
	MaxRequestBytes int32
	// MaxConnections limits concurrent client connections; 0: unlimited.
	MaxConnections int
	// MaxInFlightRequests: requests a connection may have read and not yet
	// answered; while that many are pending the connection is not read, so
	// a client that stops reading its answers is held back by TCP. Default
	// 0: transport.DefaultMaxInFlightRequests (2).
	MaxInFlightRequests int
	// MaxConnectionBytes: request bytes one connection may hold (a single
	// larger request is read alone). Default 0:
	// transport.DefaultMaxConnectionBytes (64 MiB).
	MaxConnectionBytes int64
	// MaxFetchBytes caps the record bytes of one Fetch response, whatever
	// the client asks for. Default 0: transport.DefaultMaxFetchBytes (55 MiB,
	// Kafka's fetch.max.bytes).
	MaxFetchBytes int32
	// FetchSessionSlots bounds the incremental fetch sessions kept; see
	// transport.Config.FetchSessionSlots (default 1000; negative: none).
	FetchSessionSlots int
	// FrameReadTimeout: once a request's size has arrived, the rest must
	// arrive within it or the connection is closed. Default 0:
	// transport.DefaultFrameReadTimeout (1 min); negative: no timeout.
	FrameReadTimeout time.Duration
	// MaxQueuedRequestBytes bounds the request bytes of all connections
	// together (Kafka's queued.max.request.bytes); a connection whose next
	// request does not fit is not read until it does. At least
	// MaxRequestBytes. Default 0: transport.DefaultMaxQueuedRequestBytes
	// (512 MiB, or MaxRequestBytes if larger); negative: no bound.
	MaxQueuedRequestBytes int64
	// WriteTimeout: each response must be written within it or the
	// connection is closed, releasing what the response held. Default 0:
	// transport.DefaultWriteTimeout (1 min); negative: no timeout.
	WriteTimeout time.Duration
	// MaxIdle: a connection with nothing in flight that received nothing
	// for this long is closed (Kafka's connections.max.idle.ms). Default 0:
	// transport.DefaultMaxIdle (10 min); negative: never.
	MaxIdle time.Duration
	// DisableSendfile makes Fetch copy record bytes through a buffer instead
	// of sending them from the segment file with sendfile (for benchmarks
	// comparing the two; file systems other than the OS's always copy).
	DisableSendfile bool
	// Authorizer turns on ACL checks with these super users and
	// allow.everyone.if.no.acl.found (see transport.Config.Authorizer).
	// Default nil: no authorizer, every request allowed.
	Authorizer *acl.Config

	// PluginDir is searched for external plugins named by topic configs
	// (weir.flush.policy, compression.type) as weir-<kind>-<name>; specs
	// may also give a plugin's path. Empty: paths and built-ins only.
	PluginDir string
	// PluginCallTimeout bounds each call into an external plugin; a plugin
	// that outlives it is killed as hung and restarted on the next call.
	// Default: the plugin host's (5 s).
	PluginCallTimeout time.Duration

	// FS is the file system everything is stored on. Default vfs.Default.
	FS vfs.FS
	// Clock drives retention and the logs' flush deadlines. Default
	// clock.System.
	Clock clock.Clock
	// Logger receives the broker's logs. Default: discarded.
	Logger *slog.Logger
}

// validate returns a copy of c with the defaults filled in, or an error
// wrapping ErrInvalidConfig naming the first bad field.
func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.DataDir == "" {
		return bad("DataDir is required")
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("Listen %q: %v", c.Listen, err)
	}
	if c.Advertised != "" {
		if _, _, err := node.SplitHostPort(c.Advertised); err != nil {
			return bad("Advertised %q: %v", c.Advertised, err)
		}
	}
	if err := c.Security.validate(); err != nil {
		return Config{}, err
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return bad("MetricsListen %q: %v", c.MetricsListen, err)
		}
	}
	c.TopicDefaults = maps.Clone(c.TopicDefaults)
	switch {
	case c.MaxRequestBytes == 0:
		c.MaxRequestBytes = DefaultMaxRequestBytes
	case c.MaxRequestBytes < 0:
		return bad("MaxRequestBytes %d is negative", c.MaxRequestBytes)
	}
	if c.MaxConnections < 0 {
		return bad("MaxConnections %d is negative", c.MaxConnections)
	}
	if c.MaxInFlightRequests < 0 {
		return bad("MaxInFlightRequests %d is negative", c.MaxInFlightRequests)
	}
	if c.MaxConnectionBytes < 0 {
		return bad("MaxConnectionBytes %d is negative", c.MaxConnectionBytes)
	}
	if c.MaxFetchBytes < 0 {
		return bad("MaxFetchBytes %d is negative", c.MaxFetchBytes)
	}
	if c.MaxQueuedRequestBytes > 0 && c.MaxQueuedRequestBytes < int64(c.MaxRequestBytes) {
		return bad("MaxQueuedRequestBytes %d below MaxRequestBytes %d", c.MaxQueuedRequestBytes, c.MaxRequestBytes)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// The node checks and fills the rest; the address it advertises is known
	// only once the listener is bound, so a stand-in passes its check here.
	nc, err := c.nodeConfig("localhost:1").Validate()
	if err != nil {
		return Config{}, err
	}
	c.DefaultPartitions, c.RetentionCheckInterval, c.OffsetsRetention = nc.DefaultPartitions, nc.RetentionCheckInterval, nc.OffsetsRetention
	c.CleanerBackoff, c.MaxOpenFiles = nc.CleanerBackoff, nc.MaxOpenFiles
	c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout = nc.GroupMinSessionTimeout, nc.GroupMaxSessionTimeout
	c.FS, c.Clock = nc.FS, nc.Clock
	return c, nil
}

// nodeConfig is the node's part of c.
func (c Config) nodeConfig(advertised string) node.Config {
	return node.Config{
		DataDir:                      c.DataDir,
		NodeID:                       c.NodeID,
		ZooKeeper:                    c.ZooKeeper,
		ZooKeeperSessionTimeout:      c.ZooKeeperSessionTimeout,
		ZooKeeperDialer:              c.ZooKeeperDialer,
		Advertised:                   advertised,
		TopicDefaults:                c.TopicDefaults,
		DefaultPartitions:            c.DefaultPartitions,
		AutoCreateTopics:             c.AutoCreateTopics,
		RetentionCheckInterval:       c.RetentionCheckInterval,
		MaxOpenFiles:                 c.MaxOpenFiles,
		OffsetsRetention:             c.OffsetsRetention,
		TransactionMaxTimeout:        c.TransactionMaxTimeout,
		TransactionalIDExpiration:    c.TransactionalIDExpiration,
		NoTransactionVerification:    c.NoTransactionVerification,
		CleanerBackoff:               c.CleanerBackoff,
		CleanerIOMaxBytesPerSecond:   c.CleanerIOMaxBytesPerSecond,
		Coord:                        c.Coord,
		ReplicaDialer:                c.ReplicaDialer,
		ReplicaRoutes:                c.ReplicaRoutes,
		ReplicaLagTimeMax:            c.ReplicaLagTimeMax,
		LeaderImbalanceCheckInterval: c.LeaderImbalanceCheckInterval,
		ControlledShutdownTimeout:    c.ControlledShutdownTimeout,
		OffsetsReplicationFactor:     c.OffsetsReplicationFactor,
		OffsetsPartitions:            c.OffsetsPartitions,
		GroupMinSessionTimeout:       c.GroupMinSessionTimeout,
		GroupMaxSessionTimeout:       c.GroupMaxSessionTimeout,
		GroupInitialRebalanceDelay:   c.GroupInitialRebalanceDelay,
		PluginDir:                    c.PluginDir,
		PluginCallTimeout:            c.PluginCallTimeout,
		FS:                           c.FS,
		Clock:                        c.Clock,
		Logger:                       c.Logger,
	}
}
