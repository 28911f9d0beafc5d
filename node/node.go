package node

import (
	"context"
	"errors"
	"fmt"
	"github.com/weir-broker/weir/core/filecache"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/groups/consumer"
	"github.com/weir-broker/weir/core/logs"
	"github.com/weir-broker/weir/core/meta"
	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/topicconfig"
	"github.com/weir-broker/weir/core/txn"
	pluginhost "github.com/weir-broker/weir/plugins/host"
)

// groupsDir is where the group coordinator kept committed offsets before
// they moved into OffsetsTopic, below the
// data directory. Its name cannot be a partition directory's (<topic>-<n>).
const groupsDir = "__groups"

// producerExpiry: retention forgets an idempotent producer that has not
// appended to a partition for this long (Kafka's producer.id.expiration.ms).
const producerExpiry = 24 * time.Hour

// errClosedLog: a log closed under a retention pass (its topic went).
var errClosedLog = partlog.ErrClosed

// openTimeout bounds Open's work with the coordination store (connecting,
// registering, waiting out a previous incarnation's registration, the first
// image).
const openTimeout = 2 * time.Minute

// Node is one running broker's state and decisions. Its methods are safe for
// concurrent use.
type Node struct {
	cfg      Config
	id       identity
	self     Broker
	logger   *slog.Logger
	defaults map[string]string // normalised Config.TopicDefaults

	plugins   *pluginhost.Host // external plugins the topics use
	store     coord.Store      // the coordination store
	logs      *logs.Manager
	files     *filecache.Cache // the budget of the segment files' descriptors
	groups    *groups.Coordinator
	offsets   offsetsLoads   // the partitions of OffsetsTopic handed to groups
	legacy    *groups.Legacy // committed offsets of the old layout, until imported
	metrics   *prometheus.Registry
	retention *retentionLoop
	cleaner   *retentionLoop // the log cleaner's passes (cleaner.go)
	isrTicks  *retentionLoop // the ISR expiration pass (replication.go)
	hwWrites  *retentionLoop // the high-watermark checkpoint (hwcheckpoint.go)
	fetchers  *fetchers      // replica fetchers, one per leader followed
	// hwCheckpoint: a high watermark moved since the checkpoint was
	// written; hwAtOpen is the checkpoint read at Open.
	hwCheckpoint hwCheckpoint
	hwAtOpen     map[string]int64
	// cleanerStats count what the cleaner did.
	cleanerStats *cleanerStats
	// cleanerThrottle bounds the cleaner's I/O (nil: no bound).
	cleanerThrottle func(ctx context.Context, n int) error
	// replCounters count ISR changes and resignations.
	replCounters *replicationCounters
	// ctx ends when Close begins: work of the node's own (cleaning) stops.
	ctx    context.Context
	cancel context.CancelFunc
	loop   *loop
	image  *imageCell

	// openFailed holds, per topic id, why one of its partitions could
	// not be opened at the last try (CreateTopic waits for it); localMu.
	openFailed map[[16]byte]error
	// foundAtStart are the partitions assigned here in the first image the
	// loop reconciled and not opened since (noteStartPicture, uncleanLog);
	// localMu. startPictured: that image was seen (the loop's).
	foundAtStart  map[partitionID]bool
	startPictured bool
	// topicsCache is Topics' answer for the image it was computed from.
	topicsCache atomic.Pointer[topicsCache]
	// layersCache are the broker layers of topic configs for an image
	// (configs.go).
	layersCache atomic.Pointer[brokerLayers]
	localMu     sync.RWMutex
	local       map[string]*localTopic // partitions this broker holds, by topic; written by the loop only

	freshIdentity bool // meta.properties is not written yet

	pidMu           sync.Mutex
	pidNext, pidEnd int64 // the producer-id block in use: [pidNext, pidEnd)
	closeOnce       sync.Once
	handoverOnce    sync.Once // the controlled shutdown, done once
	withdrawing     sync.Map  // meta.Resignation -> true: being withdrawn
	closeErr        error

	// Transactions: the connections transaction markers go out on
	// (txn_markers.go); txnVerifier checks transactional produces
	// (KIP-890 part 1: n.txnVerify; nil in tests: not checked);
	// txnOffsetsDone hears of each marker acknowledged on a partition of
	// OffsetsTopic (the group coordinator's CompleteTxn). The transaction
	// coordinator and the partitions of TransactionStateTopic handed to it
	// (txn.go).
	markerClients  markerClients
	txnVerifier    TxnVerifier
	txnOffsetsDone func(partition int32, producerID int64, commit bool)
	txn            *txn.Coordinator
	txnLoads       txnLoads
	txnPeers       txnPeers // connections to other brokers' coordinators (txn_peers.go)
}

