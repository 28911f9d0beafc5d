package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/ktls"
)

// minFrame is the smallest request frame: key, version, correlation ID and
// the client ID's length (request header v1).
const minFrame = 10

// maxKeptBuf bounds the response buffer a connection keeps between requests.
const maxKeptBuf = 1 << 20

// frameChunk is the first allocation for a request frame's body; it grows
// (doubling) as bytes arrive, so a frame's memory follows what the client
// really sent, not the size it announced.
const frameChunk = 64 << 10

// errClose is the category of everything that closes a connection instead of
// answering: unknown keys and versions, undecodable requests, panics.
var errClose = errors.New("transport: closing connection")

// errWrite wraps the errors of writing a response: the request was served,
// only its answer is lost.
var errWrite = errors.New("transport: writing response")

// conn is one client connection. A reader goroutine reads frames while the
// serving goroutine decodes, handles and answers them one at a time, so
// responses go out in request order, and a long-polling Fetch or a JoinGroup
// holds back that connection's later requests, as in Kafka.
//
// What a connection may hold is bounded (see Config): the reader takes a slot
// before it reads a frame's size and the serving goroutine gives it back once
// the answer is written, so at most MaxInFlightRequests requests are read and
// unanswered; and before reading a frame's body it reserves the frame's size
// against MaxConnectionBytes, then against the broker-wide
// MaxQueuedRequestBytes, both given back once the request is handled. A
// client that sends and never reads its answers thus ends up blocked on TCP:
// its answers fill the socket, the serving goroutine waits to write, the
// reader stops reading, and the kernel's buffers fill, until WriteTimeout.
type conn struct {
	s          *Server
	nc         net.Conn
	raw        syscall.RawConn // for sendfile; nil when unavailable or disabled
	clientHost string          // "/ip", as Kafka reports members' hosts
	ctx        context.Context // cancelled when the connection or server closes
	cancel     context.CancelFunc
	wbuf       []byte // response encoding buffer, reused

	slots chan struct{} // one per request read and not yet answered

	budgetMu sync.Mutex
	reserved int64         // bytes of frames read (or being read) and not yet handled
	released chan struct{} // signalled when reserved goes down

	queued atomic.Int64 // what the connection holds of the broker-wide budget

	frameBytes atomic.Int64 // capacity of the frame buffers held
	respBytes  atomic.Int64 // capacity of the response buffer kept
	held       atomic.Bool  // the reader waits for a slot or for room
	writing    atomic.Int64 // size of the response being written

	// For MaxIdle: requests whose size has arrived and that are not yet
	// answered, and when (Server.now, in Unix nanoseconds) the last request
	// arrived or the last answer went.
	pending    atomic.Int32
	lastActive atomic.Int64
	closing    atomic.Bool // closed by the server (idle): log it once

	// mute (serving goroutine only): answers are no longer written, because
	// the client has gone or its connection was cut; requests already read
	// are still served.
	mute bool
	// loggedUnserved (serving goroutine only): a request for an API or
	// version not served was logged (logUnserved).
	loggedUnserved bool

	lst *Listener    // the listener that accepted the connection (nil: PLAINTEXT); listener.go
	sec connSecurity // who the client is: TLS, SASL (security.go)
	// ktls: the connection's writes go through the kernel's TLS (set by
	// the handshake, before serving; security.go).
	ktls *ktls.Conn
}

// ConnStats is what one connection holds; see Server.ConnStats.
type ConnStats struct {
	Remote string
	// InFlight: requests read (or being read) and not yet answered, at most
	// Config.MaxInFlightRequests.
	InFlight int
	// ReservedBytes: the sizes of those requests not yet handled, as
	// announced, counted against Config.MaxConnectionBytes and
	// Config.MaxQueuedRequestBytes.
	ReservedBytes int64
	// FrameBytes: the memory their frames hold, which grows as a frame's
	// bytes arrive (never past ReservedBytes, unless a recycled Produce
	// buffer is larger).
	FrameBytes int64
	// ResponseBytes: the response encoding buffer kept between requests
	// (at most 1 MiB; Fetch record bytes never pass through it).
	ResponseBytes int64
	// HeldBack: the broker is not reading the connection, waiting for a
	// request to be answered (a free slot) or handled (room for the next
	// frame, in the connection or the broker).
	HeldBack bool
	// WritingBytes: the size of the response being written, 0 between
	// responses. A Fetch response's record bytes are sent from segment
	// files, which stay open (deleted ones too) until it is written or the
	// connection closes, at most Config.WriteTimeout after writing began.
	WritingBytes int64
}

