package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/topics"
	pluginhost "github.com/weir-broker/weir/plugins/host"
)

// groupsDir is where the group coordinator keeps committed offsets, below the
// data directory. Its name cannot be a partition directory's (<topic>-<n>).
const groupsDir = "__groups"

// Node is one running broker's state and decisions. Its methods are safe for
// concurrent use.
type Node struct {
	cfg    Config
	id     identity
	self   Broker
	logger *slog.Logger

	plugins   *pluginhost.Host // external plugins the topics use
	registry  *topics.Registry
	groups    *groups.Coordinator
	metrics   *prometheus.Registry
	retention *retentionLoop

	closeOnce sync.Once
	closeErr  error
}

// Broker is a broker as clients see it: its id and where to reach it.
type Broker struct {
	ID   int32
	Host string
	Port int32
}

// Open opens everything the node keeps in cfg.DataDir, in dependency order:
// its identity (meta.properties), the plugin host, the topics (recovering
// every partition log), the group coordinator (committed offsets); then it
// starts the retention loop. On error it closes what it opened.
func Open(cfg Config) (*Node, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: cfg.Logger}
	if err := n.open(); err != nil {
		_ = n.stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	cfg := n.cfg
	begin := time.Now()
	if err := cfg.FS.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("node: data directory: %w", err)
	}
	id, err := loadIdentity(cfg.FS, cfg.DataDir, cfg.NodeID)
	if err != nil {
		return err
	}
	n.id = id
	host, port, _ := SplitHostPort(cfg.Advertised) // checked by validate
	n.self = Broker{ID: cfg.NodeID, Host: host, Port: port}

	n.metrics = prometheus.NewRegistry()
	n.metrics.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newPartitionCollector(n),
	)

	n.plugins = pluginhost.New(pluginhost.Config{
		Dir:         cfg.PluginDir,
		CallTimeout: cfg.PluginCallTimeout,
		Logger:      n.logger.With("component", "plugins"),
	})
	n.registry, err = topics.Open(topics.Options{
		Plugins:           n.plugins,
		FS:                cfg.FS,
		Dir:               cfg.DataDir,
		Defaults:          cfg.TopicDefaults,
		DefaultPartitions: cfg.DefaultPartitions,
		Clock:             cfg.Clock,
		Logger:            n.logger.With("component", "topics"),
	})
	if err != nil {
		return fmt.Errorf("node: open topics: %w", err)
	}
	n.groups, err = groups.Open(groups.Options{
		FS:                    cfg.FS,
		Dir:                   filepath.Join(cfg.DataDir, groupsDir),
		Clock:                 cfg.Clock,
		Logger:                n.logger.With("component", "groups"),
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
	})
	if err != nil {
		return fmt.Errorf("node: open groups: %w", err)
	}
	n.retention = startRetentionLoop(cfg.Clock, cfg.RetentionCheckInterval, n.applyRetention,
		n.logger.With("component", "retention"))
	n.logger.Info("node opened", "data_dir", cfg.DataDir, "cluster_id", id.ClusterID, "node_id", cfg.NodeID,
		"advertised", cfg.Advertised, "topics", len(n.registry.Topics()), "took", time.Since(begin).Round(time.Millisecond))
	return nil
}

// ID returns this broker's node id.
func (n *Node) ID() int32 { return n.cfg.NodeID }

// ClusterID returns the cluster id kept in the data directory.
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
// progress), the group coordinator (committed offsets on disk), the topics
// (every partition log sealed, with its clean-shutdown marker), and last the
// plugin host (the logs call their flush policies until closed). Whoever
// serves the node must have stopped calling it first. Calling Close again
// returns the same result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.stop() })
	return n.closeErr
}

// stop releases whatever open got as far as opening, in dependency order.
func (n *Node) stop() error {
	var errs []error
	if n.retention != nil {
		n.retention.stop()
	}
	if n.groups != nil {
		if err := n.groups.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close groups: %w", err))
		}
	}
	if n.registry != nil {
		if err := n.registry.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: close topics: %w", err))
		}
	}
	if n.plugins != nil {
		if err := n.plugins.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: stop plugins: %w", err))
		}
	}
	return errors.Join(errs...)
}

// applyRetention is one retention pass: old segments of every partition, then
// the committed offsets of groups empty for longer than OffsetsRetention.
func (n *Node) applyRetention() error {
	err := n.registry.ApplyRetention()
	if n.cfg.OffsetsRetention > 0 {
		expired, eerr := n.groups.ExpireOffsets(n.cfg.OffsetsRetention)
		if len(expired) > 0 {
			n.logger.Info("expired committed offsets of empty groups", "groups", len(expired))
		}
		err = errors.Join(err, eerr)
	}
	return err
}
