package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The client's connection: one request at a time, written and read by the
// caller's goroutine (the fetcher's), its response read into a buffer the
// client keeps. A follower sends a Fetch every time the last one answers,
// hundreds a second under load, each answer up to replica.fetch.max.bytes
// per partition: a fresh zeroed buffer per answer (what a general client
// does) costs more CPU than decoding it, and makes the collector run every
// few fetches.

const (
	// connIdle: a connection unused this long is closed before the next
	// request and a new one dialed, so that the leader's idle timeout
	// (connections.max.idle.ms, 10 min by default) never closes one under a
	// request.
	connIdle = time.Minute
	// keptBuffer: a response buffer up to this size is kept for the next
	// response; a larger one (a follower catching up, with many partitions)
	// goes to the garbage collector.
	keptBuffer = 4 << 20
	// maxResponse bounds the size a response may announce.
	maxResponse = 1 << 30
	dialTimeout = 10 * time.Second
)

// errBadResponse: a response that does not match its request.
var errBadResponse = errors.New("peer: bad response")

// roundTrip sends req and reads its response into c.rbuf, decoding it with
// kmsg: byte fields of the response (Fetch's records) alias c.rbuf, valid
// until the next request. Any error closes the connection; the next request
// dials again. ctx bounds the whole exchange.
func (c *Client) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.connLocked(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.exchangeLocked(ctx, conn, req)
	if err != nil {
		c.drop(conn)
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return nil, err
	}
	c.lastUsed = time.Now()
	return resp, nil
}

// connLocked returns the connection, dialed if there is none or the one
// there was idle too long. c.mu held.
func (c *Client) connLocked(ctx context.Context) (net.Conn, error) {
	c.connMu.Lock()
	conn := c.conn
	c.connMu.Unlock()
	if conn != nil && time.Since(c.lastUsed) > connIdle {
		c.drop(conn)
		conn = nil
	}
	if conn != nil {
		return conn, nil
	}
	if c.closed.Load() {
		return nil, net.ErrClosed
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var err error
	if c.dial != nil {
		conn, err = c.dial(dctx, "tcp", c.addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(dctx, "tcp", c.addr)
	}
	if err != nil {
		return nil, err
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.closed.Load() { // closed while dialing
		conn.Close()
		return nil, net.ErrClosed
	}
	c.conn, c.lastUsed = conn, time.Now()
	return conn, nil
}

// drop closes conn, and forgets it if it is the client's.
func (c *Client) drop(conn net.Conn) {
	conn.Close()
	c.connMu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.connMu.Unlock()
}

func (c *Client) exchangeLocked(ctx context.Context, conn net.Conn, req kmsg.Request) (kmsg.Response, error) {
	// ctx's end interrupts the exchange through the deadline.
	if d, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(d); err != nil {
			return nil, err
		}
	} else if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	c.corr++
	corr := c.corr
	// Request header v1 (v2 adds tagged fields for flexible versions).
	w := append(c.wbuf[:0], 0, 0, 0, 0)
	w = binary.BigEndian.AppendUint16(w, uint16(req.Key()))
	w = binary.BigEndian.AppendUint16(w, uint16(req.GetVersion()))
	w = binary.BigEndian.AppendUint32(w, uint32(corr))
	w = binary.BigEndian.AppendUint16(w, uint16(len(c.clientID)))
	w = append(w, c.clientID...)
	if req.IsFlexible() {
		w = append(w, 0)
	}
	w = req.AppendTo(w)
	binary.BigEndian.PutUint32(w, uint32(len(w)-4))
	c.wbuf = w
	if _, err := conn.Write(w); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}

	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > maxResponse {
		return nil, fmt.Errorf("%w: size %d", errBadResponse, n)
	}
	buf := c.rbuf
	if cap(buf) < n {
		// Grown geometrically (within keptBuffer), so that fetches
		// growing a little at a time do not allocate each time.
		buf = make([]byte, n, max(n, min(2*cap(buf), keptBuffer)))
		if n <= keptBuffer {
			c.rbuf = buf
		}
	}
	buf = buf[:n]
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, sent %d", errBadResponse, got, corr)
	}
	body := buf[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		// Response header v1: tagged fields, which we skip.
		rd := kbin.Reader{Src: body}
		for range rd.Uvarint() {
			rd.Uvarint()               // tag
			rd.Span(int(rd.Uvarint())) // its bytes
		}
		if !rd.Ok() {
			return nil, fmt.Errorf("%w: header tags", errBadResponse)
		}
		body = rd.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errBadResponse, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