func (c *conn) stats() ConnStats {
	c.budgetMu.Lock()
	reserved := c.reserved
	c.budgetMu.Unlock()
	return ConnStats{Remote: c.nc.RemoteAddr().String(), InFlight: len(c.slots), ReservedBytes: reserved,
		FrameBytes: c.frameBytes.Load(), ResponseBytes: c.respBytes.Load(), HeldBack: c.held.Load(),
		WritingBytes: c.writing.Load()}
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
	c := &conn{s: s, nc: nc, ctx: ctx, cancel: cancel, clientHost: "/",
		slots: make(chan struct{}, s.cfg.MaxInFlightRequests), released: make(chan struct{}, 1)}
	c.touch()
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

// serve runs the connection: the reader goroutine reads frames, this one
// serves them in order. Every frame read is served, even once the client has
// gone or can no longer be answered: the reader closes frames when it stops,
// and until then what it read is handled (its appends and commits happen) and
// only its answer is dropped. The one exception is a request that closes the
// connection itself (see handle): the client is broken, and the requests it
// sent after that one are dropped unserved, as Kafka, which reads one request
// at a time, would never have read them.
func (c *conn) serve() {
	frames := make(chan []byte, c.s.cfg.MaxInFlightRequests)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		c.readLoop(frames)
	}()
	defer func() {
		c.cancel()
		c.nc.Close()
		<-readerDone
		if c.ktls != nil && c.ktls.Refused() {
			c.s.warns.info("transport: closed a kTLS connection: the client asked for a TLS KeyUpdate, which crypto/tls cannot answer once the kernel numbers the records",
				"remote", c.nc.RemoteAddr())
		}
		for frame := range frames { // left by a request that closed the connection
			c.handled(frame)
			c.answered()
		}
		// And what the reader had reserved for a frame it did not finish.
		c.s.budget.release(c.queued.Swap(0))
	}()
	for frame := range frames {
		err := c.handle(frame)
		c.answered()
		switch {
		case err == nil:
		case !errors.Is(err, errWrite):
			c.s.log.Debug("transport: closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			return
		case peerGone(err):
			// The client closed the connection: what it sent before is
			// still read and served, unanswered, until the reader meets
			// the end of it.
			c.s.log.Debug("transport: client gone, serving what it sent", "remote", c.nc.RemoteAddr(), "err", err)
			c.mute = true
		default:
			// The answer cannot be written (its bytes are cut): close the
			// connection, then serve what was read, unanswered.
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.s.warns.warn("transport: client not reading its responses, closing connection",
					"remote", c.nc.RemoteAddr(), "timeout", c.s.cfg.WriteTimeout)
			} else {
				c.s.log.Debug("transport: writing a response failed, closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			}
			c.mute = true
			c.cancel()
			c.nc.Close()
		}
	}
}

// touch notes activity: a request arrived or an answer went.
func (c *conn) touch() { c.lastActive.Store(c.s.now().UnixNano()) }

// idleFor is how long the connection has been idle at now: zero while a
// request is in flight.
func (c *conn) idleFor(now time.Time) time.Duration {
	if c.pending.Load() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, c.lastActive.Load()))
}

// closeIdle closes the connection for having been idle for d (once).
func (c *conn) closeIdle(d time.Duration) {
	if c.closing.Swap(true) {
		return
	}
	c.s.warns.info("transport: closing idle connection", "remote", c.nc.RemoteAddr(), "idle", d, "max_idle", c.s.cfg.MaxIdle)
	c.cancel()
	c.nc.Close()
}

