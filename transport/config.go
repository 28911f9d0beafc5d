package transport

import (
	"fmt"
	"io"
	"log/slog"
	"time"
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
	// read, or being read, and not yet answered; counted at their announced
	// size before their body is read). A frame that would pass it waits
	// until earlier ones are answered; one larger than the limit is read
	// alone. With MaxInFlightRequests it bounds a connection's memory: at
	// most max(MaxConnectionBytes, MaxRequestBytes) of frames, plus a
	// response buffer of at most 1 MiB kept between requests and the 256 KiB
	// buffer a Fetch answer is written through. Default
	// DefaultMaxConnectionBytes (64 MiB).
	MaxConnectionBytes int64
	// MaxFetchBytes caps the record bytes of one Fetch response, whatever the
	// request's MaxBytes (the first batch still goes whole, as in Kafka, so
	// consumers make progress). Default DefaultMaxFetchBytes (55 MiB,
	// Kafka's fetch.max.bytes).
	MaxFetchBytes int32
	// FrameReadTimeout: once a request's size has arrived, the rest of it
	// must arrive within this time, or the connection is closed (a client
	// stalled in the middle of a request). A request's memory grows as its
	// bytes arrive, so a stalled one holds only what it sent. Idle
	// connections, between requests, have no timeout. Default
	// DefaultFrameReadTimeout (1 min); negative: no timeout.
	FrameReadTimeout time.Duration
	// DisableSendfile makes Fetch copy record bytes through a buffer (ReadAt,
	// then write) even when the segment is an OS file that could be sent with
	// sendfile. Default false; benchmarks set it to compare the two paths.
	DisableSendfile bool
	// Logger receives connection and request failures. Default: discarded.
	Logger *slog.Logger
	// Metrics receives request, byte and connection counts. Default nil:
	// nothing is counted.
	Metrics *Metrics
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
	case c.MaxFetchBytes == 0:
		c.MaxFetchBytes = DefaultMaxFetchBytes
	case c.MaxFetchBytes < 0:
		return fmt.Errorf("%w: MaxFetchBytes %d is negative", ErrConfig, c.MaxFetchBytes)
	}
	if c.FrameReadTimeout == 0 {
		c.FrameReadTimeout = DefaultFrameReadTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}
