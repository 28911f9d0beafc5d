// Package zk is the coordination store (core/coord) over a ZooKeeper
// ensemble, through go-zookeeper/zk v1.0.4: one Store is one ZooKeeper
// session. Open takes a Config (servers, chroot, session timeout, logger);
// ParseConnectString reads Kafka's zookeeper.connect form
// "host:port[,host:port][/chroot]". Tests run it against a real server from
// cluster/zk/zktest.
//
// The library is small and its sharp edges shape this package; each is
// handled here rather than left to callers.
//
// # Sessions
//
// go-zookeeper reports session changes on a channel of 6 events that drops
// what nobody reads, so the store listens with WithEventCallback instead
// and keeps a snapshot (coord.Session) whose Changed channel closes at each
// change. Library states map to coord's as follows: HasSession is
// Connected; Expired is Expired; every other state (Disconnected,
// Connecting, and Connected, which in go-zookeeper means only "TCP is up")
// is Connecting. ID is the last established session's id: it stays during
// Expired and the Connecting after it, and changes when the new session
// is Connected. A snapshot is not a queue: a reader may see Connected with
// a new ID without having seen Expired, so compare IDs (the store logs each
// change, the expiry at warn level).
//
// go-zookeeper, like ZooKeeper's Java client, learns of an expiry only when
// it reconnects and the server refuses the old session; until then a
// client cut off from the ensemble stays Connecting. It then fires every
// watch with EventNotWatching and ErrSessionExpired (before it creates the
// new session, so no watch of the old session leaks into the new one),
// fails the requests that were in flight with ErrSessionExpired, and goes
// on with a new session. The store passes all of this on.
//
// A ZooKeeper restart does not expire sessions: the server reloads them
// from its transaction log and gives each a fresh timeout, so a store that
// reconnects in time keeps its session, ephemerals and watches even after
// an outage longer than the session timeout (TestOutage).
//
// # Requests, deadlines and unknown outcomes
//
// go-zookeeper has no request timeout: a request waits for its reply until
// the connection is declared dead (2/3 of the session timeout without a
// byte), and a request issued while disconnected waits in a queue until the
// next connection (with a single server, the queue is failed with
// ErrNoServer at each redial round, about once a second). So every request
// runs on a goroutine of its own, and the store gives up on it when ctx
// ends or the store closes. A request given up on may still reach the
// server and be applied: that is ErrConnectionLoss, "outcome unknown", as
// is a connection closed under a request, a reply that would not decode, a
// write that failed half-way, and ErrSessionExpired for a request in
// flight when the session ended (it wraps both sentinels). Every error
// names the operation and the caller's path:
//
//	zk: set /brokers/ids/1: coord: version mismatch
//	zk: get /controller: coord: connection lost, outcome unknown: zk: connection closed
//
// Definite answers map to coord's sentinels (no node, node exists, bad
// version, not empty, no children for ephemerals, and invalid path for
// ZooKeeper's bad-arguments); authentication and ACL errors, which coord
// has no word for, pass through wrapped.
//
// # Ephemeral nodes
//
// Create of an Ephemeral node resolves an unknown outcome itself, the way
// Kafka's CheckedEphemeral does: it reads the node back and compares its
// EphemeralOwner with the current session (see createEphemeral for the
// cases), retrying until ctx ends. So a broker's registration either
// succeeds, or fails with a definite ErrNodeExists (another session owns
// the node: a previous incarnation within its session timeout, which is
// why Kafka's hard bounce waits), or fails with ErrConnectionLoss when ctx
// ended first. OwnsEphemeral settles the last case, and Multi's
// ephemerals, which are not resolved.
//
// # Watches
//
// go-zookeeper's watches are one-shot channels; each is forwarded by a
// goroutine to a coord channel with the caller's path (the chroot removed).
// Close fires every live watch with EventNotWatching and ErrClosed before
// it returns. A lost connection fires nothing (go-zookeeper/zk#83):
// watches are re-set on the next connection of the same session, with the
// last zxid seen, so changes made meanwhile still fire. "No event" never
// means "nothing changed": fence with versions and epochs.
//
// # Chroot
//
// go-zookeeper has no chroot: the store prefixes every path with
// Config.Chroot and creates the chroot at Open when it is missing, as Kafka
// does. The root "/" of a chrooted store is the chroot node: it cannot be
// deleted (ErrInvalidPath), though ZooKeeper would allow it.
//
// # Logging
//
// go-zookeeper logs through its own Printf logger (by default the standard
// logger, so stderr); the store routes it to Config.Logger at debug level.
//
// # Not provided
//
// ACLs (every node is world-readable and -writable, as Kafka's default),
// authentication, sequential, container and TTL nodes, and
// read-only mode: coord has no use for them yet.
package zk
