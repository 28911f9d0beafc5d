// Command weir-partitioner-keyrange is an example external partitioner
// plugin: records go to partitions by key range, keyless ones round robin
// (see package keyrange). Build it with `make plugins`; use it with the spec
// bin/plugins/weir-partitioner-keyrange:splits=g;n;t.
package main

import (
	"github.com/weir-broker/weir/plugins/cmd/internal/keyrange"
	"github.com/weir-broker/weir/plugins/partitioner/partitionerrpc"
)

func main() { partitionerrpc.Serve(keyrange.New) }
