package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/weir-broker/weir/harness/brokerproc"
	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport/broker"
)

// brokerSettings is everything `weir broker` can be told, by flags or by the
// config file. The yaml tags are the config file's keys, the flags' names.
type brokerSettings struct {
	DataDir                    string            `yaml:"data-dir"`
	BrokerID                   int32             `yaml:"broker-id"`
	ZooKeeper                  string            `yaml:"zookeeper"`
	ZooKeeperSessionTimeout    time.Duration     `yaml:"zookeeper-session-timeout"`
	Listen                     string            `yaml:"listen"`
	Advertised                 string            `yaml:"advertised"`
	MetricsListen              string            `yaml:"metrics-listen"`
	PprofListen                string            `yaml:"pprof-listen"`
	AutoCreateTopics           bool              `yaml:"auto-create-topics"`
	DefaultPartitions          int32             `yaml:"default-partitions"`
	TopicConfig                map[string]string `yaml:"topic-config"`
	RetentionCheckInterval     time.Duration     `yaml:"retention-check-interval"`
	OffsetsRetention           time.Duration     `yaml:"offsets-retention"`
	GroupInitialRebalanceDelay time.Duration     `yaml:"group-initial-rebalance-delay"`
	GroupMinSessionTimeout     time.Duration     `yaml:"group-min-session-timeout"`
	GroupMaxSessionTimeout     time.Duration     `yaml:"group-max-session-timeout"`
	ReplicaLagTimeMax          time.Duration     `yaml:"replica-lag-time-max"`
	ReplicaRoutes              replicaRoutes     `yaml:"replica-route"`
	LeaderImbalanceCheck       time.Duration     `yaml:"leader-imbalance-check-interval"`
	ControlledShutdownTimeout  time.Duration     `yaml:"controlled-shutdown-timeout"`
	MaxConnections             int               `yaml:"max-connections"`
	MaxOpenFiles               int               `yaml:"max-open-files"`
	CleanerIOMaxBytesPerSecond int64             `yaml:"cleaner-io-max-bytes-per-second"`
	MaxRequestBytes            int32             `yaml:"max-request-bytes"`
	MaxInFlightRequests        int               `yaml:"max-in-flight-requests"`
	MaxConnectionBytes         int64             `yaml:"max-connection-bytes"`
	MaxFetchBytes              int32             `yaml:"max-fetch-bytes"`
	FetchSessionSlots          int               `yaml:"fetch-session-slots"`
	FrameReadTimeout           time.Duration     `yaml:"frame-read-timeout"`
	WriteTimeout               time.Duration     `yaml:"write-timeout"`
	MaxIdle                    time.Duration     `yaml:"max-idle"`
	MaxQueuedRequestBytes      int64             `yaml:"max-queued-request-bytes"`
	DisableSendfile            bool              `yaml:"disable-sendfile"`
	Authorizer                 string            `yaml:"authorizer"`
	SuperUsers                 string            `yaml:"super-users"`
	AllowEveryoneIfNoACLFound  bool              `yaml:"allow-everyone-if-no-acl-found"`
	PluginDir                  string            `yaml:"plugin-dir"`
	PluginCallTimeout          time.Duration     `yaml:"plugin-call-timeout"`
	LogLevel                   string            `yaml:"log-level"`
	LogFormat                  string            `yaml:"log-format"`
	TransactionMaxTimeout      time.Duration     `yaml:"transaction-max-timeout"`
	TransactionalIDExpiration  time.Duration     `yaml:"transactional-id-expiration"`
	// PowerCutFS is the hidden lab flag --power-cut-fs (powercut.go); no
	// config file key.
	PowerCutFS bool `yaml:"-"`

	securitySettings `yaml:",inline"` // broker_security.go
}

