// Package codecrpc carries codec.Codec over hashicorp/go-plugin's gRPC
// protocol: Serve for plugin authors, Open for the host.
//
// A plugin's main is one call:
//
//	func main() {
//		codecrpc.Serve(func(params map[string]string) (codec.Codec, error) {
//			return mycodec.New(params)
//		})
//	}
//
// The host runs the binary under a pluginrpc.Supervisor (package host does
// that for a spec) and opens instances with Open; each is a codec.Codec whose
// calls cross the process boundary once per batch. The shim checks what the
// plugin answers: an id outside 0-7, an id that changes across a restart
// (the Client then fails for good, errors wrapping pluginrpc.ErrIncompatible,
// because batches were already written under the first id), and a
// Decompress output over MaxSize are errors (the last wraps both
// codec.ErrTooLarge and codec.ErrPluginFailed, and gRPC refuses such an
// answer from its length prefix, before reading it), so a misbehaving plugin
// cannot corrupt a batch or exhaust memory. Errors cross as gRPC codes:
// codec.ErrCorrupt as DataLoss, codec.ErrTooLarge as OutOfRange, a
// factory's rejection as InvalidArgument (codec.ErrInvalidSpec on the host);
// anything else wraps codec.ErrPluginFailed and names the plugin.
package codecrpc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecpb"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

// Factory builds a codec from a spec's parameters; it must reject parameters
// it does not know. Each Open from the host calls it once.
type Factory func(params map[string]string) (codec.Codec, error)

// Kind describes the codec kind to package pluginrpc.
var Kind = pluginrpc.Kind{
	Name:       pluginrpc.KindCodec,
	ErrFailed:  codec.ErrPluginFailed,
	ErrInvalid: codec.ErrInvalidSpec,
	Codes: []pluginrpc.ErrorCode{
		{Err: codec.ErrCorrupt, Code: codes.DataLoss},
		{Err: codec.ErrTooLarge, Code: codes.OutOfRange},
	},
}

// Serve serves the codecs f builds and returns only when the host stops the
// plugin. Call it from main.
func Serve(f Factory) {
	pluginrpc.Serve(plugin.PluginSet{pluginrpc.KindCodec: Plugin(f)})
}

// Plugin returns the go-plugin Plugin of the codec kind: serving f on the
// plugin side, or, with f nil, the host side's, for pluginrpc.Config.Plugins
// and plugin.TestPluginGRPCConn.
func Plugin(f Factory) plugin.Plugin {
	p := &pluginrpc.GRPCPlugin[codecpb.CodecClient]{NewClient: codecpb.NewCodecClient}
	if f != nil {
		p.Register = func(s *grpc.Server) { codecpb.RegisterCodecServer(s, &server{factory: f}) }
	}
	return p
}

// server is the plugin side: it keeps the instances Open built.
type server struct {
	codecpb.UnimplementedCodecServer
	factory Factory
	inst    pluginrpc.Instances[codec.Codec]
}

func (s *server) Open(_ context.Context, req *codecpb.OpenRequest) (*codecpb.OpenResponse, error) {
	params := req.GetParams()
	if params == nil {
		params = map[string]string{}
	}
	c, err := s.factory(params)
	switch {
	case err != nil && !errors.Is(err, codec.ErrInvalidSpec):
		err = fmt.Errorf("%w: %w", codec.ErrInvalidSpec, err)
	case err == nil && c == nil:
		err = fmt.Errorf("%w: the factory returned no codec", codec.ErrInvalidSpec)
	case err == nil && !c.ID().Valid():
		err = fmt.Errorf("%w: the factory returned a codec with id %d, outside 0..%d", codec.ErrInvalidSpec, c.ID(), codec.MaxID)
	}
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &codecpb.OpenResponse{Instance: s.inst.Add(c), CodecId: int32(c.ID())}, nil
}

func (s *server) Compress(ctx context.Context, req *codecpb.CompressRequest) (*codecpb.CompressResponse, error) {
	c, err := s.inst.Get(req.GetInstance())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	resp, err := c.Compress(ctx, codec.CompressRequest{Records: req.GetRecords()})
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &codecpb.CompressResponse{Compressed: resp.Compressed}, nil
}

func (s *server) Decompress(ctx context.Context, req *codecpb.DecompressRequest) (*codecpb.DecompressResponse, error) {
	c, err := s.inst.Get(req.GetInstance())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	maxSize := req.GetMaxSize()
	if maxSize < 0 || maxSize > int64(^uint(0)>>1) {
		maxSize = 0
	}
	resp, err := c.Decompress(ctx, codec.DecompressRequest{Compressed: req.GetCompressed(), MaxSize: int(maxSize)})
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &codecpb.DecompressResponse{Records: resp.Records}, nil
}

func (s *server) Close(_ context.Context, req *codecpb.CloseRequest) (*codecpb.CloseResponse, error) {
	return &codecpb.CloseResponse{}, pluginrpc.ToStatus(Kind, s.inst.Remove(req.GetInstance()))
}

// Client is a codec living in a plugin process: a codec.Codec and an
// io.Closer. It is safe for concurrent use.
type Client struct {
	in   *pluginrpc.Instance[codecpb.CodecClient]
	id   codec.ID
	spec string
}