// Broker is a broker as clients see it: its id and where to reach it.
type Broker struct {
	ID int32
	// Host and Port are its address for clients of its default listener
	// (the first PLAINTEXT one of its registration, else its first).
	Host string
	Port int32
	// Endpoints are its advertised listeners, each listener's clients
	// being told the one of its name (README: Security). Shared: callers
	// must not modify it.
	Endpoints []Endpoint
}

// Endpoint is one advertised listener of a broker: its name, security
// protocol and address.
type Endpoint = meta.Endpoint

// Endpoint returns b's endpoint of the listener named listener (case
// aside); false when b has none.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	return meta.Broker{Host: b.Host, Port: b.Port, Endpoints: b.Endpoints}.Endpoint(listener)
}

// brokerOf is the registered broker mb as clients see it.
func brokerOf(mb meta.Broker) Broker {
	return Broker{ID: mb.ID, Host: mb.Host, Port: mb.Port, Endpoints: mb.Listeners()}
}

// Open opens everything the node keeps, in dependency order: its identity
// (meta.properties), the plugin host, the log manager, the group coordinator
// (committed offsets), the coordination store (joining the cluster: checking
// the cluster id, migrating an old single-node metadata file, registering
// the broker, reserving a first block of producer ids); then it starts its loop and waits for the first image of the
// cluster (with this broker's partitions open), and starts the retention
// loop. On error it closes what it opened.
func Open(cfg Config) (*Node, error) { return OpenContext(context.Background(), cfg) }

