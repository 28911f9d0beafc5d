// Package transport speaks the Kafka wire protocol: framing, request and
// response headers, one handler per API, and the Fetch response writer that
// sends record bytes from segment files with sendfile. It is wire only: each
// handler decodes a request, calls the node (package node), which makes every
// decision, and encodes the answer, turning errors into Kafka error codes;
// nothing below it knows about the network, and it never touches logs or
// files except to send the node.Records the node handed it.
//
// # Framing and ordering
//
// A request is a frame: int32 size, then the request header and body. The size
// is checked against Config.MaxRequestBytes before anything is allocated for
// it; a size out of range closes the connection. The header is v1 (key,
// version, correlation ID, nullable client ID), plus a tagged-field section
// (v2) when the API's version is flexible; responses start with the
// correlation ID (v0), plus an empty tagged-field section (v1) when flexible,
// except ApiVersions, which is always v0 so that a client can read it before
// it knows which versions the broker speaks.
//
// Each connection has a reader goroutine, at most MaxInFlightRequests-1
// frames ahead (one, by default), and a serving goroutine that handles requests one at a time and writes each
// response before decoding the next, so responses go out in request order and
// a long-polling Fetch or a JoinGroup holds back that connection's later
// requests, as in Kafka; connections are served concurrently. What cannot be
// answered closes the connection, as Kafka does: an unknown API key, a
// version outside the served range (except ApiVersions, which answers a
// v0-shaped UNSUPPORTED_VERSION listing the ranges so that the client retries
// with one), a body that does not decode, and, as a last resort, a panic in a
// handler (recovered and logged; only that connection closes). An unserved
// key or version is logged at INFO with the API's name, the version and the
// client id (once per connection), so the operator learns which client
// needs what. The requests
// read after one of these are dropped, as Kafka, which reads one request at a
// time, would never have read them. Every other frame read is served, even
// once the client has closed the connection or can no longer be answered: its
// appends and commits happen, only its answer is lost.
//
// # Limits
//
// What clients can make the broker hold is bounded (see Config):
//
//   - Requests: MaxRequestBytes per frame (MaxControlRequestBytes for all
//     but Produce); MaxInFlightRequests read and unanswered per connection;
//     MaxConnectionBytes of frames per connection and MaxQueuedRequestBytes
//     across connections (Kafka's queued.max.request.bytes), both counted at
//     the announced size before a body is read and given back once the
//     request is handled, before its answer is written. A reader that must
//     wait reads nothing, so TCP holds its client back; Produce frames waiting
//     for the broker-wide budget are admitted in order, other requests
//     whenever they fit, so that a JoinGroup never waits behind a Produce.
//   - Time: FrameReadTimeout for the rest of a frame once its size has
//     arrived; WriteTimeout for each response, after which the connection is
//     closed and what its response pinned (buffers, segment files, deleted
//     ones too) is released; MaxIdle (Kafka's connections.max.idle.ms) for a
//     connection with nothing in flight and nothing received.
//   - Connections: MaxConnections.
//   - The log: the warnings a client can trigger (bad sizes, stalls, too many
//     connections, not reading, idle closes) are logged once per kind, then
//     at most once per 10 s with the count of those suppressed.
//
// Server.ConnStats and Server.RequestBudget show what is held.
//
// # One registry, one error table
//
// versions.go lists every served API with its version range and handler, and
// ApiVersions answers from that list, so the broker never advertises a version
// it does not handle; each api_*.go file opens with the versions it serves and
// what they changed. The ranges are wide enough for librdkafka 2.0.2 (kcat),
// franz-go v1.22 and sarama v1.61 with default settings, including the
// minimums librdkafka checks before it enables consumer groups. errors.go is
// the only place where errors become Kafka codes: handlers pass whatever the
// core packages return (wrapped sentinels) through one ordered table.
//
// # Fetch without copies
//
// node.Partition.Read returns Records: a byte range of whole batches in one
// segment file, up to the high watermark the node reports. The
// Fetch response is written by hand (fetch_writer.go): every field but the
// record bytes is known up front, so the size prefix is exact; the fields go
// out through a pooled buffer, and the record bytes go from the file to the
// socket with sendfile(2), given an explicit offset so the file's shared
// offset never moves, with TCP_CORK so the small writes in between do not
// leave as small packets. Files of other file systems (vfs.MemFS), non-TCP
// connections and Config.DisableSendfile take the copy path: ReadAt into the
// same pooled buffer. Neither path allocates per byte served. On loopback the
// kernel copies into the receiving socket anyway, so sendfile saves one copy
// of three; its larger gain is on real NICs (see BenchmarkFetchPath).
//
// A Fetch waits up to MaxWait for MinBytes, never by polling: it registers
// one waiter (package core/wakeup) with every partition it reads, once; an
// append or a high-watermark move fires only the waiters of its partition,
// and the woken fetch re-reads only the partitions that fired, so a fetch
// parked on 10,000 partitions costs an append what one on a single
// partition does. An error in any partition answers at once.
//
// # Fetch sessions
//
// Fetch v7+ may run in an incremental fetch session (KIP-227, package
// transport/fetchsession): the broker remembers the partitions a client
// fetches and their positions, the client sends only what changed, and the
// broker answers only the partitions with something to report (records,
// an error, a new high watermark or log start offset), so an idle consumer
// of thousands of partitions exchanges a few bytes per round trip instead
// of a line per partition each way. Sessions live in a bounded cache
// (Config.FetchSessionSlots, Kafka's 1000 by default) that evicts as
// Kafka's does; followers may use them too.
//
// # Authorization
//
// With Config.Authorizer set, every request is checked against Kafka-style
// ACLs (package core/acl, stored and watched in the coordination store by
// core/acl/aclstore) in one layer, authorize.go, between decoding and the
// handler: per API a pure function of the decoded request and the
// principal's rights (authorize_apis.go) either answers instead of the
// handler, when everything the request names is denied, or removes what is
// denied from the request and adds it, with Kafka's authorization error, to
// the handler's response. Handlers know nothing of ACLs. An API without a
// rule is refused under an authorizer (the connection closes), never let
// through.
//
// # Metrics
//
// Metrics (optional) counts requests and latency per API, bytes in and out,
// open connections, and Fetch requests by session kind with the session
// cache's size and evictions, in the registry it is given (the node's, whose own
// collectors report every partition).
//
// # Security
//
// Each listener has a security protocol (ServeListener, listener.go):
// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. TLS connections finish their
// handshake on the connection's goroutine within the listener's
// HandshakeTimeout before any frame is read; on SSL a verified client
// certificate's subject is the principal. On SASL listeners a connection
// is gated (security.go): only ApiVersions, SaslHandshake and
// SaslAuthenticate are served until its SASL exchange (a value driven by
// those two requests, sasl.go and sasl_scram.go) succeeds; a failure is
// answered, logged and the connection closed, and so is a client that has
// not authenticated within the listener's AuthTimeout. conn.principal() is
// who the client is, for authorization. Fetch on TLS connections keeps sendfile
// where the kernel has TLS offload: a TLS listener with KTLS auto runs
// ktls.SelfTest when it starts, and if it passes each connection hands its
// writes to the kernel after the handshake (security.go enableKTLS; a
// connection whose keys the kernel refuses keeps crypto/tls); otherwise,
// or with KTLS off, Fetch uses the copy path. FetchPaths, the log and
// weir_tls_fetch_path say which and why.
package transport
