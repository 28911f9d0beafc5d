package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// minFrame is the smallest request frame: key, version, correlation ID and
// the client ID's length (request header v1).
const minFrame = 10

// maxKeptBuf bounds the response buffer a connection keeps between requests.
const maxKeptBuf = 1 << 20

// errClose is the category of everything that closes a connection instead of
// answering: unknown keys and versions, undecodable requests, panics.
var errClose = errors.New("transport: closing connection")

// conn is one client connection. A reader goroutine reads frames (at most
// one ahead) while the serving goroutine decodes, handles and answers them one
// at a time, so responses go out in request order, and a long-polling Fetch or
// a JoinGroup holds back that connection's later requests, as in Kafka.
type conn struct {
	s          *Server
	nc         net.Conn
	raw        syscall.RawConn // for sendfile; nil when unavailable or disabled
	clientHost string          // "/ip", as Kafka reports members' hosts
	ctx        context.Context // cancelled when the connection or server closes
	cancel     context.CancelFunc
	wbuf       []byte // response encoding buffer, reused
}

// request is one decoded request.
type request struct {
	key, version int16
	corr         int32
	clientID     string
	body         kmsg.Request
	c            *conn
}

// rawResponse is a response written by hand rather than encoded by kmsg.
type rawResponse interface {
	// writeTo writes the whole frame (size, response header, body).
	writeTo(c *conn, corr int32) error
	// release frees what the response holds; called once, written or not.
	release()
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, clientHost: "/"}
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.clientHost += host
	}
	if sc, ok := nc.(syscall.Conn); ok && sendfileSupported && !s.cfg.DisableSendfile {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return c
}

func (c *conn) serve() {
	frames := make(chan []byte)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		c.readLoop(frames)
	}()
	defer func() {
		c.cancel()
		c.nc.Close()
		<-readerDone
	}()
	for {
		select {
		case frame, ok := <-frames:
			if !ok {
				return
			}
			err := c.handle(frame)
			releaseFrame(frame)
			if err != nil {
				c.s.log.Debug("transport: closing connection", "remote", c.nc.RemoteAddr(), "err", err)
				return
			}
		case <-c.ctx.Done():
			return
		}
	}
}

// readLoop reads size-prefixed frames until the connection fails or a size is
// out of range, which it checks before allocating the frame.
//
// When it ends (the client went away, or sent a bad size) it cancels the
// connection's context, so a request parked in a long poll or a rebalance
// stops waiting instead of holding the connection (and its MaxConnections
// slot) for a client that cannot read the answer. A frame already handed on
// is still served: its appends happen, only its waits are cut short.
func (c *conn) readLoop(frames chan<- []byte) {
	defer close(frames)
	defer c.cancel()
	var size [4]byte
	for {
		if _, err := io.ReadFull(c.nc, size[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < minFrame || n > c.s.cfg.MaxRequestBytes {
			c.s.log.Warn("transport: request size out of range, closing connection",
				"remote", c.nc.RemoteAddr(), "size", n, "max", c.s.cfg.MaxRequestBytes)
			return
		}
		// The API key comes first: every request but Produce has a lower
		// bound, checked before the frame is allocated too.
		var key [2]byte
		if _, err := io.ReadFull(c.nc, key[:]); err != nil {
			return
		}
		if k := int16(binary.BigEndian.Uint16(key[:])); k != produceKey && n > c.s.cfg.MaxControlRequestBytes {
			c.s.log.Warn("transport: request too large for its API, closing connection",
				"remote", c.nc.RemoteAddr(), "api_key", k, "size", n, "max", c.s.cfg.MaxControlRequestBytes)
			return
		}
		frame := newFrame(int16(binary.BigEndian.Uint16(key[:])), int(n))
		copy(frame, key[:])
		if _, err := io.ReadFull(c.nc, frame[2:]); err != nil {
			return
		}
		c.s.m.received(4 + int(n))
		select {
		case frames <- frame:
		case <-c.ctx.Done():
			return
		}
	}
}

// handle decodes, serves and answers one frame. An error closes the
// connection: the frame could not be decoded, names an API or version not
// served (except ApiVersions, which answers those), or the handler panicked.
func (c *conn) handle(frame []byte) (err error) {
	var (
		start = time.Now()
		a     *api
		raw   rawResponse
	)
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("transport: panic serving request, closing connection",
				"remote", c.nc.RemoteAddr(), "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: panic: %v", errClose, p)
		}
		if raw != nil {
			raw.release()
		}
		if a != nil {
			c.s.m.request(a.key, time.Since(start), err != nil)
		}
	}()

	r, err := parseRequest(frame)
	if err != nil {
		return err
	}
	a = lookupAPI(r.key)
	if a == nil {
		return fmt.Errorf("%w: unknown API key %d", errClose, r.key)
	}
	if r.version < a.min || r.version > a.max {
		if r.key == apiVersionsKey {
			return c.writeResponse(r.corr, unsupportedApiVersions())
		}
		return fmt.Errorf("%w: %s v%d not served (v%d-v%d)", errClose, kmsg.NameForKey(r.key), r.version, a.min, a.max)
	}
	if err := r.decodeBody(frame); err != nil {
		return err
	}
	r.c = c

	if a.raw != nil {
		raw, err = a.raw(c.ctx, c.s, r)
		if err != nil {
			return err
		}
		return raw.writeTo(c, r.corr)
	}
	resp, err := a.handle(c.ctx, c.s, r)
	if err != nil || resp == nil {
		return err
	}
	return c.writeResponse(r.corr, resp)
}

