// Package partitionerrpc carries partitioner.Partitioner over
// hashicorp/go-plugin's gRPC protocol: Serve for plugin authors, Open for the
// host.
//
// A plugin's main is one call:
//
//	func main() {
//		partitionerrpc.Serve(func(params map[string]string) (partitioner.Partitioner, error) {
//			return mypartitioner.New(params)
//		})
//	}
//
// One call carries a whole batch: the keys travel concatenated in one byte
// string with a length per record (-1 for a null key, so null and empty keys
// stay distinct), which costs one allocation per batch on either side rather
// than one per key. The host checks every answer with partitioner.Check (one
// partition per key, each in range); a bad one is an error wrapping both
// partitioner.ErrBadResponse and partitioner.ErrPluginFailed. Requests that
// fail partitioner.Request.Validate never leave the host. A partitioner that
// implements partitioner.KeyConsistent keeps its promise across the boundary:
// Open reports it, and the host's Client answers KeyConsistent the same.
package partitionerrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerpb"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

// Factory builds a partitioner from a spec's parameters; it must reject
// parameters it does not know. Each Open from the host (one per producer)
// calls it once.
type Factory func(params map[string]string) (partitioner.Partitioner, error)

// Kind describes the partitioner kind to package pluginrpc.
var Kind = pluginrpc.Kind{
	Name:       pluginrpc.KindPartitioner,
	ErrFailed:  partitioner.ErrPluginFailed,
	ErrInvalid: partitioner.ErrInvalidSpec,
	Codes: []pluginrpc.ErrorCode{
		{Err: partitioner.ErrBadRequest, Code: codes.FailedPrecondition},
	},
}

// Serve serves the partitioners f builds and returns only when the host stops
// the plugin. Call it from main.
func Serve(f Factory) {
	pluginrpc.Serve(plugin.PluginSet{pluginrpc.KindPartitioner: Plugin(f)})
}

// Plugin returns the go-plugin Plugin of the partitioner kind: serving f on
// the plugin side, or, with f nil, the host side's, for
// pluginrpc.Config.Plugins and plugin.TestPluginGRPCConn.
func Plugin(f Factory) plugin.Plugin {
	p := &pluginrpc.GRPCPlugin[partitionerpb.PartitionerClient]{NewClient: partitionerpb.NewPartitionerClient}
	if f != nil {
		p.Register = func(s *grpc.Server) { partitionerpb.RegisterPartitionerServer(s, &server{factory: f}) }
	}
	return p
}

type server struct {
	partitionerpb.UnimplementedPartitionerServer
	factory Factory
	inst    pluginrpc.Instances[partitioner.Partitioner]
}

func (s *server) Open(_ context.Context, req *partitionerpb.OpenRequest) (*partitionerpb.OpenResponse, error) {
	params := req.GetParams()
	if params == nil {
		params = map[string]string{}
	}
	p, err := s.factory(params)
	switch {
	case err != nil && !errors.Is(err, partitioner.ErrInvalidSpec):
		err = fmt.Errorf("%w: %w", partitioner.ErrInvalidSpec, err)
	case err == nil && p == nil:
		err = fmt.Errorf("%w: the factory returned no partitioner", partitioner.ErrInvalidSpec)
	}
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	kc, _ := p.(partitioner.KeyConsistent)
	return &partitionerpb.OpenResponse{Instance: s.inst.Add(p), KeyConsistent: kc != nil && kc.KeyConsistent()}, nil
}

var errMalformed = errors.New("partitionerrpc: malformed request")

func (s *server) Partition(ctx context.Context, req *partitionerpb.PartitionRequest) (*partitionerpb.PartitionResponse, error) {
	p, err := s.inst.Get(req.GetInstance())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	keys, err := splitKeys(req.GetKeys(), req.GetKeyLengths())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	resp, err := p.Partition(ctx, partitioner.Request{Topic: req.GetTopic(), Partitions: req.GetPartitions(), Keys: keys})
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &partitionerpb.PartitionResponse{Partitions: resp.Partitions}, nil
}

func (s *server) Close(_ context.Context, req *partitionerpb.CloseRequest) (*partitionerpb.CloseResponse, error) {
	return &partitionerpb.CloseResponse{}, pluginrpc.ToStatus(Kind, s.inst.Remove(req.GetInstance()))
}