const brokerLong = `Run a broker that speaks the Kafka protocol: point a Kafka client at --listen
(tested with franz-go, sarama and librdkafka's kcat). Alone it is a single
node whose cluster state lives in a file in --data-dir; with --zookeeper it
joins a cluster of brokers coordinated by ZooKeeper (Kafka's ZooKeeper-mode
layout), each with its own --broker-id and --data-dir.

Settings come from the flags, from a config file (--config, YAML or JSON,
whose keys are the flag names: data-dir, listen, topic-config and
replica-route as maps, ...), and from the defaults shown below, in that
order of precedence.

Topic configs use Kafka's names (retention.ms, retention.bytes,
segment.bytes, segment.ms, max.message.bytes, flush.messages, flush.ms,
compression.type, ...) plus weir.flush.policy (a spec as listed by
` + "`weir flush-policies`" + `) and weir.durable.acks (acks wait for the fsync that
covers the batch). --topic-config sets broker-wide defaults; a topic created
with its own configs overrides them.

weir.flush.policy and compression.type take plugin specs: a built-in
("interval:ms=50", "zstd:level=4"), a plugin binary's path, or the name of a
weir-flushpolicy-NAME / weir-codec-NAME binary in --plugin-dir. A
compression.type other than producer makes the broker recompress batches.

Logs go to stderr. SIGINT or SIGTERM shuts down gracefully: connections are
closed, committed offsets and every partition log are flushed and sealed, and
each log gets its clean-shutdown marker, so the next start skips recovery.`

const brokerExample = `  weir broker --data-dir /var/lib/weir
  weir broker --zookeeper zk1:2181,zk2:2181/weir --broker-id 2 --data-dir /var/lib/weir-2 --listen 0.0.0.0:9093
  weir broker --listen 0.0.0.0:9092 --advertised kafka.example.com:9092
  weir broker --topic-config weir.durable.acks=true --topic-config weir.flush.policy=every-batch
  weir broker --config weir.yaml --log-level debug
  weir broker --zookeeper zk1:2181/weir --broker-id 1 --data-dir ./b1 --replica-route 2=127.0.0.1:19002,3=127.0.0.1:19003`

func newBrokerCmd() *cobra.Command { return newBrokerCmdWith(runBroker) }

