// Package flushpolicyrpc carries flushpolicy.Policy over hashicorp/go-plugin's
// gRPC protocol: Serve for plugin authors, Open for the host.
//
// A plugin's main is one call:
//
//	func main() {
//		flushpolicyrpc.Serve(func(params map[string]string) (flushpolicy.Policy, error) {
//			return mypolicy.New(params)
//		})
//	}
//
// The log opens one instance per partition; every append and every fsync is
// one call. Times cross as wall-clock instants (google.protobuf.Timestamp),
// an absent one meaning Go's zero time, so the policy sees AppendInfo.Now
// and OldestUnflushed as the log passed them, less the monotonic reading
// (which means nothing in another process). The log treats an error from a
// policy as "flush now" (see flushpolicy.Policy), so a crashed or hung plugin
// costs throughput, not data. A policy's loss bound (flushpolicy.Bounded)
// crosses at Open, so the host's Client declares the same bound; a restarted
// plugin that declares another one fails the Client for good (errors wrap
// pluginrpc.ErrIncompatible), since the log already relies on the first.
package flushpolicyrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicypb"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

// Factory builds a policy from a spec's parameters; it must reject parameters
// it does not know. Each Open from the host (one per partition) calls it
// once.
type Factory func(params map[string]string) (flushpolicy.Policy, error)

// Kind describes the flush policy kind to package pluginrpc.
var Kind = pluginrpc.Kind{
	Name:       pluginrpc.KindFlushPolicy,
	ErrFailed:  flushpolicy.ErrPluginFailed,
	ErrInvalid: flushpolicy.ErrInvalidSpec,
}

// Serve serves the policies f builds and returns only when the host stops the
// plugin. Call it from main.
func Serve(f Factory) {
	pluginrpc.Serve(plugin.PluginSet{pluginrpc.KindFlushPolicy: Plugin(f)})
}

// Plugin returns the go-plugin Plugin of the flush policy kind: serving f on
// the plugin side, or, with f nil, the host side's, for
// pluginrpc.Config.Plugins and plugin.TestPluginGRPCConn.
func Plugin(f Factory) plugin.Plugin {
	p := &pluginrpc.GRPCPlugin[flushpolicypb.FlushPolicyClient]{NewClient: flushpolicypb.NewFlushPolicyClient}
	if f != nil {
		p.Register = func(s *grpc.Server) { flushpolicypb.RegisterFlushPolicyServer(s, &server{factory: f}) }
	}
	return p
}

type server struct {
	flushpolicypb.UnimplementedFlushPolicyServer
	factory Factory
	inst    pluginrpc.Instances[flushpolicy.Policy]
}

func (s *server) Open(_ context.Context, req *flushpolicypb.OpenRequest) (*flushpolicypb.OpenResponse, error) {
	params := req.GetParams()
	if params == nil {
		params = map[string]string{}
	}
	p, err := s.factory(params)
	switch {
	case err != nil && !errors.Is(err, flushpolicy.ErrInvalidSpec):
		err = fmt.Errorf("%w: %w", flushpolicy.ErrInvalidSpec, err)
	case err == nil && p == nil:
		err = fmt.Errorf("%w: the factory returned no policy", flushpolicy.ErrInvalidSpec)
	}
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	resp := &flushpolicypb.OpenResponse{Instance: s.inst.Add(p)}
	if b, ok := p.(flushpolicy.Bounded); ok {
		lb := b.LossBound()
		resp.LossBound = &flushpolicypb.LossBound{Messages: lb.Messages, Bytes: lb.Bytes, AgeNanos: int64(lb.Age)}
	}
	return resp, nil
}

func (s *server) Appended(ctx context.Context, req *flushpolicypb.AppendedRequest) (*flushpolicypb.AppendedResponse, error) {
	p, err := s.inst.Get(req.GetInstance())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	d, err := p.Appended(ctx, flushpolicy.AppendInfo{
		Messages:          req.GetMessages(),
		Bytes:             req.GetBytes(),
		UnflushedMessages: req.GetUnflushedMessages(),
		UnflushedBytes:    req.GetUnflushedBytes(),
		OldestUnflushed:   fromProto(req.GetOldestUnflushed()),
		Now:               fromProto(req.GetNow()),
	})
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &flushpolicypb.AppendedResponse{Flush: d.Flush, FlushBy: toProto(d.FlushBy)}, nil
}

func (s *server) Flushed(ctx context.Context, req *flushpolicypb.FlushedRequest) (*flushpolicypb.FlushedResponse, error) {
	p, err := s.inst.Get(req.GetInstance())
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	err = p.Flushed(ctx, flushpolicy.FlushInfo{
		Messages: req.GetMessages(),
		Bytes:    req.GetBytes(),
		Duration: time.Duration(req.GetDurationNanos()),
		Now:      fromProto(req.GetNow()),
		Failed:   req.GetFailed(),
	})
	if err != nil {
		return nil, pluginrpc.ToStatus(Kind, err)
	}
	return &flushpolicypb.FlushedResponse{}, nil
}

func (s *server) Close(_ context.Context, req *flushpolicypb.CloseRequest) (*flushpolicypb.CloseResponse, error) {
	return &flushpolicypb.CloseResponse{}, pluginrpc.ToStatus(Kind, s.inst.Remove(req.GetInstance()))
}