// joinKeys concatenates keys and records each one's length, -1 for nil.
func joinKeys(keys [][]byte) (data []byte, lengths []int32) {
	n := 0
	for _, k := range keys {
		n += len(k)
	}
	data = make([]byte, 0, n)
	lengths = make([]int32, len(keys))
	for i, k := range keys {
		if k == nil {
			lengths[i] = -1
			continue
		}
		lengths[i] = int32(len(k))
		data = append(data, k...)
	}
	return data, lengths
}

// splitKeys reverses joinKeys; the keys alias data. Lengths below -1 or
// that do not add up to len(data) are an error wrapping errMalformed.
func splitKeys(data []byte, lengths []int32) ([][]byte, error) {
	keys := make([][]byte, len(lengths))
	off := 0
	for i, l := range lengths {
		switch {
		case l == -1:
			continue
		case l < -1 || int64(l) > int64(len(data)-off):
			return nil, fmt.Errorf("%w: key %d has length %d with %d bytes left", errMalformed, i, l, len(data)-off)
		}
		keys[i] = data[off : off+int(l) : off+int(l)]
		off += int(l)
	}
	if off != len(data) {
		return nil, fmt.Errorf("%w: %d key bytes, lengths add up to %d", errMalformed, len(data), off)
	}
	return keys, nil
}

// Client is a partitioner living in a plugin process: a
// partitioner.Partitioner, a partitioner.KeyConsistent and an io.Closer.
// Like any partitioner, it is called from one goroutine at a time.
type Client struct {
	in            *pluginrpc.Instance[partitionerpb.PartitionerClient]
	spec          string
	keyConsistent bool
}

var (
	_ partitioner.Partitioner   = (*Client)(nil)
	_ partitioner.KeyConsistent = (*Client)(nil)
)

// Open opens a partitioner with params in sup's plugin process. Errors wrap
// partitioner.ErrPluginFailed, or partitioner.ErrInvalidSpec when the plugin
// rejects the parameters, and name the plugin.
func Open(ctx context.Context, sup *pluginrpc.Supervisor, params map[string]string) (*Client, error) {
	c := &Client{spec: spec.Spec{Name: sup.Path(), Params: params}.String()}
	first := true
	in, err := pluginrpc.Open(ctx, sup, Kind, func(ctx context.Context, stub partitionerpb.PartitionerClient) (uint64, error) {
		resp, err := stub.Open(ctx, &partitionerpb.OpenRequest{Params: params}, pluginrpc.CallOptions()...)
		if err != nil {
			return 0, err
		}
		if first { // before c is shared; a restart keeps the first answer
			c.keyConsistent, first = resp.GetKeyConsistent(), false
		}
		return resp.GetInstance(), nil
	}, func(ctx context.Context, stub partitionerpb.PartitionerClient, id uint64) error {
		_, err := stub.Close(ctx, &partitionerpb.CloseRequest{Instance: id}, pluginrpc.CallOptions()...)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.in = in
	return c, nil
}

// String returns the spec: the plugin's path and parameters.
func (c *Client) String() string { return c.spec }

// KeyConsistent reports what the plugin's partitioner promised at Open.
func (c *Client) KeyConsistent() bool { return c.keyConsistent }

// Partition asks the plugin for the batch's partitions and checks the answer
// with partitioner.Check.
func (c *Client) Partition(ctx context.Context, req partitioner.Request) (partitioner.Response, error) {
	if err := req.Validate(); err != nil {
		return partitioner.Response{}, err
	}
	data, lengths := joinKeys(req.Keys)
	var out []int32
	err := c.in.Call(ctx, "Partition", func(ctx context.Context, stub partitionerpb.PartitionerClient, id uint64) error {
		resp, err := stub.Partition(ctx, &partitionerpb.PartitionRequest{
			Instance: id, Topic: req.Topic, Partitions: req.Partitions, Keys: data, KeyLengths: lengths,
		}, pluginrpc.CallOptions()...)
		out = resp.GetPartitions()
		return err
	})
	if err != nil {
		return partitioner.Response{}, err
	}
	if out == nil {
		out = []int32{}
	}
	resp := partitioner.Response{Partitions: out}
	if err := partitioner.Check(req, resp); err != nil {
		return partitioner.Response{}, fmt.Errorf("%w: plugin %s: %w", partitioner.ErrPluginFailed, c.in.Name(), err)
	}
	return resp, nil
}

// Close closes the partitioner in the plugin (the process keeps running for
// other instances).
func (c *Client) Close() error { return c.in.Close(context.Background()) }
