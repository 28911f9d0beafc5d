// Package broker runs a whole broker: a node (package node: the state and
// decisions) served over the Kafka protocol (package transport) on a TCP
// listener, plus an HTTP endpoint serving the node's Prometheus metrics. It
// is the thin assembly that `weir broker`, the end-to-end tests with real
// clients and the experiment harness share, so they start the same broker
// with one call and stop it the same way:
//
//	b, err := broker.Start(broker.Config{DataDir: dir, Listen: "127.0.0.1:0", AutoCreateTopics: true})
//	...
//	fmt.Println(b.Addr()) // the address actually bound
//	err = b.Close()       // graceful: see below
//
// Start binds the listener first, so that the address the node advertises
// (Config.Advertised, or the bound address) is known when the node opens.
// What the data directory holds is the node's (see package node).
//
// # Shutdown
//
// Close stops in dependency order: the protocol server (no new connections;
// open ones closed; every handler returned, so nothing calls the node any
// more), the metrics endpoint, then the node, which stops its retention loop,
// writes committed offsets, seals every partition log with its clean-shutdown
// marker and stops its plugins. The next Start then trusts those logs instead
// of re-reading them.
package broker