// toProto encodes t; the zero time is absent.
func toProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// fromProto decodes a timestamp in the local zone (as time.Now gives); absent
// is the zero time.
func fromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return time.Unix(ts.GetSeconds(), int64(ts.GetNanos()))
}

// Client is a flush policy living in a plugin process: a flushpolicy.Policy,
// a flushpolicy.Bounded, an io.Closer and a fmt.Stringer. Like any policy,
// it is called from one goroutine at a time.
type Client struct {
	in    *pluginrpc.Instance[flushpolicypb.FlushPolicyClient]
	spec  string
	bound flushpolicy.Bound
}

var (
	_ flushpolicy.Policy  = (*Client)(nil)
	_ flushpolicy.Bounded = (*Client)(nil)
)

// Open opens a policy with params in sup's plugin process. Errors wrap
// flushpolicy.ErrPluginFailed, or flushpolicy.ErrInvalidSpec when the plugin
// rejects the parameters, and name the plugin.
func Open(ctx context.Context, sup *pluginrpc.Supervisor, params map[string]string) (*Client, error) {
	c := &Client{spec: spec.Spec{Name: sup.Path(), Params: params}.String()}
	first := true
	in, err := pluginrpc.Open(ctx, sup, Kind, func(ctx context.Context, stub flushpolicypb.FlushPolicyClient) (uint64, error) {
		resp, err := stub.Open(ctx, &flushpolicypb.OpenRequest{Params: params}, pluginrpc.CallOptions()...)
		if err != nil {
			return 0, err
		}
		lb := resp.GetLossBound()
		b := flushpolicy.Bound{Messages: lb.GetMessages(), Bytes: lb.GetBytes(), Age: time.Duration(lb.GetAgeNanos())}
		switch {
		case b.Messages < 0 || b.Bytes < 0 || b.Age < 0:
			return resp.GetInstance(), fmt.Errorf("%w: plugin %s: Open declared a negative loss bound %+v", flushpolicy.ErrPluginFailed, sup.Path(), b)
		case first: // before c is shared; a restart keeps the first answer
			c.bound, first = b, false
		case b != c.bound:
			return resp.GetInstance(), fmt.Errorf("%w: %w: plugin %s: loss bound changed from %v to %v after a restart", flushpolicy.ErrPluginFailed, pluginrpc.ErrIncompatible, sup.Path(), c.bound, b)
		}
		return resp.GetInstance(), nil
	}, func(ctx context.Context, stub flushpolicypb.FlushPolicyClient, id uint64) error {
		_, err := stub.Close(ctx, &flushpolicypb.CloseRequest{Instance: id}, pluginrpc.CallOptions()...)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.in = in
	return c, nil
}

// LossBound returns the bound the plugin's policy declared at Open (the zero
// Bound, promising nothing, when it declared none).
func (c *Client) LossBound() flushpolicy.Bound { return c.bound }

// String returns the spec: the plugin's path and parameters.
func (c *Client) String() string { return c.spec }

// Appended asks the plugin for its decision on one append.
func (c *Client) Appended(ctx context.Context, a flushpolicy.AppendInfo) (flushpolicy.Decision, error) {
	var d flushpolicy.Decision
	err := c.in.Call(ctx, "Appended", func(ctx context.Context, stub flushpolicypb.FlushPolicyClient, id uint64) error {
		resp, err := stub.Appended(ctx, &flushpolicypb.AppendedRequest{
			Instance:          id,
			Messages:          a.Messages,
			Bytes:             a.Bytes,
			UnflushedMessages: a.UnflushedMessages,
			UnflushedBytes:    a.UnflushedBytes,
			OldestUnflushed:   toProto(a.OldestUnflushed),
			Now:               toProto(a.Now),
		}, pluginrpc.CallOptions()...)
		if err != nil {
			return err
		}
		if by := resp.GetFlushBy(); by != nil {
			if err := by.CheckValid(); err != nil {
				return fmt.Errorf("%w: plugin %s: Appended answered an invalid FlushBy: %w", flushpolicy.ErrPluginFailed, c.in.Name(), err)
			}
		}
		d = flushpolicy.Decision{Flush: resp.GetFlush(), FlushBy: fromProto(resp.GetFlushBy())}
		return nil
	})
	return d, err
}

// Flushed tells the plugin about one fsync.
func (c *Client) Flushed(ctx context.Context, f flushpolicy.FlushInfo) error {
	return c.in.Call(ctx, "Flushed", func(ctx context.Context, stub flushpolicypb.FlushPolicyClient, id uint64) error {
		_, err := stub.Flushed(ctx, &flushpolicypb.FlushedRequest{
			Instance:      id,
			Messages:      f.Messages,
			Bytes:         f.Bytes,
			DurationNanos: int64(f.Duration),
			Now:           toProto(f.Now),
			Failed:        f.Failed,
		}, pluginrpc.CallOptions()...)
		return err
	})
}

// Close closes the policy in the plugin (the process keeps running for other
// instances).
func (c *Client) Close() error { return c.in.Close(context.Background()) }