// OpenContext is Open, given up when ctx ends (a signal while the broker
// waits for ZooKeeper, or for its previous incarnation's registration to
// expire).
func OpenContext(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: cfg.Logger, local: map[string]*localTopic{}}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.open(ctx); err != nil {
		_ = n.stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) open(parent context.Context) error {
	cfg := n.cfg
	begin := time.Now()
	if err := cfg.FS.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	id, fresh, err := loadIdentity(cfg.FS, cfg.DataDir, cfg.NodeID)
	if err != nil {
		return err
	}
	n.id, n.freshIdentity = id, fresh
	host, port, _ := SplitHostPort(cfg.Advertised) // checked by Validate
	n.self = Broker{ID: cfg.NodeID, Host: host, Port: port}
	n.self.Endpoints = n.selfBroker().Listeners()
	n.image = newImageCell(meta.Empty(id.ClusterID))

	n.files = filecache.New(max(cfg.MaxOpenFiles, 0))
	n.metrics = prometheus.NewRegistry()
	n.metrics.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newPartitionCollector(n),
		newFileCacheCollector(n),
	)
	n.cleanerStats = newCleanerStats(n.metrics)
	cleanerIO := cfg.CleanerIOMaxBytesPerSecond
	if cleanerIO == 0 {
		cleanerIO = DefaultCleanerIOMaxBytesPerSecond
	}
	n.cleanerThrottle = newCleanerThrottle(cleanerIO)
	n.replCounters = newReplicationCounters(n.metrics)
	n.plugins = pluginhost.New(pluginhost.Config{
		Dir:         cfg.PluginDir,
		CallTimeout: cfg.PluginCallTimeout,
		Logger:      n.logger.With("component", "plugins"),
	})
	if n.defaults, err = topicconfig.Normalize(cfg.TopicDefaults, n.plugins); err != nil {
		return fmt.Errorf("%w: TopicDefaults: %w", ErrInvalidConfig, err)
	}
	if n.hwAtOpen, err = readHWCheckpoint(cfg.FS, cfg.DataDir); err != nil {
		n.logger.Warn("ignoring the high-watermark checkpoint", "err", err)
		n.hwAtOpen = map[string]int64{}
	}
	n.fetchers = newFetchers(n)
	if n.logs, err = logs.NewManager(logs.Options{FS: cfg.FS, Dir: cfg.DataDir, Clock: cfg.Clock, Files: n.files,
		Logger: n.logger.With("component", "logs")}); err != nil {
		return err
	}
	n.groups, err = groups.New(groups.Options{
		PartitionFor:          n.offsetsPartitionFor,
		Clock:                 cfg.Clock,
		Logger:                n.logger.With("component", "groups"),
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		Consumer: consumer.Config{SessionTimeout: cfg.ConsumerGroupSessionTimeout,
			HeartbeatInterval: cfg.ConsumerGroupHeartbeatInterval},
		Topics: consumerTopics{n},
	})
	if err != nil {
		return fmt.Errorf("node: groups: %w", err)
	}
	// Markers landing on __consumer_offsets complete the group
	// coordinator's transactional offsets.
	n.txnOffsetsDone = n.groups.CompleteTxn
	if err := n.readLegacyOffsets(); err != nil {
		return err
	}
	if err := n.openTxn(); err != nil {
		return err
	}
	if !cfg.NoTransactionVerification {
		n.txnVerifier = n.txnVerify
	}

	ctx, cancel := context.WithTimeout(parent, openTimeout)
	defer cancel()
	if n.store, err = n.openStore(ctx); err != nil {
		return err
	}
	// The session the registration belongs to, read before it: when the
	// store replaces the session meanwhile, the loop sees another one and
	// registers again.
	session := n.store.Session().ID
	if err := n.untilConnected(ctx, "join the cluster", func() error { return n.joinCluster(ctx, n.store) }); err != nil {
		return err
	}
	err = n.untilConnected(ctx, "reserve producer ids", func() error {
		n.pidMu.Lock()
		defer n.pidMu.Unlock()
		return n.reserveProducerIDsLocked(ctx)
	})
	if err != nil {
		return err
	}
	n.loop = newLoop(n, n.store)
	n.loop.registered = true
	n.loop.session = session
	go n.loop.run()
	if _, err := n.image.waitFor(ctx, func(im *meta.Image) bool { return im.Live(cfg.NodeID) && n.loop.strayChecked() }); err != nil {
		return fmt.Errorf("node: waiting for the first picture of the cluster: %w", err)
	}
	// Then, briefly, for a leader of every partition assigned here whose
	// replicas can lead (on a single node: all of them), so that a client
	// right after a restart or a migration is served at once.
	lctx, lcancel := context.WithTimeout(ctx, leaderWait)
	if _, err := n.image.waitFor(lctx, n.ledHere); err != nil {
		n.logger.Warn("some partitions assigned here have no leader yet", "waited", leaderWait)
	}
	lcancel()
	if n.legacyPending() {
		if err := n.importLegacyOffsets(ctx); err != nil {
			return err
		}
	}
	n.retention = startRetentionLoop(cfg.Clock, cfg.RetentionCheckInterval, n.applyRetention,
		n.logger.With("component", "retention"))
	n.cleaner = startRetentionLoop(cfg.Clock, cfg.CleanerBackoff, n.cleanLogs, n.logger.With("component", "cleaner"))
	n.isrTicks = startRetentionLoop(cfg.Clock, cfg.ReplicaLagTimeMax/2, n.tickReplicas, n.logger.With("component", "isr"))
	n.hwWrites = startRetentionLoop(cfg.Clock, hwCheckpointInterval, n.writeHWCheckpoint, n.logger.With("component", "checkpoint"))
	im, _ := n.image.load()
	n.logger.Info("node opened", "data_dir", cfg.DataDir, "cluster_id", n.id.ClusterID, "node_id", cfg.NodeID,
		"advertised", cfg.Advertised, "coordination", n.storeName(), "brokers", len(im.Brokers), "topics", len(im.Topics),
		"took", time.Since(begin).Round(time.Millisecond))
	return nil
}

// leaderWait bounds how long Open waits for leaders of the partitions
// assigned to this broker.
const leaderWait = 30 * time.Second