var (
	_ codec.Codec                = (*Client)(nil)
	_ interface{ Close() error } = (*Client)(nil)
)

// Open opens a codec with params in sup's plugin process. Errors wrap
// codec.ErrPluginFailed, or codec.ErrInvalidSpec when the plugin rejects the
// parameters, and name the plugin.
func Open(ctx context.Context, sup *pluginrpc.Supervisor, params map[string]string) (*Client, error) {
	c := &Client{id: -1, spec: spec.Spec{Name: sup.Path(), Params: params}.String()}
	in, err := pluginrpc.Open(ctx, sup, Kind, func(ctx context.Context, stub codecpb.CodecClient) (uint64, error) {
		resp, err := stub.Open(ctx, &codecpb.OpenRequest{Params: params}, pluginrpc.CallOptions()...)
		if err != nil {
			return 0, err
		}
		id := codec.ID(resp.GetCodecId())
		switch {
		case resp.GetCodecId() < 0 || !id.Valid():
			return resp.GetInstance(), fmt.Errorf("%w: plugin %s: Open answered codec id %d, outside 0..%d", codec.ErrPluginFailed, sup.Path(), resp.GetCodecId(), codec.MaxID)
		case c.id >= 0 && id != c.id:
			return resp.GetInstance(), fmt.Errorf("%w: %w: plugin %s: codec id changed from %d to %d after a restart", codec.ErrPluginFailed, pluginrpc.ErrIncompatible, sup.Path(), c.id, id)
		}
		if c.id < 0 { // the first Open, before c is shared
			c.id = id
		}
		return resp.GetInstance(), nil
	}, func(ctx context.Context, stub codecpb.CodecClient, id uint64) error {
		_, err := stub.Close(ctx, &codecpb.CloseRequest{Instance: id}, pluginrpc.CallOptions()...)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.in = in
	return c, nil
}

// ID returns the codec id the plugin declared at Open.
func (c *Client) ID() codec.ID { return c.id }

// String returns the spec: the plugin's path and parameters.
func (c *Client) String() string { return c.spec }

// Compress compresses one batch's records section in the plugin.
func (c *Client) Compress(ctx context.Context, req codec.CompressRequest) (codec.CompressResponse, error) {
	var out []byte
	err := c.in.Call(ctx, "Compress", func(ctx context.Context, stub codecpb.CodecClient, id uint64) error {
		resp, err := stub.Compress(ctx, &codecpb.CompressRequest{Instance: id, Records: req.Records}, pluginrpc.CallOptions()...)
		out = resp.GetCompressed()
		return err
	})
	if err != nil {
		return codec.CompressResponse{}, err
	}
	if out == nil {
		out = []byte{}
	}
	return codec.CompressResponse{Compressed: out}, nil
}

// Decompress decompresses one batch's records section in the plugin and
// checks the output against req.MaxSize.
func (c *Client) Decompress(ctx context.Context, req codec.DecompressRequest) (codec.DecompressResponse, error) {
	opts := pluginrpc.CallOptions()
	if req.MaxSize > 0 && req.MaxSize < pluginrpc.MaxMessageSize-decompressOverhead {
		// gRPC refuses a larger answer from its length prefix, before
		// reading it: a plugin cannot make the host receive 256 MiB to
		// find out it was over a 1 MiB limit. (A later option wins.)
		opts = append(slices.Clip(opts), grpc.MaxCallRecvMsgSize(req.MaxSize+decompressOverhead))
	}
	var out []byte
	err := c.in.Call(ctx, "Decompress", func(ctx context.Context, stub codecpb.CodecClient, id uint64) error {
		resp, err := stub.Decompress(ctx, &codecpb.DecompressRequest{Instance: id, Compressed: req.Compressed, MaxSize: int64(max(req.MaxSize, 0))}, opts...)
		// ResourceExhausted is a message over a size limit; the request
		// fits its own, so it was the answer.
		if status.Code(err) == codes.ResourceExhausted && req.MaxSize > 0 && len(req.Compressed) < pluginrpc.MaxMessageSize-decompressOverhead {
			return fmt.Errorf("%w: %w: plugin %s: Decompress answered over MaxSize %d (%s)",
				codec.ErrTooLarge, codec.ErrPluginFailed, c.in.Name(), req.MaxSize, status.Convert(err).Message())
		}
		out = resp.GetRecords()
		return err
	})
	if err != nil {
		return codec.DecompressResponse{}, err
	}
	if req.MaxSize > 0 && len(out) > req.MaxSize {
		return codec.DecompressResponse{}, fmt.Errorf("%w: %w: plugin %s: Decompress answered %d bytes, over MaxSize %d",
			codec.ErrTooLarge, codec.ErrPluginFailed, c.in.Name(), len(out), req.MaxSize)
	}
	if out == nil {
		out = []byte{}
	}
	return codec.DecompressResponse{Records: out}, nil
}

// decompressOverhead is what a DecompressResponse adds to its records: a
// field tag and a length varint, with room to spare.
const decompressOverhead = 4 << 10

// Close closes the codec in the plugin (the process keeps running for other
// instances). Later calls fail with errors wrapping codec.ErrPluginFailed.
func (c *Client) Close() error { return c.in.Close(context.Background()) }
