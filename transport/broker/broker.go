package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/topics"
	pluginhost "github.com/weir-broker/weir/plugins/host"
	"github.com/weir-broker/weir/transport"
)

// groupsDir is where the group coordinator keeps committed offsets, below the
// data directory. Its name cannot be a partition directory's (<topic>-<n>).
const groupsDir = "__groups"

// Broker is a running single-node broker. Its methods are safe for concurrent
// use.
type Broker struct {
	cfg    Config
	id     identity
	logger *slog.Logger

	registry    *topics.Registry
	plugins     *pluginhost.Host // external plugins the topics use
	coordinator *groups.Coordinator
	server      *transport.Server
	listener    net.Listener
	metricsHTTP *http.Server
	metricsAddr string
	retention   *retentionLoop

	serving   bool          // server.Serve was started
	serveDone chan struct{} // closed when server.Serve returned
	serveErr  error         // what it returned, read after serveDone

	closeOnce sync.Once
	closing   chan struct{}
	closeErr  error
}

// Start opens the registry (recovering every partition log) and the group
// coordinator in cfg.DataDir, starts listening on cfg.Listen (and
// cfg.MetricsListen) and serves until Close. Errors wrap ErrInvalidConfig, the
// registry's or coordinator's errors, or the listener's.
func Start(cfg Config) (*Broker, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:       cfg,
		logger:    cfg.Logger,
		serveDone: make(chan struct{}),
		closing:   make(chan struct{}),
	}
	if err := b.start(); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *Broker) start() error {
	cfg := b.cfg
	begin := time.Now()
	if err := cfg.FS.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("broker: data directory: %w", err)
	}
	id, err := loadIdentity(cfg.FS, cfg.DataDir, cfg.NodeID)
	if err != nil {
		return err
	}
	b.id = id

	b.plugins = pluginhost.New(pluginhost.Config{
		Dir:         cfg.PluginDir,
		CallTimeout: cfg.PluginCallTimeout,
		Logger:      b.logger.With("component", "plugins"),
	})
	b.registry, err = topics.Open(topics.Options{
		Plugins:           b.plugins,
		FS:                cfg.FS,
		Dir:               cfg.DataDir,
		Defaults:          cfg.TopicDefaults,
		DefaultPartitions: cfg.DefaultPartitions,
		Clock:             cfg.Clock,
		Logger:            b.logger.With("component", "topics"),
	})
	if err != nil {
		return fmt.Errorf("broker: open topics: %w", err)
	}
	b.coordinator, err = groups.Open(groups.Options{
		FS:                    cfg.FS,
		Dir:                   filepath.Join(cfg.DataDir, groupsDir),
		Clock:                 cfg.Clock,
		Logger:                b.logger.With("component", "groups"),
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
	})
	if err != nil {
		return fmt.Errorf("broker: open groups: %w", err)
	}

	b.listener, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("broker: listen: %w", err)
	}
	advertised := cfg.Advertised
	if advertised == "" {
		advertised = advertise(b.listener.Addr().String())
	}
	host, port, err := splitHostPort(advertised)
	if err != nil {
		return fmt.Errorf("%w: advertised address %q: %v", ErrInvalidConfig, advertised, err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	b.server, err = transport.NewServer(transport.Config{
		NodeID:           cfg.NodeID,
		AdvertisedHost:   host,
		AdvertisedPort:   port,
		ClusterID:        id.ClusterID,
		MaxRequestBytes:  cfg.MaxRequestBytes,
		MaxConnections:   cfg.MaxConnections,
		AutoCreateTopics: cfg.AutoCreateTopics,
		DisableSendfile:  cfg.DisableSendfile,
		Logger:           b.logger.With("component", "transport"),
		Metrics:          transport.NewMetrics(reg),

		// Per-connection limits (zero: transport's defaults).
		MaxInFlightRequests: cfg.MaxInFlightRequests,
		MaxConnectionBytes:  cfg.MaxConnectionBytes,
		MaxFetchBytes:       cfg.MaxFetchBytes,
		FrameReadTimeout:    cfg.FrameReadTimeout,
		WriteTimeout:        cfg.WriteTimeout,
		MaxIdle:             cfg.MaxIdle,

		// Broker-wide (zero: transport's default).
		MaxQueuedRequestBytes: cfg.MaxQueuedRequestBytes,
	}, b.registry, b.coordinator)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}

	if cfg.MetricsListen != "" {
		ml, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("broker: metrics listen: %w", err)
		}
		b.metricsAddr = ml.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		b.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := b.metricsHTTP.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.logger.Error("metrics endpoint stopped", "err", err)
			}
		}()
	}

	b.serving = true
	go func() {
		defer close(b.serveDone)
		b.serveErr = b.server.Serve(b.listener)
		select {
		case <-b.closing:
		default:
			b.logger.Error("protocol server stopped", "err", b.serveErr)
		}
	}()

	b.retention = startRetentionLoop(cfg.Clock, cfg.RetentionCheckInterval, b.applyRetention,
		b.logger.With("component", "retention"))

	b.logger.Info("broker started",
		"listen", b.listener.Addr().String(), "advertised", advertised, "metrics", b.metricsAddr,
		"data_dir", cfg.DataDir, "cluster_id", id.ClusterID, "node_id", cfg.NodeID,
		"topics", len(b.registry.Topics()), "took", time.Since(begin).Round(time.Millisecond))
	return nil
}

