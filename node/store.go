package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/cluster/zk"
	"github.com/weir-broker/weir/core/coord"
	"github.com/weir-broker/weir/core/coord/filestore"
	"github.com/weir-broker/weir/core/coord/layout"
	"github.com/weir-broker/weir/core/meta"
)

// ErrBrokerIDInUse: another live broker is registered with this broker id.
var ErrBrokerIDInUse = errors.New("node: broker id in use")

// ErrClusterIDMismatch: the data directory belongs to another cluster than
// the coordination store (Kafka's InconsistentClusterIdException): the
// broker was pointed at the wrong ZooKeeper, or its data directory at the
// wrong cluster.
var ErrClusterIDMismatch = errors.New("node: data directory and coordination store belong to different clusters")

// openStore opens the coordination store: the one Config.Coord gives, a
// ZooKeeper ensemble (Config.ZooKeeper), or the file store in the data
// directory (a single node, the default).
func (n *Node) openStore(ctx context.Context) (coord.Store, error) {
	switch {
	case n.cfg.Coord != nil:
		return n.cfg.Coord, nil
	case n.cfg.ZooKeeper != "":
		zc, err := zk.ParseConnectString(n.cfg.ZooKeeper)
		if err != nil {
			return nil, fmt.Errorf("%w: ZooKeeper: %w", ErrInvalidConfig, err)
		}
		zc.SessionTimeout = n.cfg.ZooKeeperSessionTimeout
		zc.Dialer = n.cfg.ZooKeeperDialer
		zc.Logger = n.logger.With("component", "zookeeper")
		s, err := zk.Open(ctx, zc)
		if err != nil {
			return nil, fmt.Errorf("node: zookeeper %s: %w", n.cfg.ZooKeeper, err)
		}
		return s, nil
	default:
		s, err := filestore.Open(filestore.Options{FS: n.cfg.FS, Dir: n.cfg.DataDir})
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		return s, nil
	}
}

// joinCluster checks the cluster id, migrates a single node's old metadata
// file into the store, and registers the broker.
func (n *Node) joinCluster(ctx context.Context, store coord.Store) error {
	id, err := layout.ClusterID(ctx, store, n.id.ClusterID)
	if err != nil {
		return fmt.Errorf("node: cluster id: %w", err)
	}
	switch {
	case n.freshIdentity:
		n.id.ClusterID = id // a new broker joins the cluster it finds
		if err := saveIdentity(n.cfg.FS, n.cfg.DataDir, n.id); err != nil {
			return err
		}
		n.freshIdentity = false
	case id != n.id.ClusterID:
		return fmt.Errorf("%w: %s says cluster %q, the store says %q", ErrClusterIDMismatch,
			filepath.Join(n.cfg.DataDir, metaFile), n.id.ClusterID, id)
	}
	if err := n.migrate(ctx, store); err != nil {
		return err
	}
	_, err = n.register(ctx, store)
	return err
}

// register registers the broker (its ephemeral /brokers/ids/<id>). A
// registration of another session that names this broker's own address is
// most likely this broker's previous incarnation (killed, restarted before
// ZooKeeper expired its session: a known ZooKeeper trap): register waits
// for it to expire, up to twice the session timeout. One naming another
// address is another broker: ErrBrokerIDInUse.
func (n *Node) register(ctx context.Context, store coord.Store) (int64, error) {
	deadline := time.Now().Add(2 * n.sessionTimeout())
	logged := false
	for {
		epoch, err := layout.RegisterBroker(ctx, store, n.selfBroker(), n.cfg.Clock.Now().UnixMilli())
		if !errors.Is(err, layout.ErrBrokerIDInUse) {
			return epoch, err
		}
		mine, rerr := n.registeredAtSelf(ctx, store)
		if rerr != nil {
			return 0, rerr
		}
		if !mine || time.Now().After(deadline) {
			return 0, fmt.Errorf("%w: %w", ErrBrokerIDInUse, err)
		}
		if !logged {
			n.logger.Warn("broker id registered by an older session at this broker's address (a restart before ZooKeeper expired it); waiting for it to expire",
				"broker", n.cfg.NodeID, "up_to", time.Until(deadline).Round(time.Second))
			logged = true
		}
		select {
		case <-time.After(200 * time.Millisecond): // polling, bounded by deadline
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// registeredAtSelf reads the registration of this broker's id and reports
// whether it names this broker's own host and port (a vanished one counts:
// registering again will tell).
func (n *Node) registeredAtSelf(ctx context.Context, store coord.Store) (bool, error) {
	path := layout.BrokerPath(n.cfg.NodeID)
	data, st, err := store.Get(ctx, path)
	switch {
	case errors.Is(err, coord.ErrNoNode):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("node: read %s: %w", path, err)
	}
	b, err := layout.DecodeBroker(path, data, st)
	return err == nil && slices.Equal(b.Listeners(), n.selfBroker().Listeners()), nil
}

// selfBroker is what the broker registers: its advertised listeners
// (Config.Listeners; without them, one PLAINTEXT listener at Advertised).
func (n *Node) selfBroker() meta.Broker {
	return meta.Broker{ID: n.cfg.NodeID, Host: n.self.Host, Port: n.self.Port, Endpoints: n.cfg.Listeners}
}

// peerAddr is the host:port this broker dials to reach broker b: its route
// in ReplicaRoutes, else its endpoint of the inter-broker listener
// (Config.InterBrokerListener), as Kafka's brokers reach each other.
func (n *Node) peerAddr(b Broker) (string, error) {
	if addr, routed := n.cfg.ReplicaRoutes[b.ID]; routed {
		return addr, nil
	}
	e, ok := b.Endpoint(n.cfg.InterBrokerListener)
	if !ok {
		var names []string
		for _, e := range b.Endpoints {
			names = append(names, e.Listener)
		}
		return "", fmt.Errorf("broker %d has no endpoint for the inter-broker listener %s (it registered %s)",
			b.ID, n.cfg.InterBrokerListener, strings.Join(names, ", "))
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// sessionTimeout is the coordination session timeout in use.
func (n *Node) sessionTimeout() time.Duration {
	if n.cfg.ZooKeeperSessionTimeout > 0 {
		return n.cfg.ZooKeeperSessionTimeout
	}
	return zk.DefaultSessionTimeout
}

// startupRetry is the pause between start-up attempts while the store is
// unreachable.
const startupRetry = 250 * time.Millisecond

// untilConnected runs step, a start-up step that is safe to repeat, again
// while it fails because the store's connection was lost (ZooKeeper
// restarting, or away a moment), until ctx ends: then the last error comes
// back. Kafka's ZooKeeper client likewise holds requests until it
// reconnects (within zookeeper.connection.timeout.ms) rather than failing
// the broker's start.
func (n *Node) untilConnected(ctx context.Context, what string, step func() error) error {
	logged := false
	for {
		err := step()
		if err == nil || !errors.Is(err, coord.ErrConnectionLoss) && !errors.Is(err, coord.ErrSessionExpired) {
			return err
		}
		if !logged {
			n.logger.Warn("coordination store unreachable during start-up; retrying", "step", what, "err", err)
			logged = true
		}
		select {
		case <-time.After(startupRetry):
		case <-ctx.Done():
			return fmt.Errorf("node: %s: %w (gave up: %w)", what, err, ctx.Err())
		}
	}
}
