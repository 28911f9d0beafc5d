// Command weir-builtins serves every built-in codec, partitioner and flush
// policy as an external plugin, chosen by the parameter builtin; the other
// parameters go to the built-in. For example
//
//	bin/plugins/weir-builtins:builtin=snappy
//	bin/plugins/weir-builtins:builtin=murmur2,seed=7
//	bin/plugins/weir-builtins:builtin=interval,ms=50
//
// behave like the specs snappy, murmur2:seed=7 and interval:ms=50, one
// process boundary away. It exists to measure what that boundary costs
// against the same code in process (plugins/host's benchmarks), to test the
// plugin machinery against implementations whose behaviour is known, and as a
// template for a plugin binary that serves several kinds at once.
package main

import (
	"fmt"
	"maps"
	"strings"

	"github.com/hashicorp/go-plugin"

	"github.com/weir-broker/weir/plugins/codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
	"github.com/weir-broker/weir/plugins/flushpolicy"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
	"github.com/weir-broker/weir/plugins/partitioner"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
	"github.com/weir-broker/weir/plugins/pluginrpc"
	"github.com/weir-broker/weir/plugins/spec"
)

func main() {
	pluginrpc.Serve(plugin.PluginSet{
		pluginrpc.KindCodec: codecrpc.Plugin(func(params map[string]string) (codec.Codec, error) {
			return build(params, codec.Names(), codec.New)
		}),
		pluginrpc.KindPartitioner: partitionerrpc.Plugin(func(params map[string]string) (partitioner.Partitioner, error) {
			return build(params, partitioner.Names(), partitioner.New)
		}),
		pluginrpc.KindFlushPolicy: flushpolicyrpc.Plugin(func(params map[string]string) (flushpolicy.Policy, error) {
			return build(params, flushpolicy.Names(), flushpolicy.New)
		}),
	})
}

// build makes the built-in named by params["builtin"] from the other
// parameters, through the kind's registry (which validates them).
func build[T any](params map[string]string, names []string, newFn func(string) (T, error)) (T, error) {
	var zero T
	name, ok := params["builtin"]
	if !ok {
		return zero, fmt.Errorf("missing parameter builtin (one of: %s)", strings.Join(names, ", "))
	}
	rest := maps.Clone(params)
	delete(rest, "builtin")
	return newFn(spec.Spec{Name: name, Params: rest}.String())
}
