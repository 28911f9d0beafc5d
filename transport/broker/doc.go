// Package broker assembles a whole single-node weir broker from its parts: the
// topic registry (core/topics), the group coordinator (core/groups) and the
// Kafka protocol server (transport), plus the two things none of them owns: a
// loop that applies retention on a timer, and an HTTP endpoint serving the
// Prometheus metrics.
//
// It exists so that everything that needs a running broker — `weir broker`,
// the end-to-end tests with real clients, the experiment harness — starts the
// same one with one call, and stops it the same way:
//
//	b, err := broker.Start(broker.Config{DataDir: dir, Listen: "127.0.0.1:0", AutoCreateTopics: true})
//	...
//	fmt.Println(b.Addr()) // the address actually bound
//	err = b.Close()       // graceful: see below
//
// # Data directory
//
//	<DataDir>/
//	    meta.properties          cluster.id and node.id, written once (Kafka's file of the same name)
//	    weir-meta.json           topics and their configs (core/topics)
//	    <topic>-<partition>/     one partition log each (core/partlog)
//	    __groups/                committed offsets (core/groups)
//
// The cluster id is made up on the first start and kept, so clients that
// remember it (librdkafka logs a change) see the same cluster after a restart.
//
// # Shutdown
//
// Close stops in dependency order: the retention loop (waiting for a pass in
// progress), the protocol server (no new connections; open ones closed; every
// handler returned, so nothing appends any more), the metrics endpoint, the
// group coordinator (committed offsets on disk), and last the registry, whose
// Close seals every partition log and writes its clean-shutdown marker. The
// next Start then trusts those logs instead of re-reading them.
//
// # Time
//
// The retention loop runs on Config.Clock (partlog.Clock), the same seam the
// logs use, so a test can drive it with a manual clock instead of sleeping.
package broker
