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
// Each connection has a reader goroutine, at most one frame ahead, and a
// serving goroutine that handles requests one at a time and writes each
// response before decoding the next, so responses go out in request order and
// a long-polling Fetch or a JoinGroup holds back that connection's later
// requests, as in Kafka; connections are served concurrently. What cannot be
// answered closes the connection, as Kafka does: an unknown API key, a
// version outside the served range (except ApiVersions, which answers a
// v0-shaped UNSUPPORTED_VERSION listing the ranges so that the client retries
// with one), a body that does not decode, and, as a last resort, a panic in a
// handler (recovered and logged; only that connection closes).
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
// A Fetch waits up to MaxWait for MinBytes, woken by the logs' Wait channels
// when something is appended, never by polling; an error in any partition
// answers at once. Fetch sessions are declined (session ID 0), so clients send
// full requests.
//
// # Metrics
//
// Metrics (optional) counts requests and latency per API, bytes in and out
// and open connections, in the registry it is given (the node's, whose own
// collectors report every partition).
package transport
