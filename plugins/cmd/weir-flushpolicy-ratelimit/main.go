// Command weir-flushpolicy-ratelimit is an example external flush policy
// plugin: fsync after every append, at most hz times a second (see package
// ratelimit for the parameter and the loss bound). Build it with
// `make plugins`; use it with the spec
// bin/plugins/weir-flushpolicy-ratelimit:hz=100.
package main

import (
	"github.com/weir-broker/weir/plugins/cmd/internal/ratelimit"
	"github.com/weir-broker/weir/plugins/flushpolicy/flushpolicyrpc"
)

func main() { flushpolicyrpc.Serve(ratelimit.New) }