// ledHere reports whether every partition assigned to this broker that has a
// live in-sync replica (or no state yet) has a leader in im.
func (n *Node) ledHere(im *meta.Image) bool {
	if im.Controller == -1 {
		return false
	}
	for _, t := range im.Topics {
		if t.Deleting {
			continue
		}
		for _, p := range assignedHere(t, n.cfg.NodeID) {
			if im.View(t, int(p)).Leader != meta.NoLeader {
				continue
			}
			if st := t.States[p]; st != nil && !slices.ContainsFunc(st.ISR, im.Live) {
				continue // no in-sync replica can lead
			}
			return false
		}
	}
	return true
}

func (n *Node) storeName() string {
	switch {
	case n.cfg.Coord != nil:
		return "given"
	case n.cfg.ZooKeeper != "":
		return "zookeeper " + n.cfg.ZooKeeper
	}
	return "file (single node)"
}

// ID returns this broker's node id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// ClusterID returns the cluster id (kept in the data directory and in the
// coordination store).
func (n *Node) ClusterID() string { return n.id.ClusterID }

// Self returns this broker as clients see it.
func (n *Node) Self() Broker { return n.self }

// Metrics returns the node's Prometheus registry: the Go and process
// collectors, every partition's offsets and size, and whatever the layers
// around the node (the transport) register.
func (n *Node) Metrics() *prometheus.Registry { return n.metrics }

// Plugins returns the host of the external plugins the topics use.
func (n *Node) Plugins() *pluginhost.Host { return n.plugins }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.logger }

// Close stops in dependency order: the retention loop (waiting for a pass in
// progress), the node's loop, the coordination store (the broker's
// registration goes with its session, and so its controllership), the group
// coordinator (committed offsets on disk), the partition logs (each sealed,
// with its clean-shutdown marker), and last the plugin host (the logs call
// their flush policies until closed). Whoever serves the node must have
// stopped calling it first. Calling Close again returns the same result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.ControlledShutdown()
		n.closeErr = n.stop()
	})
	return n.closeErr
}

// stop releases whatever open got as far as opening, in dependency order.
func (n *Node) stop() error {
	var errs []error
	n.cancel()
	for _, r := range []*retentionLoop{n.cleaner, n.isrTicks, n.hwWrites} {
		if r != nil {
			r.stop()
		}
	}
	if n.retention != nil {
		n.retention.stop()
	}
	if n.loop != nil {
		n.loop.close()
	}
	if n.fetchers != nil {
		n.fetchers.close()
	}
	n.markerClients.close()
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close coordination store: %w", err))
		}
	}
	if n.groups != nil {
		if err := n.groups.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close groups: %w", err))
		}
	}
	// helper txncoord: the transaction coordinator, after the loop.
	if err := n.closeTxn(); err != nil {
		errs = append(errs, fmt.Errorf("node: close transaction coordinator: %w", err))
	}
	n.offsets.replays.Wait() // the loop is stopped: no more start
	if n.hwAtOpen != nil {   // the checkpoint was read: the partitions' high watermarks are worth keeping
		n.hwCheckpoint.dirty()
		if err := n.writeHWCheckpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.closeLocal(); err != nil {
		errs = append(errs, err)
	}
	if n.plugins != nil {
		if err := n.plugins.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: stop plugins: %w", err))
		}
	}
	return errors.Join(errs...)
}

// applyRetention is one retention pass: old segments of every partition this
// broker holds (forgetting idempotent producers idle past
// producerExpiry), then the committed offsets of groups empty for longer
// than OffsetsRetention.
func (n *Node) applyRetention() error {
	var errs []error
	before := n.cfg.Clock.Now().Add(-producerExpiry).UnixMilli()
	for _, p := range n.localPartitions() {
		if err := p.ApplyRetention(before); err != nil && !errors.Is(err, errClosedLog) {
			errs = append(errs, fmt.Errorf("node: retention of %s-%d: %w", p.Topic, p.Index, err))
		}
	}
	if n.cfg.OffsetsRetention > 0 {
		expired, err := n.groups.ExpireOffsets(n.cfg.OffsetsRetention)
		if len(expired) > 0 {
			n.logger.Info("expired committed offsets of empty groups", "groups", len(expired))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
