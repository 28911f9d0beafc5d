// Command weir-codec-s2 is an example external codec plugin: S2 compression
// under a custom codec id (see package s2codec for its parameters). Build it
// with `make plugins`; the broker runs it, e.g. with the codec spec
// bin/plugins/weir-codec-s2:level=better, or as "s2" when it lies in the
// plugin directory.
package main

import (
	"github.com/weir-broker/weir/plugins/cmd/internal/s2codec"
	"github.com/weir-broker/weir/plugins/codec/codecrpc"
)

func main() { codecrpc.Serve(s2codec.New) }