// peerGone reports whether a write failed because the client closed the
// connection (a reset, or writing after one).
func peerGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// readLoop reads size-prefixed frames until the connection fails or a size is
// out of range, which it checks before allocating the frame. Before each frame
// it waits for a free slot (MaxInFlightRequests), and before each body for
// room in MaxConnectionBytes; meanwhile it reads nothing, so a client that
// sends more is held back by TCP. Once a frame's size has arrived, the rest
// must arrive within FrameReadTimeout.
//
// When it ends (the client went away, or sent a bad size) it cancels the
// connection's context, so a request parked in a long poll or a rebalance
// stops waiting instead of holding the connection (and its MaxConnections
// slot) for a client that cannot read the answer. Every frame it read is
// handed on and served: its appends happen, only its waits are cut short.
func (c *conn) readLoop(frames chan<- []byte) {
	defer close(frames)
	defer c.cancel()
	var size [4]byte
	for {
		if !c.takeSlot() {
			return
		}
		if _, err := io.ReadFull(c.nc, size[:]); err != nil {
			return
		}
		c.touch()
		c.pending.Add(1)
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < minFrame || n > c.s.cfg.MaxRequestBytes {
			c.s.warns.warn("transport: request size out of range, closing connection",
				"remote", c.nc.RemoteAddr(), "size", n, "max", c.s.cfg.MaxRequestBytes)
			return
		}
		if t := c.s.cfg.FrameReadTimeout; t > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(t))
		}
		// The API key comes first: every request but Produce has a lower
		// bound, checked before the frame is allocated too.
		var key [2]byte
		if _, err := io.ReadFull(c.nc, key[:]); err != nil {
			c.logStall(err, n)
			return
		}
		k := int16(binary.BigEndian.Uint16(key[:]))
		if k != produceKey && n > c.s.cfg.MaxControlRequestBytes {
			c.s.warns.warn("transport: request too large for its API, closing connection",
				"remote", c.nc.RemoteAddr(), "api_key", k, "size", n, "max", c.s.cfg.MaxControlRequestBytes)
			return
		}
		if !c.reserve(k, int64(n)) {
			return
		}
		if t := c.s.cfg.FrameReadTimeout; t > 0 { // the wait was ours, not the client's
			_ = c.nc.SetReadDeadline(time.Now().Add(t))
		}
		frame, err := c.readBody(k, int(n))
		if err != nil {
			c.logStall(err, n)
			return
		}
		if c.s.cfg.FrameReadTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		c.s.m.received(4 + int(n))
		// Never blocks: frames has room for MaxInFlightRequests, and this
		// frame holds one of as many slots. A frame read is always handed
		// on, so that it is served.
		frames <- frame
	}
}

// readBody reads a frame of n bytes whose 2-byte API key k was read already.
// The buffer starts at frameChunk (or a recycled Produce buffer) and doubles
// as bytes arrive; FrameBytes follows its capacity.
func (c *conn) readBody(k int16, n int) ([]byte, error) {
	frame := newFrame(k, n)
	binary.BigEndian.PutUint16(frame, uint16(k))
	c.frameBytes.Add(int64(cap(frame)))
	for len(frame) < n {
		if len(frame) == cap(frame) {
			grown := make([]byte, len(frame), min(frameCap(k, n), 2*cap(frame)))
			copy(grown, frame)
			c.frameBytes.Add(int64(cap(grown) - cap(frame)))
			frame = grown
		}
		m, err := c.nc.Read(frame[len(frame):min(cap(frame), n)])
		frame = frame[:len(frame)+m]
		if err != nil && len(frame) < n {
			c.frameBytes.Add(-int64(cap(frame)))
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return frame[:n], nil
}

// logStall logs a client that stopped sending in the middle of a frame.
func (c *conn) logStall(err error, size int32) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.s.warns.warn("transport: client stalled in the middle of a request, closing connection",
			"remote", c.nc.RemoteAddr(), "size", size, "timeout", c.s.cfg.FrameReadTimeout)
	}
}

