package transport

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/weir-broker/weir/core/acl"
)

// DefaultMaxRequestBytes is the largest request accepted by default: Kafka's
// socket.request.max.bytes.
const DefaultMaxRequestBytes = 100 << 20

// DefaultMaxControlRequestBytes is the default bound on requests other than
// Produce.
const DefaultMaxControlRequestBytes = 4 << 20

// Defaults of the per-connection limits and the fetch cap.
const (
	// DefaultMaxInFlightRequests: one request served, one read ahead.
	DefaultMaxInFlightRequests = 2
	// DefaultMaxConnectionBytes bounds the request bytes one connection
	// holds (a single larger request is still read, alone).
	DefaultMaxConnectionBytes = 64 << 20
	// DefaultMaxFetchBytes is Kafka's fetch.max.bytes (55 MiB).
	DefaultMaxFetchBytes = 55 << 20
	// DefaultFrameReadTimeout: how long the rest of a request may take to
	// arrive once its size has.
	DefaultFrameReadTimeout = time.Minute
	// DefaultWriteTimeout: how long one response may take to be written.
	// Clients give up on a request long before: request.timeout.ms is 30 s
	// (Java, kgo's default plus its overhead), socket.timeout.ms 60 s
	// (librdkafka), so an answer still unwritten after a minute is one its
	// client no longer waits for (or a peer that vanished without a reset).
	// Long enough for the largest Fetch (MaxFetchBytes, 55 MiB) at 1 MiB/s.
	DefaultWriteTimeout = time.Minute
	// DefaultMaxIdle is Kafka's connections.max.idle.ms (10 min).
	DefaultMaxIdle = 10 * time.Minute
	// DefaultMaxQueuedRequestBytes bounds the request bytes all connections
	// hold together (raised to MaxRequestBytes if that is larger). Kafka's
	// queued.max.request.bytes has no bound by default, but here each
	// connection may hold 64 MiB, so a few hundred producers could hold
	// gigabytes. 512 MiB is five requests of the largest size or eight
	// connections at their full MaxConnectionBytes, far more than producers
	// queue in practice (a request of 1 MiB batches each, two in flight),
	// and with the garbage collector's headroom (GOGC=100) about 1 GiB of
	// heap at worst: what a modest broker host can spare.
	DefaultMaxQueuedRequestBytes = 512 << 20
)

// Config configures a Server. The zero value is valid: validate fills the
// defaults named on each field.
type Config struct {
	// MaxRequestBytes: a request frame larger than this closes the connection
	// before anything is allocated for it. Default DefaultMaxRequestBytes
	// (100 MiB, Kafka's socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxControlRequestBytes bounds every request but Produce (the only one
	// that carries data): decoding a hostile request can cost many times its
	// size (an array of empty strings becomes an array of structs), so the
	// requests that need no room for data get little. Default
	// DefaultMaxControlRequestBytes (4 MiB: a Fetch or OffsetCommit of tens of
	// thousands of partitions), at most MaxRequestBytes.
	MaxControlRequestBytes int32
	// MaxConnections: connections accepted beyond this many open ones are
	// closed at once. Default 0: no limit.
	MaxConnections int
	// MaxInFlightRequests: requests a connection may have read and not yet
	// answered, the one being served included. While that many are pending
	// the broker reads nothing more from the connection, so a client that
	// pipelines without reading its answers is held back by TCP, not
	// buffered. Default DefaultMaxInFlightRequests (2: one served, one read
	// ahead); 1 is Kafka's behaviour (a connection is muted while its
	// request is served).
	MaxInFlightRequests int
	// MaxConnectionBytes: the request bytes one connection may hold (frames
	// read, or being read, and not yet handled; counted at their announced
	// size before their body is read, given back when their handler
	// returns, before the answer is written). A frame that would pass it
	// waits until earlier ones are handled; one larger than the limit is
	// read alone. With MaxInFlightRequests it bounds a connection's memory: at
	// most max(MaxConnectionBytes, MaxRequestBytes) of frames, plus a
	// response buffer of at most 1 MiB kept between requests and the 256 KiB
	// buffer a Fetch answer is written through. Default
	// DefaultMaxConnectionBytes (64 MiB).
	MaxConnectionBytes int64
	// MaxQueuedRequestBytes bounds the request bytes of all connections
	// together, like Kafka's queued.max.request.bytes: a frame is counted
	// at its announced size from when that arrives until its request is
	// handled, and a connection whose next frame does not fit reads nothing
	// more (TCP holds its client back) until it does. Waiting Produce
	// frames are admitted in arrival order, so small ones cannot starve a
	// large one; other requests (at most MaxControlRequestBytes, and some,
	// like JoinGroup, finish only when other connections' requests are
	// read) are admitted whenever they fit. A reader never holds budget
	// while it waits, and what a request counts is given back once its
	// handler returns, before its answer is written, so a connection never
	// waits for budget that only its own stalled answer holds. As in Kafka
	// it must be at least MaxRequestBytes, so every frame fits alone.
	// Default DefaultMaxQueuedRequestBytes (512 MiB), or MaxRequestBytes if
	// larger; negative: no bound (Kafka's default).
	MaxQueuedRequestBytes int64
	// MaxFetchBytes caps the record bytes of one Fetch response, whatever the
	// request's MaxBytes (the first batch still goes whole, as in Kafka, so
	// consumers make progress). Default DefaultMaxFetchBytes (55 MiB,
	// Kafka's fetch.max.bytes).
	MaxFetchBytes int32
	// FrameReadTimeout: once a request's size has arrived, the rest of it
	// must arrive within this time, or the connection is closed (a client
	// stalled in the middle of a request). A request's memory grows as its
	// bytes arrive, so a stalled one holds only what it sent. Between
	// requests MaxIdle applies instead. Default
	// DefaultFrameReadTimeout (1 min); negative: no timeout.
	FrameReadTimeout time.Duration
	// WriteTimeout: each response must be written within this time, or the
	// connection is closed, releasing everything it held (the response's
	// buffers and the segment files a Fetch sends from, deleted ones
	// included). It starts when writing starts, so a long poll or a
	// rebalance may wait longer; it bounds a client that stops reading.
	// Kafka has none, and relies on its idle close (which a stalled write
	// also trips after connections.max.idle.ms). Default DefaultWriteTimeout
	// (1 min); negative: no timeout.
	WriteTimeout time.Duration
	// MaxIdle: a connection with no request in flight that has received
	// nothing (and sent no answer) for this long is closed, like Kafka's
	// connections.max.idle.ms. Requests in flight (a long poll, a JoinGroup
	// waiting for its group, a response being written) keep it open.
	// Checked every MaxIdle/10 or every second, whichever is more often, so
	// a connection is closed less than that after MaxIdle. Default
	// DefaultMaxIdle (10 min); negative: never.
	MaxIdle time.Duration
	// FetchSessionSlots is the most incremental fetch sessions (KIP-227,
	// Fetch v7+) the broker keeps, Kafka's
	// max.incremental.fetch.session.cache.slots; a full new one evicts as
	// Kafka does (package fetchsession). Default
	// fetchsession.DefaultSlots (1000); negative: none, so every client
	// sends full requests.
	FetchSessionSlots int
	// FetchSessionEvictionAge: a fetch session unused this long may be
	// evicted by any new one, and one created this long ago by a more
	// valuable one (Kafka's min.incremental.fetch.session.eviction.ms).
	// Default fetchsession.DefaultEvictionAge (2 min).
	FetchSessionEvictionAge time.Duration
	// DisableSendfile makes Fetch copy record bytes through a buffer (ReadAt,
	// then write) even when the segment is an OS file that could be sent with
	// sendfile. Default false; benchmarks set it to compare the two paths.
	DisableSendfile bool
	// Logger receives connection and request failures. Default: discarded.
	Logger *slog.Logger
	// Metrics receives request, byte and connection counts. Default nil:
	// nothing is counted.
	Metrics *Metrics
	// SASL configures authentication on the SASL listeners
	// (ServeListener); the zero value offers no mechanism, which only
	// listeners without SASL accept.
	SASL SASLConfig

	// Authorizer turns on ACL checks (authorize.go) with these super users
	// and allow.everyone.if.no.acl.found; the ACLs are read from and
	// watched in the node's coordination store. Default nil: no
	// authorizer, every request allowed (Kafka without
	// authorizer.class.name), and the ACL APIs answer SECURITY_DISABLED.
	Authorizer *acl.Config

	seams *seams // tests only
}

