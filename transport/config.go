package transport

import (
	"fmt"
	"io"
	"log/slog"
)

// DefaultMaxRequestBytes is the largest request accepted by default: Kafka's
// socket.request.max.bytes.
const DefaultMaxRequestBytes = 100 << 20

// DefaultMaxControlRequestBytes is the default bound on requests other than
// Produce.
const DefaultMaxControlRequestBytes = 4 << 20

// DefaultClusterID is the cluster ID reported when Config.ClusterID is empty.
const DefaultClusterID = "weir"

// Config configures a Server. The zero value is valid: validate fills the
// defaults named on each field.
type Config struct {
	// NodeID is this broker's node ID in Metadata and FindCoordinator.
	// Default 0.
	NodeID int32
	// AdvertisedHost is the host clients are told to connect to. Default: the
	// host of the first listener passed to Serve.
	AdvertisedHost string
	// AdvertisedPort is the port clients are told to connect to. Default: the
	// port of the first listener passed to Serve.
	AdvertisedPort int32
	// ClusterID is reported in Metadata. Default DefaultClusterID.
	ClusterID string
	// MaxRequestBytes: a request frame larger than this closes the connection
	// before anything is allocated for it. Default DefaultMaxRequestBytes
	// (100 MiB, Kafka's socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxControlRequestBytes bounds every request but Produce (the only one
	// that carries data): decoding a hostile request can cost many times its
	// size (an array of empty strings becomes an array of structs), so the
	// requests that need no room for data get little. Default
	// DefaultMaxControlRequestBytes (4 MiB: a Fetch or OffsetCommit of tens of
	// thousands of partitions), at most MaxRequestBytes.
	MaxControlRequestBytes int32
	// MaxConnections: connections accepted beyond this many open ones are
	// closed at once. Default 0: no limit.
	MaxConnections int
	// AutoCreateTopics creates unknown topics named in Metadata (when the
	// client allows it) and Produce requests, with the registry's default
	// partition count and configs. Default false.
	AutoCreateTopics bool
	// DisableSendfile makes Fetch copy record bytes through a buffer (ReadAt,
	// then write) even when the segment is an OS file that could be sent with
	// sendfile. Default false; benchmarks set it to compare the two paths.
	DisableSendfile bool
	// Logger receives connection and request failures. Default: discarded.
	Logger *slog.Logger
	// Metrics receives request, byte and connection counts. Default nil:
	// nothing is counted.
	Metrics *Metrics
}

func (c *Config) validate() error {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxRequestBytes < minFrame {
		return fmt.Errorf("%w: MaxRequestBytes %d below %d", ErrConfig, c.MaxRequestBytes, minFrame)
	}
	if c.MaxControlRequestBytes == 0 {
		c.MaxControlRequestBytes = DefaultMaxControlRequestBytes
	}
	if c.MaxControlRequestBytes < minFrame {
		return fmt.Errorf("%w: MaxControlRequestBytes %d below %d", ErrConfig, c.MaxControlRequestBytes, minFrame)
	}
	c.MaxControlRequestBytes = min(c.MaxControlRequestBytes, c.MaxRequestBytes)
	if c.MaxConnections < 0 {
		return fmt.Errorf("%w: MaxConnections %d is negative", ErrConfig, c.MaxConnections)
	}
	if c.NodeID < 0 {
		return fmt.Errorf("%w: NodeID %d is negative", ErrConfig, c.NodeID)
	}
	if c.AdvertisedPort < 0 || c.AdvertisedPort > 65535 {
		return fmt.Errorf("%w: AdvertisedPort %d out of range", ErrConfig, c.AdvertisedPort)
	}
	if c.ClusterID == "" {
		c.ClusterID = DefaultClusterID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}