// takeSlot waits for one of the MaxInFlightRequests slots; false when the
// connection ends first.
func (c *conn) takeSlot() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	c.held.Store(true)
	defer c.held.Store(false)
	select {
	case c.slots <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// reserve waits until a frame of n bytes with API key k fits in
// MaxConnectionBytes (a frame alone always fits), then in the broker-wide
// budget, and counts it against both; false when the connection ends first.
// The connection's room comes first: waiting for the broker's while holding
// some of it would make others wait for a connection that waits for itself.
func (c *conn) reserve(k int16, n int64) bool {
	defer c.held.Store(false)
	for {
		c.budgetMu.Lock()
		fits := c.reserved == 0 || c.reserved+n <= c.s.cfg.MaxConnectionBytes
		c.budgetMu.Unlock()
		if fits { // and stays so: only this goroutine adds to reserved
			break
		}
		c.held.Store(true)
		select {
		case <-c.released:
		case <-c.ctx.Done():
			return false
		}
	}
	if !c.s.budget.acquire(c.ctx, n, k != produceKey, func() { c.held.Store(true) }) {
		return false
	}
	c.queued.Add(n)
	c.budgetMu.Lock()
	c.reserved += n
	c.budgetMu.Unlock()
	return true
}

// handled gives back what a frame held once its request is handled, before
// its answer is written (as Kafka frees a request's buffer once its handler
// returns): the buffer (recycled if it is a Produce frame), and its bytes in
// the connection's and the broker's budgets. Called once per frame.
func (c *conn) handled(frame []byte) {
	c.frameBytes.Add(-int64(cap(frame)))
	n := int64(len(frame))
	releaseFrame(frame)
	c.budgetMu.Lock()
	c.reserved -= n
	c.budgetMu.Unlock()
	select {
	case c.released <- struct{}{}:
	default:
	}
	c.queued.Add(-n)
	c.s.budget.release(n)
}

// answered gives back a request's slot once it is answered (or dropped).
func (c *conn) answered() {
	c.touch() // before pending drops, so an idle check never sees it stale
	c.pending.Add(-1)
	<-c.slots
}

// handle decodes, serves and answers one frame, calling handled(frame) once
// the handler returns, before writing the answer. An error closes the
// connection: the frame could not be decoded, names an API or version not
// served (except ApiVersions, which answers those), or the handler panicked;
// or, wrapping errWrite, the answer could not be written.
func (c *conn) handle(frame []byte) (err error) {
	var (
		start = time.Now()
		a     *api
		raw   rawResponse
		done  bool
	)
	// After this the frame's bytes (which the request aliases) may be reused.
	release := func() {
		if !done {
			done = true
			c.handled(frame)
		}
	}
	defer release()
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
	if sm := c.s.cfg.seams; sm != nil && sm.beforeHandle != nil {
		sm.beforeHandle(c.ctx, r.key)
	}
	a = lookupAPI(r.key)
	if a == nil {
		c.logUnserved(r, frame, "weir does not serve this API")
		return fmt.Errorf("%w: unknown API key %d", errClose, r.key)
	}
	if r.version < a.min || r.version > a.max {
		if r.key == apiVersionsKey {
			return c.writeResponse(r.corr, unsupportedApiVersions())
		}
		c.logUnserved(r, frame, fmt.Sprintf("weir serves v%d-v%d", a.min, a.max))
		return fmt.Errorf("%w: %s v%d not served (v%d-v%d)", errClose, kmsg.NameForKey(r.key), r.version, a.min, a.max)
	}
	if err := c.gate(r.key); err != nil {
		return err
	}
	if err := r.decodeBody(frame); err != nil {
		return err
	}
	r.c = c
	a = c.authorized(a, r) // authorize.go: unchanged without an authorizer

	if a.raw != nil {
		raw, err = a.raw(c.ctx, c.s, r)
		release()
		if err != nil {
			return err
		}
		return c.writeRaw(raw, r.corr)
	}
	resp, err := a.handle(c.ctx, c.s, r)
	release()
	if err != nil || resp == nil {
		return err
	}
	if err := c.writeResponse(r.corr, resp); err != nil {
		return err
	}
	return c.afterResponse()
}

// logUnserved says, at INFO and once per connection, that a client asked
// for an API key or version the broker does not serve (the connection then
// closes, as Kafka closes it): the API's name, the version and the client
// id tell the operator which client needs what, where a closed connection
// alone tells the client nothing.
func (c *conn) logUnserved(r *request, frame []byte, served string) {
	if c.loggedUnserved {
		return
	}
	c.loggedUnserved = true
	c.s.log.Info("transport: request for an API or version not served, closing connection",
		"api", kmsg.NameForKey(r.key), "key", r.key, "version", r.version, "served", served,
		"client_id", headerClientID(frame), "remote", c.nc.RemoteAddr())
}

// headerClientID is the client id of a request header (see parseRequest),
// "" when there is none or it does not fit the frame.
func headerClientID(frame []byte) string {
	if len(frame) < 10 {
		return ""
	}
	n := int(int16(binary.BigEndian.Uint16(frame[8:])))
	if n <= 0 || n > len(frame)-10 {
		return ""
	}
	return string(frame[10 : 10+n])
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

// armWrite gives the response about to be written WriteTimeout (the
// system clock's: socket deadlines know no other). sendfile honours it too:
// it waits for the socket through the same poller.
func (c *conn) armWrite() {
	if t := c.s.cfg.WriteTimeout; t > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(t))
	}
}

