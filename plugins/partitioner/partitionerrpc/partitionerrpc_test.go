package partitionerrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
	"github.com/weir-broker/weir/plugins/partitioner/partitionertest"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc/pluginrpctest"
	"github.com/weir-broker/weir/plugins/spec"
)

func open(t *testing.T, f partitionerrpc.Factory, params map[string]string) (*partitionerrpc.Client, error) {
	t.Helper()
	sup := pluginrpctest.Connect(t, pluginrpc.KindPartitioner, "inproc-partitioner", partitionerrpc.Plugin(f), pluginrpc.Config{})
	return partitionerrpc.Open(context.Background(), sup, params)
}

func builtin(name string) partitionerrpc.Factory {
	return func(params map[string]string) (partitioner.Partitioner, error) {
		return partitioner.New(spec.Spec{Name: name, Params: params}.String())
	}
}

// TestBuiltinsThroughShim runs the conformance suite against every built-in
// partitioner served over go-plugin's gRPC in process. Each instance gets
// its own in-process plugin; key consistency is carried by the shim (Open
// reports it).
func TestBuiltinsThroughShim(t *testing.T) {
	names := partitioner.Names()
	if len(names) == 0 {
		t.Fatal("no built-in partitioners registered")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			partitionertest.Run(t, func(t *testing.T) partitioner.Partitioner {
				p, err := open(t, builtin(name), nil)
				if err != nil {
					t.Fatalf("Open %s: %v", name, err)
				}
				t.Cleanup(func() { _ = p.Close() })
				return p
			})
		})
	}
}

func TestKeyConsistentCrosses(t *testing.T) {
	for name, want := range map[string]bool{"murmur2": true, "crc32": true, "round-robin": false, "sticky": false} {
		p, err := open(t, builtin(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.KeyConsistent() != want {
			t.Errorf("%s through the shim: KeyConsistent() = %v, want %v", name, p.KeyConsistent(), want)
		}
	}
}

// lying answers whatever partitions it was built with.
type lying []int32

func (l lying) Partition(context.Context, partitioner.Request) (partitioner.Response, error) {
	return partitioner.Response{Partitions: l}, nil
}

func TestBadResponses(t *testing.T) {
	req := partitioner.Request{Topic: "t", Partitions: 3, Keys: [][]byte{[]byte("a"), nil}}
	for _, tc := range []struct {
		name string
		resp lying
		says string
	}{
		{"too few", lying{0}, "1 partitions for 2 records"},
		{"too many", lying{0, 1, 2}, "3 partitions for 2 records"},
		{"out of range", lying{0, 3}, "partition 3 out of range [0, 3)"},
		{"negative", lying{-1, 0}, "partition -1 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := open(t, func(map[string]string) (partitioner.Partitioner, error) { return tc.resp, nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Partition(context.Background(), req)
			if !errors.Is(err, partitioner.ErrBadResponse) || !errors.Is(err, partitioner.ErrPluginFailed) {
				t.Fatalf("Partition: %v, want ErrBadResponse and ErrPluginFailed", err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "inproc-partitioner") {
				t.Errorf("error %q does not name the plugin and say %q", err, tc.says)
			}
		})
	}
}

// counting counts its calls.
type counting struct{ calls *int }

func (c counting) Partition(_ context.Context, req partitioner.Request) (partitioner.Response, error) {
	*c.calls++
	return partitioner.Response{Partitions: make([]int32, len(req.Keys))}, nil
}

func TestBadRequestStaysHome(t *testing.T) {
	calls := 0
	p, err := open(t, func(map[string]string) (partitioner.Partitioner, error) { return counting{&calls}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Partition(context.Background(), partitioner.Request{Topic: "t", Partitions: 0, Keys: [][]byte{nil}})
	if !errors.Is(err, partitioner.ErrBadRequest) || errors.Is(err, partitioner.ErrPluginFailed) || calls != 0 {
		t.Fatalf("0 partitions: %v (%d plugin calls), want ErrBadRequest without a call", err, calls)
	}
}

func TestOpenRejectedParams(t *testing.T) {
	_, err := open(t, builtin("murmur2"), map[string]string{"seed": "x"})
	if !errors.Is(err, partitioner.ErrInvalidSpec) || !strings.Contains(err.Error(), `seed="x"`) {
		t.Fatalf("Open murmur2:seed=x: %v, want ErrInvalidSpec naming the parameter", err)
	}
}
