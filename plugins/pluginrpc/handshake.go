package pluginrpc

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is what the host and a plugin must agree on before anything else:
// go-plugin passes the cookie in the plugin's environment (a binary run by
// hand without it says so and exits), and ProtocolVersion changes only when
// the .proto contracts change incompatibly.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "WEIR_PLUGIN",
	MagicCookieValue: "4c1f0e2a-weir-plugin-v1",
}

// The go-plugin plugin names of the three kinds. A plugin binary serves one
// or more of them.
const (
	KindCodec       = "codec"
	KindPartitioner = "partitioner"
	KindFlushPolicy = "flushpolicy"
)

// MaxMessageSize bounds one gRPC message in either direction. gRPC's default
// (4 MiB) is smaller than a large produce batch; a batch never exceeds the
// broker's request limit, well under this.
const MaxMessageSize = 256 << 20

// callOptions lift gRPC's default message limits on the host side.
var callOptions = []grpc.CallOption{
	grpc.MaxCallRecvMsgSize(MaxMessageSize),
	grpc.MaxCallSendMsgSize(MaxMessageSize),
}

// CallOptions returns the gRPC call options every host-side call of a kind's
// stub passes; they matter where the connection was not dialled by the
// supervisor.
func CallOptions() []grpc.CallOption { return callOptions }

// DialOptions returns the host side's gRPC dial options (for
// plugin.ClientConfig.GRPCDialOptions): MaxMessageSize both ways.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(callOptions...)}
}

// NewGRPCServer is the plugin side's gRPC server (for
// plugin.ServeConfig.GRPCServer): MaxMessageSize both ways.
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize))...)
}

// GRPCPlugin is the go-plugin Plugin of one kind, for both sides: on the
// plugin side Register adds the kind's gRPC service to the server; on the
// host side NewClient makes the generated client stub from the connection,
// which is what Dispense returns.
type GRPCPlugin[T any] struct {
	plugin.NetRPCUnsupportedPlugin
	// Register adds the service; nil on the host side.
	Register func(*grpc.Server)
	// NewClient makes the client stub; never nil.
	NewClient func(grpc.ClientConnInterface) T
}

var errHostSide = errors.New("pluginrpc: this plugin value is for the host side: it has no service to serve")

// GRPCServer registers the kind's service (plugin side).
func (p *GRPCPlugin[T]) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Register == nil {
		return errHostSide
	}
	p.Register(s)
	return nil
}

// GRPCClient returns the kind's client stub (host side).
func (p *GRPCPlugin[T]) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return p.NewClient(c), nil
}
