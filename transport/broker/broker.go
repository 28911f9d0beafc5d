package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-broker/weir/node"
	"github.com/weir-broker/weir/transport"
)

// Broker is a running broker: a node served over the Kafka protocol. Its
// methods are safe for concurrent use.
type Broker struct {
	cfg Config

	node        *node.Node
	server      *transport.Server
	listener    net.Listener
	metricsHTTP *http.Server
	metricsAddr string

	serving   bool          // server.Serve was started
	serveDone chan struct{} // closed when server.Serve returned
	serveErr  error         // what it returned, read after serveDone

	sec listenerSet // listeners beyond the default one, credentials (security.go)

	closeOnce sync.Once
	crash     bool // Crash: stop without a controlled shutdown
	closing   chan struct{}
	closeErr  error
}

// Start listens on cfg.Listen (so that the advertised address is known),
// opens the node in cfg.DataDir (recovering every partition log), starts the
// metrics endpoint (cfg.MetricsListen) and serves until Close. Errors wrap
// ErrInvalidConfig, the node's errors, or the listener's.
func Start(cfg Config) (*Broker, error) { return StartContext(context.Background(), cfg) }

// StartContext is Start, given up (with everything it started stopped) when
// ctx ends first: `weir broker` passes its signal context, so Ctrl-C works
// while the broker waits for ZooKeeper.
func StartContext(ctx context.Context, cfg Config) (*Broker, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, serveDone: make(chan struct{}), closing: make(chan struct{})}
	if err := b.start(ctx); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

func (b *Broker) start(ctx context.Context) error {
	cfg := b.cfg
	var err error
	var advertised string
	if cfg.Security.Listeners != "" {
		if advertised, err = b.listen(&cfg); err != nil {
			return err
		}
	} else {
		b.listener, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("broker: listen: %w", err)
		}
		advertised = cfg.Advertised
		if advertised == "" {
			advertised = advertise(b.listener.Addr().String())
		}
	}
	nc := cfg.nodeConfig(advertised)
	if nc.Listeners, nc.InterBrokerListener, err = b.endpoints(cfg.Security); err != nil {
		return err
	}
	b.node, err = node.OpenContext(ctx, nc)
	if err != nil {
		return err
	}
	sasl, err := b.openCredentials()
	if err != nil {
		return err
	}
	b.server, err = transport.NewServer(transport.Config{
		MaxRequestBytes: cfg.MaxRequestBytes,
		MaxConnections:  cfg.MaxConnections,
		DisableSendfile: cfg.DisableSendfile,
		Authorizer:      cfg.Authorizer,
		Logger:          cfg.Logger.With("component", "transport"),
		Metrics:         transport.NewMetrics(b.node.Metrics()),

		// Per-connection limits (zero: transport's defaults).
		MaxInFlightRequests: cfg.MaxInFlightRequests,
		MaxConnectionBytes:  cfg.MaxConnectionBytes,
		MaxFetchBytes:       cfg.MaxFetchBytes,
		FetchSessionSlots:   cfg.FetchSessionSlots,
		FrameReadTimeout:    cfg.FrameReadTimeout,
		WriteTimeout:        cfg.WriteTimeout,
		MaxIdle:             cfg.MaxIdle,

		// Broker-wide (zero: transport's default).
		MaxQueuedRequestBytes: cfg.MaxQueuedRequestBytes,

		SASL: sasl, // security.go
	}, b.node)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}

	if cfg.MetricsListen != "" {
		ml, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("broker: metrics listen: %w", err)
		}
		b.metricsAddr = ml.Addr().String()
		reg := b.node.Metrics()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		b.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := b.metricsHTTP.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Logger.Error("metrics endpoint stopped", "err", err)
			}
		}()
	}

	b.serving = true
	go func() {
		defer close(b.serveDone)
		b.serveErr = b.serveListeners()
		select {
		case <-b.closing:
		default:
			cfg.Logger.Error("protocol server stopped", "err", b.serveErr)
		}
	}()
	cfg.Logger.Info("broker started", "listen", b.listener.Addr().String(), "advertised", advertised,
		"metrics", b.metricsAddr, "node_id", cfg.NodeID)
	return nil
}

// Addr returns the host:port the Kafka protocol is served on (the bound
// address, so port 0 in Config.Listen is resolved).
func (b *Broker) Addr() string { return b.listener.Addr().String() }

// MetricsAddr returns the host:port of the /metrics endpoint, or "" when
// Config.MetricsListen is empty.
func (b *Broker) MetricsAddr() string { return b.metricsAddr }

// ClusterID returns the cluster id kept in the data directory.
func (b *Broker) ClusterID() string { return b.node.ClusterID() }

// Node returns the node the broker serves, for tests and tools that inspect
// it. Callers must not close it.
func (b *Broker) Node() *node.Node { return b.node }

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
			b.cfg.Logger.Error("broker stopped with errors", "err", b.closeErr)
		} else {
			b.cfg.Logger.Info("broker stopped", "took", time.Since(begin).Round(time.Millisecond))
		}
	})
	return b.closeErr
}

// Crash stops the broker as a crash would: no controlled shutdown, so the
// cluster notices when its session ends. For fault tests; the file system
// is the caller's to cut (a crash clone).
func (b *Broker) Crash() error {
	b.crash = true
	return b.Close()
}

// stop releases whatever start got as far as opening, in dependency order:
// the protocol server first (no handler calls the node any more), then the
// metrics endpoint, then the node.
func (b *Broker) stop() error {
	switch {
	case b.node != nil && b.crash:
		b.node.SkipControlledShutdown()
	case b.node != nil:
		b.node.ControlledShutdown() // while still serving: followers catch up, clients follow the leaders
	}
	close(b.closing)
	var errs []error
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
	b.closeListeners()
	if b.metricsHTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := b.metricsHTTP.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker: close metrics endpoint: %w", err))
		}
		cancel()
	}
	if b.sec.creds != nil {
		b.sec.creds.Close()
	}
	if b.node != nil {
		if err := b.node.Close(); err != nil {
			errs = append(errs, err)
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