// writeRaw writes a hand-written response (nothing once the connection is
// mute); errors wrap errWrite.
func (c *conn) writeRaw(raw rawResponse, corr int32) error {
	if c.mute {
		return nil
	}
	if r, ok := raw.(interface{ size() int64 }); ok {
		c.writing.Store(4 + r.size())
		defer c.writing.Store(0)
	}
	c.armWrite()
	if err := raw.writeTo(c, corr); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// writeResponse encodes resp with response header v0 (correlation ID), or v1
// (plus empty tagged fields) for flexible versions except ApiVersions, which
// always uses v0 so that clients can read it before knowing what we serve.
// Once the connection is mute it writes nothing; errors wrap errWrite.
func (c *conn) writeResponse(corr int32, resp kmsg.Response) error {
	if c.mute {
		return nil
	}
	b := append(c.wbuf[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.writing.Store(int64(len(b)))
	c.armWrite()
	_, err := c.nc.Write(b)
	c.writing.Store(0)
	c.s.m.sent(len(b))
	if cap(b) <= maxKeptBuf {
		c.wbuf = b[:0]
	} else {
		c.wbuf = nil
	}
	c.respBytes.Store(int64(cap(c.wbuf)))
	if err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// Produce frames are the large ones, and a fresh zeroed frame per request
// makes the garbage collector run every few requests: they are recycled.
// Nothing keeps a Produce frame after its request is handled (the log copies
// the records into the page cache; kmsg copies strings), which is what makes
// recycling safe; other requests' frames may be kept (group member metadata
// aliases its JoinGroup frame) and are never recycled. A Produce frame's
// capacity is a power of two (frameCap), and producePools[c] holds those of
// minPooledFrame<<c bytes, so a recycled frame fits every request of its
// class: with one pool, a frame grown to exactly its request's size missed
// every larger request after it (a forwarding mirror's, of varying sizes),
// which then grew a fresh frame from frameChunk, copying at each doubling.
var producePools [producePoolClasses]sync.Pool // of *[]byte

const (
	// maxPooledFrame: larger frames are left to the garbage collector.
	maxPooledFrame     = 8 << 20
	minPooledFrame     = 4 << 10
	producePoolClasses = 12 // minPooledFrame<<11 == maxPooledFrame
)

// frameClass is the pool class of a Produce frame of n bytes: the smallest
// c with minPooledFrame<<c >= n, and false above maxPooledFrame.
func frameClass(n int) (int, bool) {
	if n > maxPooledFrame {
		return 0, false
	}
	c := 0
	if n > minPooledFrame {
		c = bits.Len(uint(n-1)) - bits.Len(uint(minPooledFrame-1))
	}
	return c, true
}

// frameCap is the capacity a frame of n bytes grows to: n, or for a pooled
// Produce frame its class's size (below twice n, as the doubling growth
// already allows).
func frameCap(key int16, n int) int {
	if key == produceKey {
		if c, ok := frameClass(n); ok {
			return minPooledFrame << c
		}
	}
	return n
}

// newFrame returns a buffer for a frame of n bytes holding its first two
// (the API key): a recycled Produce buffer large enough for all n, or a
// fresh one of at most frameChunk, which readBody grows as bytes arrive.
func newFrame(key int16, n int) []byte {
	if key == produceKey {
		if c, ok := frameClass(n); ok {
			// Its class, else one of the next two (a frame at most four
			// times the size, which goes back to its own class).
			for i := c; i < min(c+3, producePoolClasses); i++ {
				if p, ok := producePools[i].Get().(*[]byte); ok {
					return (*p)[:2]
				}
			}
		}
	}
	return make([]byte, 2, min(frameCap(key, n), frameChunk))
}

func releaseFrame(frame []byte) {
	if len(frame) < 2 || int16(binary.BigEndian.Uint16(frame)) != produceKey {
		return
	}
	// Only frames of a class's exact size (newFrame's and readBody's).
	if c, ok := frameClass(cap(frame)); ok && cap(frame) == minPooledFrame<<c {
		producePools[c].Put(&frame)
	}
}