// parseRequest reads a request header (v1, or v2 for flexible versions):
//
//	key int16 | version int16 | correlationID int32 | clientID nullable string (int16 length) | [tagged fields, v2]
//
// It reads the fixed part only; decodeBody reads the client ID, the tagged
// fields and the body once the version is known to be served.
func parseRequest(frame []byte) (*request, error) {
	if len(frame) < minFrame {
		return nil, fmt.Errorf("%w: frame of %d bytes", errClose, len(frame))
	}
	r := &request{
		key:     int16(binary.BigEndian.Uint16(frame[0:])),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corr:    int32(binary.BigEndian.Uint32(frame[4:])),
	}
	return r, nil
}

// decodeBody reads the client ID and header tags, then the body at r.version.
func (r *request) decodeBody(frame []byte) error {
	b := frame[8:]
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if n > len(b) || n < -1 {
		return fmt.Errorf("%w: bad client ID length %d", errClose, n)
	}
	if n > 0 {
		r.clientID = string(b[:n])
		b = b[n:]
	}
	body := kmsg.RequestForKey(r.key)
	body.SetVersion(r.version)
	if body.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return err
		}
	}
	if err := body.ReadFrom(b); err != nil {
		return fmt.Errorf("%w: decoding %s v%d: %v", errClose, kmsg.NameForKey(r.key), r.version, err)
	}
	r.body = body
	return nil
}

// skipTags skips a tagged-field section: a count, then per field a tag and a
// size (unsigned varints) and size bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tagged fields", errClose)
	}
	b = b[n:]
	for range count {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad tag", errClose)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: bad tag size", errClose)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// writeResponse encodes resp with response header v0 (correlation ID), or v1
// (plus empty tagged fields) for flexible versions except ApiVersions, which
// always uses v0 so that clients can read it before knowing what we serve.
func (c *conn) writeResponse(corr int32, resp kmsg.Response) error {
	b := append(c.wbuf[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := c.nc.Write(b)
	c.s.m.sent(len(b))
	if cap(b) <= maxKeptBuf {
		c.wbuf = b[:0]
	} else {
		c.wbuf = nil
	}
	return err
}

// Produce frames are the large ones, and a fresh zeroed frame per request
// makes the garbage collector run every few requests: they are recycled.
// Nothing keeps a Produce frame after its request is answered (the log copies
// the records into the page cache; kmsg copies strings), which is what makes
// recycling safe; other requests' frames may be kept (group member metadata
// aliases its JoinGroup frame) and are never recycled.
var producePool sync.Pool // of *[]byte

// maxPooledFrame: larger frames are left to the garbage collector.
const maxPooledFrame = 8 << 20

func newFrame(key int16, n int) []byte {
	if key == produceKey && n <= maxPooledFrame {
		if p, ok := producePool.Get().(*[]byte); ok && cap(*p) >= n {
			return (*p)[:n]
		}
		return make([]byte, n, max(n, 64<<10))
	}
	return make([]byte, n)
}

func releaseFrame(frame []byte) {
	if len(frame) >= 2 && int16(binary.BigEndian.Uint16(frame)) == produceKey && cap(frame) <= maxPooledFrame {
		producePool.Put(&frame)
	}
}