func (c *Config) validate() error {
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxRequestBytes < minFrame {
		return fmt.Errorf("%w: MaxRequestBytes %d below %d", ErrConfig, c.MaxRequestBytes, minFrame)
	}
	if c.MaxControlRequestBytes == 0 {
		c.MaxControlRequestBytes = DefaultMaxControlRequestBytes
	}
	if c.MaxControlRequestBytes < minFrame {
		return fmt.Errorf("%w: MaxControlRequestBytes %d below %d", ErrConfig, c.MaxControlRequestBytes, minFrame)
	}
	c.MaxControlRequestBytes = min(c.MaxControlRequestBytes, c.MaxRequestBytes)
	if c.MaxConnections < 0 {
		return fmt.Errorf("%w: MaxConnections %d is negative", ErrConfig, c.MaxConnections)
	}
	switch {
	case c.MaxInFlightRequests == 0:
		c.MaxInFlightRequests = DefaultMaxInFlightRequests
	case c.MaxInFlightRequests < 0:
		return fmt.Errorf("%w: MaxInFlightRequests %d is negative", ErrConfig, c.MaxInFlightRequests)
	}
	switch {
	case c.MaxConnectionBytes == 0:
		c.MaxConnectionBytes = DefaultMaxConnectionBytes
	case c.MaxConnectionBytes < 0:
		return fmt.Errorf("%w: MaxConnectionBytes %d is negative", ErrConfig, c.MaxConnectionBytes)
	}
	switch {
	case c.MaxQueuedRequestBytes == 0:
		c.MaxQueuedRequestBytes = max(DefaultMaxQueuedRequestBytes, int64(c.MaxRequestBytes))
	case c.MaxQueuedRequestBytes > 0 && c.MaxQueuedRequestBytes < int64(c.MaxRequestBytes):
		return fmt.Errorf("%w: MaxQueuedRequestBytes %d below MaxRequestBytes %d", ErrConfig,
			c.MaxQueuedRequestBytes, c.MaxRequestBytes)
	}
	switch {
	case c.MaxFetchBytes == 0:
		c.MaxFetchBytes = DefaultMaxFetchBytes
	case c.MaxFetchBytes < 0:
		return fmt.Errorf("%w: MaxFetchBytes %d is negative", ErrConfig, c.MaxFetchBytes)
	}
	if c.FrameReadTimeout == 0 {
		c.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = DefaultMaxIdle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := c.SASL.validate(); err != nil {
		return err
	}
	return nil
}