// Addr returns the host:port the Kafka protocol is served on (the bound
// address, so port 0 in Config.Listen is resolved).
func (b *Broker) Addr() string { return b.listener.Addr().String() }

// MetricsAddr returns the host:port of the /metrics endpoint, or "" when
// Config.MetricsListen is empty.
func (b *Broker) MetricsAddr() string { return b.metricsAddr }

// ClusterID returns the cluster id kept in the data directory.
func (b *Broker) ClusterID() string { return b.id.ClusterID }

// Registry returns the broker's topic registry, for tests and tools that
// inspect what is stored. Callers must not close it.
func (b *Broker) Registry() *topics.Registry { return b.registry }

// Plugins returns the host of the external plugins the topics use.
func (b *Broker) Plugins() *pluginhost.Host { return b.plugins }

// Done is closed when the broker stopped serving: after Close, or when the
// protocol server failed on its own (Err tells why).
func (b *Broker) Done() <-chan struct{} { return b.serveDone }

// Err returns why the protocol server stopped when it stopped without Close;
// nil while it serves and after Close.
func (b *Broker) Err() error {
	select {
	case <-b.serveDone:
	default:
		return nil
	}
	select {
	case <-b.closing:
		return nil
	default:
		if b.serveErr == nil {
			return errors.New("broker: protocol server stopped")
		}
		return fmt.Errorf("broker: protocol server stopped: %w", b.serveErr)
	}
}

// Close shuts the broker down gracefully (see the package doc for the order)
// and returns the first errors of each step, joined. Calling it again returns
// the same result.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		begin := time.Now()
		b.closeErr = b.stop()
		if b.closeErr != nil {
			b.logger.Error("broker stopped with errors", "err", b.closeErr)
		} else {
			b.logger.Info("broker stopped", "took", time.Since(begin).Round(time.Millisecond))
		}
	})
	return b.closeErr
}

// stop releases whatever start got as far as opening, in dependency order.
func (b *Broker) stop() error {
	close(b.closing)
	var errs []error
	if b.retention != nil {
		b.retention.stop()
	}
	if b.server != nil {
		if err := b.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: close server: %w", err))
		}
	}
	if b.serving {
		<-b.serveDone
	} else if b.listener != nil {
		b.listener.Close()
	}
	if b.metricsHTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := b.metricsHTTP.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker: close metrics endpoint: %w", err))
		}
		cancel()
	}
	if b.coordinator != nil {
		if err := b.coordinator.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: close groups: %w", err))
		}
	}
	if b.registry != nil {
		if err := b.registry.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: close topics: %w", err))
		}
	}
	if b.plugins != nil { // after the logs, which call their flush policies until closed
		if err := b.plugins.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: stop plugins: %w", err))
		}
	}
	return errors.Join(errs...)
}

// advertise turns a bound address into one clients can dial: an unspecified
// host (0.0.0.0, ::) becomes the machine's hostname.
func advertise(bound string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return net.JoinHostPort(host, port)
}

// splitHostPort splits host:port and checks that the port is a valid TCP
// port (1..65535).
func splitHostPort(addr string) (string, int32, error) {
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

// applyRetention is one retention pass: old segments of every partition, then
// the committed offsets of groups empty for longer than OffsetsRetention.
func (b *Broker) applyRetention() error {
	err := b.registry.ApplyRetention()
	if b.cfg.OffsetsRetention > 0 {
		expired, eerr := b.coordinator.ExpireOffsets(b.cfg.OffsetsRetention)
		if len(expired) > 0 {
			b.logger.Info("expired committed offsets of empty groups", "groups", len(expired))
		}
		err = errors.Join(err, eerr)
	}
	return err
}