// newBrokerCmdWith returns the broker command calling run with the merged
// settings, so tests can check what flags and files resolve to.
func newBrokerCmdWith(run func(context.Context, brokerSettings, io.Writer) error) *cobra.Command {
	s := brokerSettings{
		DataDir:                    "./data",
		Listen:                     broker.DefaultListen,
		MetricsListen:              "127.0.0.1:9644",
		AutoCreateTopics:           true,
		DefaultPartitions:          1,
		RetentionCheckInterval:     broker.DefaultRetentionCheckInterval,
		OffsetsRetention:           broker.DefaultOffsetsRetention,
		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMinSessionTimeout:     broker.DefaultGroupMinSessionTimeout,
		GroupMaxSessionTimeout:     broker.DefaultGroupMaxSessionTimeout,
		ReplicaLagTimeMax:          30 * time.Second,
		LeaderImbalanceCheck:       5 * time.Minute,
		ControlledShutdownTimeout:  30 * time.Second,
		MaxRequestBytes:            broker.DefaultMaxRequestBytes,
		PluginDir:                  os.Getenv("WEIR_PLUGIN_DIR"),
		LogLevel:                   "info",
		LogFormat:                  "text",
		TransactionMaxTimeout:      broker.DefaultTransactionMaxTimeout,
		TransactionalIDExpiration:  broker.DefaultTransactionalIDExpiration,
	}
	var configFile string
	var topicConfig, replicaRoute []string
	cmd := &cobra.Command{
		Use:     "broker",
		Short:   "Run a Kafka-compatible broker (a single node, or a cluster member with --zookeeper)",
		Long:    brokerLong,
		Example: brokerExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.merge(cmd.Flags(), configFile, topicConfig, replicaRoute); err != nil {
				return err
			}
			return run(cmd.Context(), s, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.StringVar(&configFile, "config", "", "read settings from this YAML or JSON `file` (default: none); flags given on the command line win")
	f.StringVar(&s.DataDir, "data-dir", s.DataDir, "`dir`ectory holding the topics, partition logs and committed offsets")
	f.Int32Var(&s.BrokerID, "broker-id", s.BrokerID, "this broker's `id` in the cluster (Kafka's broker.id); each broker of a cluster needs its own")
	f.StringVar(&s.ZooKeeper, "zookeeper", s.ZooKeeper, "join the cluster coordinated by this ZooKeeper ensemble, `host:port[,host:port][/chroot]` (default: none, a single node on a file store in --data-dir)")
	f.DurationVar(&s.ZooKeeperSessionTimeout, "zookeeper-session-timeout", s.ZooKeeperSessionTimeout, "ZooKeeper session timeout: how long a broker that stops answering stays registered (default 0: 18s)")
	f.StringVar(&s.Listen, "listen", s.Listen, "`host:port` to serve the Kafka protocol on")
	f.StringVar(&s.Advertised, "advertised", s.Advertised, "`host:port` clients are told to connect to (default: the --listen address)")
	f.StringVar(&s.MetricsListen, "metrics-listen", s.MetricsListen, "`host:port` serving Prometheus metrics at /metrics; empty disables it")
	f.StringVar(&s.PprofListen, "pprof-listen", s.PprofListen, "`host:port` serving Go's runtime profiles at /debug/pprof/ (CPU, heap, goroutines; see go tool pprof) (default: none, off)")
	f.BoolVar(&s.AutoCreateTopics, "auto-create-topics", s.AutoCreateTopics, "create a topic when a client first asks for it by name")
	f.Int32Var(&s.DefaultPartitions, "default-partitions", s.DefaultPartitions, "partition `count` of auto-created topics")
	f.StringArrayVar(&topicConfig, "topic-config", nil, "broker-wide topic config default as `key=value`, repeatable, e.g. weir.durable.acks=true (default: none, Kafka's defaults)")
	f.DurationVar(&s.RetentionCheckInterval, "retention-check-interval", s.RetentionCheckInterval, "how often retention deletes old segments")
	f.DurationVar(&s.OffsetsRetention, "offsets-retention", s.OffsetsRetention, "committed offsets of a group empty this long are deleted (negative: kept forever)")
	f.DurationVar(&s.TransactionMaxTimeout, "transaction-max-timeout", s.TransactionMaxTimeout, "largest transaction timeout a transactional producer may ask for (Kafka's transaction.max.timeout.ms)")
	f.DurationVar(&s.TransactionalIDExpiration, "transactional-id-expiration", s.TransactionalIDExpiration, "a transactional id idle this long between transactions is forgotten (Kafka's transactional.id.expiration.ms; negative: never)")
	f.DurationVar(&s.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", s.GroupInitialRebalanceDelay, "how long a new group's first rebalance waits for more members")
	f.DurationVar(&s.GroupMinSessionTimeout, "group-min-session-timeout", s.GroupMinSessionTimeout, "smallest session timeout a group member may ask for")
	f.DurationVar(&s.GroupMaxSessionTimeout, "group-max-session-timeout", s.GroupMaxSessionTimeout, "largest session timeout a group member may ask for")
	f.DurationVar(&s.ReplicaLagTimeMax, "replica-lag-time-max", s.ReplicaLagTimeMax, "a follower not caught up with its leader for this long leaves the ISR (Kafka's replica.lag.time.max.ms)")
	f.StringSliceVar(&replicaRoute, "replica-route", nil, "to replicate from broker ID, dial HOST:PORT instead of the address it advertises, given as `ID=HOST:PORT`: a fault-injecting proxy between brokers (cluster/faultproxy); repeatable or comma-separated (default: none, every broker at its advertised address)")
	f.DurationVar(&s.LeaderImbalanceCheck, "leader-imbalance-check-interval", s.LeaderImbalanceCheck, "how often the controller hands partitions back to their preferred (first assigned) replica once in sync (Kafka's auto.leader.rebalance.enable with leader.imbalance.check.interval.seconds); negative turns it off")
	f.DurationVar(&s.ControlledShutdownTimeout, "controlled-shutdown-timeout", s.ControlledShutdownTimeout, "on SIGTERM, how long to wait for the controller to move this broker's leaderships before stopping; negative skips the controlled shutdown")
	f.IntVar(&s.MaxConnections, "max-connections", s.MaxConnections, "most client connections served at once (default 0: unlimited)")
	f.IntVar(&s.MaxOpenFiles, "max-open-files", s.MaxOpenFiles, "most descriptors the segment files hold; idle ones are closed and reopened on use (default 0: 3/4 of the open-file limit; -1: no bound)")
	f.Int64Var(&s.CleanerIOMaxBytesPerSecond, "cleaner-io-max-bytes-per-second", s.CleanerIOMaxBytesPerSecond, "`bytes` the log cleaner may read and write per second, all compacted partitions together (Kafka's log.cleaner.io.max.bytes.per.second); appends are never held up by it (0: the default, 48 MiB/s; -1: no bound, Kafka's default)")
	f.Int32Var(&s.MaxRequestBytes, "max-request-bytes", s.MaxRequestBytes, "largest request `size` accepted; larger ones close the connection before anything is allocated")
	f.IntVar(&s.MaxInFlightRequests, "max-in-flight-requests", s.MaxInFlightRequests, "requests a connection may have read and not yet answered; while that many are pending it is not read, so a client that stops reading is held back by TCP (default 0: 2)")
	f.Int64Var(&s.MaxConnectionBytes, "max-connection-bytes", s.MaxConnectionBytes, "request `bytes` one connection may hold until they are handled; a single larger request is read alone (default 0: 64 MiB)")
	f.Int32Var(&s.MaxFetchBytes, "max-fetch-bytes", s.MaxFetchBytes, "cap on the record `bytes` of one Fetch response, whatever the client asks; the first batch still goes whole (default 0: 55 MiB, Kafka's fetch.max.bytes)")
	f.IntVar(&s.FetchSessionSlots, "fetch-session-slots", s.FetchSessionSlots, "most incremental fetch sessions (KIP-227) kept, Kafka's max.incremental.fetch.session.cache.slots (default 0: 1000; -1: none, every fetch is full)")
	f.DurationVar(&s.FrameReadTimeout, "frame-read-timeout", s.FrameReadTimeout, "once a request's size has arrived, the rest must arrive within this or the connection closes (default 0: 1m; negative: no timeout)")
	f.DurationVar(&s.WriteTimeout, "write-timeout", s.WriteTimeout, "each response must be written within this or the connection closes, releasing what it held: bounds a client that stops reading (default 0: 1m; negative: no timeout)")
	f.DurationVar(&s.MaxIdle, "max-idle", s.MaxIdle, "a connection with nothing in flight that received nothing for this long is closed, as Kafka's connections.max.idle.ms (default 0: 10m; negative: never)")
	f.Int64Var(&s.MaxQueuedRequestBytes, "max-queued-request-bytes", s.MaxQueuedRequestBytes, "request `bytes` all connections may hold together, as Kafka's queued.max.request.bytes; a connection whose next request does not fit is not read until it does; at least --max-request-bytes (default 0: 512 MiB; negative: no bound)")
	f.BoolVar(&s.DisableSendfile, "disable-sendfile", s.DisableSendfile, "serve Fetch through a copy (read, then write) instead of sendfile, to compare the two")
	f.StringVar(&s.Authorizer, "authorizer", s.Authorizer, "turn on ACL checks: `acl` (also Kafka's class names kafka.security.authorizer.AclAuthorizer and org.apache.kafka.metadata.authorizer.StandardAuthorizer), as Kafka's authorizer.class.name; ACLs are managed with weir acl (default: none, every request allowed)")
	f.StringVar(&s.SuperUsers, "super-users", s.SuperUsers, "`principals` allowed everything, ';'-separated (User:admin;User:broker), as Kafka's super.users (default: none)")
	f.BoolVar(&s.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", s.AllowEveryoneIfNoACLFound, "with --authorizer, allow requests on resources no ACL names, as Kafka's allow.everyone.if.no.acl.found")
	f.StringVar(&s.PluginDir, "plugin-dir", s.PluginDir, "`dir`ectory searched for external plugins named in topic configs as weir-<kind>-<name> (default $WEIR_PLUGIN_DIR)")
	f.DurationVar(&s.PluginCallTimeout, "plugin-call-timeout", s.PluginCallTimeout, "a plugin call taking longer kills the plugin as hung; it restarts on the next call (default 0: 5s)")
	f.StringVar(&s.LogLevel, "log-level", s.LogLevel, "log `level`: debug, info, warn or error")
	f.StringVar(&s.LogFormat, "log-format", s.LogFormat, "log `format`: text or json")
	f.BoolVar(&s.PowerCutFS, "power-cut-fs", s.PowerCutFS, fmt.Sprintf("lab: run on an in-memory copy of --data-dir that knows what was fsynced, every change made on the directory too; SIGUSR1 cuts the power (the directory keeps what was fsynced) and exits with status %d", brokerproc.PowerCutStatus))
	_ = f.MarkHidden("power-cut-fs") // the cluster fault lab's (README: The cluster fault lab)
	addSecurityFlags(f, &s.securitySettings)
	return cmd
}

// merge applies the config file (if any) under the flags: a setting the file
// gives is used unless its flag was given on the command line. Topic configs
// merge key by key, the flags' winning.
func (s *brokerSettings) merge(flags *pflag.FlagSet, configFile string, topicConfig, replicaRoute []string) error {
	if configFile != "" {
		file, err := readBrokerConfig(configFile)
		if err != nil {
			return err
		}
		set := func(name string, apply func()) {
			if file.given[name] && !flags.Changed(name) {
				apply()
			}
		}
		set("data-dir", func() { s.DataDir = file.DataDir })
		set("broker-id", func() { s.BrokerID = file.BrokerID })
		set("zookeeper", func() { s.ZooKeeper = file.ZooKeeper })
		set("zookeeper-session-timeout", func() { s.ZooKeeperSessionTimeout = file.ZooKeeperSessionTimeout })
		set("listen", func() { s.Listen = file.Listen })
		set("advertised", func() { s.Advertised = file.Advertised })
		set("metrics-listen", func() { s.MetricsListen = file.MetricsListen })
		set("pprof-listen", func() { s.PprofListen = file.PprofListen })
		set("auto-create-topics", func() { s.AutoCreateTopics = file.AutoCreateTopics })
		set("default-partitions", func() { s.DefaultPartitions = file.DefaultPartitions })
		set("retention-check-interval", func() { s.RetentionCheckInterval = file.RetentionCheckInterval })
		set("offsets-retention", func() { s.OffsetsRetention = file.OffsetsRetention })
		set("group-initial-rebalance-delay", func() { s.GroupInitialRebalanceDelay = file.GroupInitialRebalanceDelay })
		set("group-min-session-timeout", func() { s.GroupMinSessionTimeout = file.GroupMinSessionTimeout })
		set("group-max-session-timeout", func() { s.GroupMaxSessionTimeout = file.GroupMaxSessionTimeout })
		set("replica-lag-time-max", func() { s.ReplicaLagTimeMax = file.ReplicaLagTimeMax })
		set("leader-imbalance-check-interval", func() { s.LeaderImbalanceCheck = file.LeaderImbalanceCheck })
		set("controlled-shutdown-timeout", func() { s.ControlledShutdownTimeout = file.ControlledShutdownTimeout })
		set("max-connections", func() { s.MaxConnections = file.MaxConnections })
		set("max-open-files", func() { s.MaxOpenFiles = file.MaxOpenFiles })
		set("cleaner-io-max-bytes-per-second", func() { s.CleanerIOMaxBytesPerSecond = file.CleanerIOMaxBytesPerSecond })
		set("max-request-bytes", func() { s.MaxRequestBytes = file.MaxRequestBytes })
		set("max-in-flight-requests", func() { s.MaxInFlightRequests = file.MaxInFlightRequests })
		set("max-connection-bytes", func() { s.MaxConnectionBytes = file.MaxConnectionBytes })
		set("max-fetch-bytes", func() { s.MaxFetchBytes = file.MaxFetchBytes })
		set("fetch-session-slots", func() { s.FetchSessionSlots = file.FetchSessionSlots })
		set("frame-read-timeout", func() { s.FrameReadTimeout = file.FrameReadTimeout })
		set("write-timeout", func() { s.WriteTimeout = file.WriteTimeout })
		set("max-idle", func() { s.MaxIdle = file.MaxIdle })
		set("max-queued-request-bytes", func() { s.MaxQueuedRequestBytes = file.MaxQueuedRequestBytes })
		set("disable-sendfile", func() { s.DisableSendfile = file.DisableSendfile })
		set("authorizer", func() { s.Authorizer = file.Authorizer })
		set("super-users", func() { s.SuperUsers = file.SuperUsers })
		set("allow-everyone-if-no-acl-found", func() { s.AllowEveryoneIfNoACLFound = file.AllowEveryoneIfNoACLFound })
		set("plugin-dir", func() { s.PluginDir = file.PluginDir })
		set("plugin-call-timeout", func() { s.PluginCallTimeout = file.PluginCallTimeout })
		set("log-level", func() { s.LogLevel = file.LogLevel })
		set("log-format", func() { s.LogFormat = file.LogFormat })
		set("transaction-max-timeout", func() { s.TransactionMaxTimeout = file.TransactionMaxTimeout })
		set("transactional-id-expiration", func() { s.TransactionalIDExpiration = file.TransactionalIDExpiration })
		s.TopicConfig = file.TopicConfig
		s.ReplicaRoutes = file.ReplicaRoutes
		s.securitySettings.mergeFile(file, set) // broker_security.go
	}
	for _, kv := range topicConfig {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--topic-config %q: want key=value", kv)
		}
		if s.TopicConfig == nil {
			s.TopicConfig = make(map[string]string)
		}
		s.TopicConfig[k] = v
	}
	for _, route := range replicaRoute {
		id, addr, err := parseReplicaRoute(route)
		if err != nil {
			return err
		}
		if s.ReplicaRoutes == nil {
			s.ReplicaRoutes = make(replicaRoutes)
		}
		s.ReplicaRoutes[id] = addr
	}
	return nil
}

// replicaRoutes is --replica-route: the address to dial, by the id of the
// broker replicated from.
type replicaRoutes map[int32]string

// parseReplicaRoute parses one ID=HOST:PORT.
func parseReplicaRoute(route string) (int32, string, error) {
	k, addr, ok := strings.Cut(route, "=")
	if !ok {
		return 0, "", fmt.Errorf("--replica-route %q: want ID=HOST:PORT", route)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
	if err != nil || id < 0 {
		return 0, "", fmt.Errorf("--replica-route %q: broker id %q is not a non-negative integer", route, k)
	}
	if _, _, err := node.SplitHostPort(addr); err != nil {
		return 0, "", fmt.Errorf("--replica-route %q: address %q: %w", route, addr, err)
	}
	return int32(id), addr, nil
}

// UnmarshalYAML reads the config file's replica-route, a map from broker
// id to HOST:PORT (JSON's keys are strings: "2").
func (r *replicaRoutes) UnmarshalYAML(n *yaml.Node) error {
	var raw map[string]string
	if err := n.Decode(&raw); err != nil {
		return err
	}
	*r = make(replicaRoutes, len(raw))
	for k, v := range raw {
		id, addr, err := parseReplicaRoute(k + "=" + v)
		if err != nil {
			return err
		}
		(*r)[id] = addr
	}
	return nil
}

// brokerFile is a decoded config file and which of its keys it gave.
type brokerFile struct {
	brokerSettings
	given map[string]bool
}

// readBrokerConfig decodes a YAML or JSON (a subset of YAML) config file,
// rejecting keys it does not know so a typo cannot pass silently.
func readBrokerConfig(name string) (brokerFile, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return brokerFile{}, fmt.Errorf("config file: %w", err)
	}
	file := brokerFile{given: make(map[string]bool)}
	var keys map[string]yaml.Node
	if err := yaml.Unmarshal(data, &keys); err != nil {
		return brokerFile{}, fmt.Errorf("config file %s: %w", name, err)
	}
	for k := range keys {
		file.given[k] = true
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file.brokerSettings); err != nil && !errors.Is(err, io.EOF) {
		return brokerFile{}, fmt.Errorf("config file %s: %w", name, err)
	}
	return file, nil
}

// runBroker starts the broker and serves until ctx ends or SIGINT/SIGTERM
// arrives, then shuts it down gracefully.
func runBroker(ctx context.Context, s brokerSettings, stderr io.Writer) error {
	logger, err := newLogger(stderr, s.LogLevel, s.LogFormat)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	if s.PprofListen != "" {
		_, stopPprof, err := startPprof(s.PprofListen, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	var pc *powerCut
	if s.PowerCutFS {
		if pc, logger, err = startPowerCut(s.DataDir, logger); err != nil {
			return err
		}
		s.DataDir = pc.dir // the same path in memory as on disk, absolute
	}

	authz, err := s.authorizer()
	if err != nil {
		return err
	}
	b, err := broker.StartContext(ctx, broker.Config{
		DataDir:                      s.DataDir,
		NodeID:                       s.BrokerID,
		ZooKeeper:                    s.ZooKeeper,
		ZooKeeperSessionTimeout:      s.ZooKeeperSessionTimeout,
		Listen:                       s.Listen,
		Advertised:                   s.Advertised,
		MetricsListen:                s.MetricsListen,
		TopicDefaults:                s.TopicConfig,
		DefaultPartitions:            s.DefaultPartitions,
		AutoCreateTopics:             s.AutoCreateTopics,
		RetentionCheckInterval:       s.RetentionCheckInterval,
		OffsetsRetention:             s.OffsetsRetention,
		TransactionMaxTimeout:        s.TransactionMaxTimeout,
		TransactionalIDExpiration:    s.TransactionalIDExpiration,
		GroupMinSessionTimeout:       s.GroupMinSessionTimeout,
		GroupMaxSessionTimeout:       s.GroupMaxSessionTimeout,
		GroupInitialRebalanceDelay:   s.GroupInitialRebalanceDelay,
		ReplicaLagTimeMax:            s.ReplicaLagTimeMax,
		ReplicaRoutes:                s.ReplicaRoutes,
		LeaderImbalanceCheckInterval: s.LeaderImbalanceCheck,
		ControlledShutdownTimeout:    s.ControlledShutdownTimeout,
		MaxConnections:               s.MaxConnections,
		MaxOpenFiles:                 s.MaxOpenFiles,
		CleanerIOMaxBytesPerSecond:   s.CleanerIOMaxBytesPerSecond,
		MaxRequestBytes:              s.MaxRequestBytes,
		MaxInFlightRequests:          s.MaxInFlightRequests,
		MaxConnectionBytes:           s.MaxConnectionBytes,
		MaxFetchBytes:                s.MaxFetchBytes,
		FetchSessionSlots:            s.FetchSessionSlots,
		FrameReadTimeout:             s.FrameReadTimeout,
		WriteTimeout:                 s.WriteTimeout,
		MaxIdle:                      s.MaxIdle,
		MaxQueuedRequestBytes:        s.MaxQueuedRequestBytes,
		DisableSendfile:              s.DisableSendfile,
		Authorizer:                   authz,
		PluginDir:                    s.PluginDir,
		PluginCallTimeout:            s.PluginCallTimeout,
		FS:                           pc.fsys(),
		Logger:                       logger,
		Security:                     s.securitySettings.config(),
	})
	if err != nil {
		pc.hold()
		if ctx.Err() != nil {
			// SIGINT or SIGTERM during start-up (before the broker joined
			// its cluster, say): a stop asked for, not a failure, and
			// nothing is left to hand over.
			logger.Info("stopped during start-up", "cause", context.Cause(ctx), "err", err)
			return nil
		}
		return err
	}
	select {
	case <-ctx.Done():
		stopSignals() // a second signal now kills the process the default way
		logger.Info("shutting down", "cause", context.Cause(ctx))
	case <-b.Done():
	}
	pc.hold()
	serveErr := b.Err()
	return errors.Join(serveErr, b.Close())
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
