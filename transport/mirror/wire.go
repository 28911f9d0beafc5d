package mirror

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// The forwarder's own connections. Forwarding moves bytes it never reads,
// and on a machine of two cores the copies a general client makes of them
// were a fifth of the mirror's CPU: kgo reads each response into a new
// buffer (zeroed first, 0.15 s of CPU a GB) and copies each batch into the
// request it writes (0.15 s/GB more). A wireConn reads Fetch answers into
// recycled buffers (wirePool) that the batches queued from them keep
// (wireBuf references), and writes a Produce request with one writev of
// its header pieces and the batches in place. It speaks just what the
// forwarder needs: ApiVersions, SASL, Fetch and Produce, requests written
// in order and answers read in order (as Kafka serves a connection). The
// dialer (TLS included), SASL mechanisms and client id are those of the
// mirror's kgo client of the same cluster, which also keeps answering
// metadata and the other requests.

const (
	wireFetchMax   = 12 // the newest Fetch sent (13 on name topics by id only)
	wireProduceMax = 11 // the newest Produce sent (13 names topics by id)
	wireProduceMin = 3  // record batches (magic 2)
	// wireMaxResponse: an answer announcing more is a broken stream.
	wireMaxResponse = 1 << 30
	wireMinClass    = 16 // 64 KiB: the smallest buffer class
	wirePending     = 64 // requests in flight on a connection
	wireClientName  = "weir-mirror"
	wireIdle        = time.Minute // a connection idle for longer is dialled again
)

var errWireClosed = errors.New("mirror: connection closed")

// wireBuf is a buffer an answer was read into. Whoever keeps a slice of it
// holds a reference (ref) and gives it back (release); the last release
// recycles it. A nil wireBuf (a buffer not from a pool) ignores both.
type wireBuf struct {
	b    []byte
	refs atomic.Int32
	pool *bufPool
}

func (w *wireBuf) ref() {
	if w != nil {
		w.refs.Add(1)
	}
}

func (w *wireBuf) release() {
	if w == nil {
		return
	}
	switch n := w.refs.Add(-1); {
	case n == 0:
		w.pool.put(w)
	case n < 0:
		panic("mirror: wire buffer released more often than referenced")
	}
}

// bufPool recycles wireBufs in power-of-two classes, so that a buffer is
// zeroed once, when it is first made, not at every answer. It is the
// process's (wireBufs): buffers idle through two garbage collections go
// (sync.Pool).
type bufPool struct {
	classes [40]sync.Pool
	// scribble (tests): a buffer is overwritten when recycled, so that a
	// slice of it still read after its last release shows.
	scribble bool
}

var wireBufs = &bufPool{}

func sizeClass(n int) int {
	if n <= 1<<wireMinClass {
		return wireMinClass
	}
	return bits.Len(uint(n - 1))
}

// get returns a buffer of n bytes holding one reference.
func (p *bufPool) get(n int) *wireBuf {
	c := sizeClass(n)
	w, _ := p.classes[c].Get().(*wireBuf)
	if w == nil {
		w = &wireBuf{b: make([]byte, 0, 1<<c), pool: p}
	}
	w.b = w.b[:n]
	w.refs.Store(1)
	return w
}

func (p *bufPool) put(w *wireBuf) {
	if p.scribble {
		for i := range w.b {
			w.b[i] = 0xdb
		}
	}
	p.classes[sizeClass(cap(w.b))].Put(w)
}

// wireCall is a request written and its answer: resp is the answer after
// its header, in buf (one reference, the caller's to release).
type wireCall struct {
	corr     int32
	flexible bool // the answer's header has tagged fields
	deadline time.Time
	buf      *wireBuf
	resp     []byte
	err      error
	done     chan struct{}
}

// wait returns once the answer came, or the connection failed, or ctx
// ended (the call's buffer is then left to the garbage collector).
func (c *wireCall) wait(ctx context.Context) ([]byte, *wireBuf, error) {
	select {
	case <-c.done:
		return c.resp, c.buf, c.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// wireConn is one connection to one broker.
type wireConn struct {
	addr string
	id   string // client id
	conn net.Conn
	last atomic.Int64  // unix nanoseconds of the last request written
	tcp  bool          // writes are one writev (net.Buffers)
	bw   *bufio.Writer // otherwise (TLS, a test's dialer) through a buffer
	br   *bufio.Reader
	pool *bufPool
	fmt  *kmsg.RequestFormatter
	max  map[int16]int16 // the broker's newest version of each key

	wmu     sync.Mutex // writes, and the order of pending
	corr    int32
	pending chan *wireCall

	failOnce sync.Once
	dead     chan struct{} // closed when the connection failed: err says why
	err      error
}

// wireOptions are what the forwarder's connections to a cluster take from
// the mirror's kgo client of it.
type wireOptions struct {
	dial     func(ctx context.Context, network, host string) (net.Conn, error)
	sasls    []sasl.Mechanism
	clientID string
}

func wireOptionsOf(cl *kgo.Client) wireOptions {
	o := wireOptions{clientID: wireClientName}
	if fn, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok && fn != nil {
		o.dial = fn
	} else {
		o.dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok {
		o.sasls = ms
	}
	if v := cl.OptValues(kgo.ClientID); len(v) == 2 {
		if set, _ := v[1].(bool); set {
			o.clientID, _ = v[0].(string)
		}
	}
	return o
}

// dialWire connects to addr, learns the broker's versions and
// authenticates.
func dialWire(ctx context.Context, addr string, o wireOptions, pool *bufPool) (*wireConn, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	nc, err := o.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &wireConn{addr: addr, id: o.clientID, conn: nc, br: bufio.NewReaderSize(nc, 64<<10), pool: pool,
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(o.clientID)), max: map[int16]int16{},
		pending: make(chan *wireCall, wirePending), dead: make(chan struct{})}
	if _, ok := nc.(*net.TCPConn); ok {
		c.tcp = true
	} else {
		c.bw = bufio.NewWriterSize(nc, 64<<10)
	}
	go c.readLoop()
	stop := context.AfterFunc(ctx, func() { c.fail(ctx.Err()) })
	defer stop()
	if err := c.handshake(ctx, o); err != nil {
		c.fail(err)
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	return c, nil
}

// handshake asks the broker's versions (ApiVersions) and runs SASL.
func (c *wireConn) handshake(ctx context.Context, o wireOptions) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, wireClientName, "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	err := c.roundTrip(ctx, req, resp)
	var unsupported *wireUnsupported
	if errors.As(err, &unsupported) {
		// An older broker answers in v0 with what it supports.
		req.Version = 0
		resp = kmsg.NewPtrApiVersionsResponse()
		err = c.roundTrip(ctx, req, resp)
	}
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	for _, k := range resp.ApiKeys {
		c.max[k.ApiKey] = k.MaxVersion
	}
	if len(o.sasls) == 0 {
		return nil
	}
	return c.sasl(ctx, o.sasls)
}

// sasl authenticates with the first of ms the broker takes (SaslHandshake
// v1, then SaslAuthenticate until the mechanism is done, as KIP-152).
func (c *wireConn) sasl(ctx context.Context, ms []sasl.Mechanism) error {
	if v, ok := c.max[17]; !ok || v < 1 {
		return errors.New("SASL: the broker has no SaslHandshake v1")
	}
	mech := ms[0]
	for tried := map[string]bool{}; ; {
		tried[mech.Name()] = true
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, mech.Name()
		resp := kmsg.NewPtrSASLHandshakeResponse()
		if err := c.roundTrip(ctx, req, resp); err != nil {
			return fmt.Errorf("SaslHandshake: %w", err)
		}
		err := kerr.ErrorForCode(resp.ErrorCode)
		if err == nil {
			break
		}
		next := mech
		if errors.Is(err, kerr.UnsupportedSaslMechanism) {
			for _, m := range ms {
				for _, s := range resp.SupportedMechanisms {
					if s == m.Name() && !tried[s] && next == mech {
						next = m
					}
				}
			}
		}
		if next == mech {
			return fmt.Errorf("SaslHandshake %s: %w", mech.Name(), err)
		}
		mech = next
	}
	session, out, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", mech.Name(), err)
	}
	for done := false; !done || len(out) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = min(c.max[36], 2), out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.roundTrip(ctx, req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("SASL %s: %w: %s", mech.Name(), err, *resp.ErrorMessage)
			}
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
		if done {
			break // the server's last word after the mechanism finished
		}
		if done, out, err = session.Challenge(resp.SASLAuthBytes); err != nil {
			return fmt.Errorf("SASL %s: %w", mech.Name(), err)
		}
	}
	return nil
}

// roundTrip sends req and decodes its answer into resp (given the
// request's version).
func (c *wireConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	call := c.send(net.Buffers{c.fmt.AppendRequest(nil, req, 0)}, req.IsFlexible() && req.Key() != 18,
		time.Now().Add(requestTimeout))
	b, buf, err := call.wait(ctx)
	if err != nil {
		return err
	}
	// Decoded from a copy: the byte fields of an answer (SASL's
	// challenges) are slices of what it is decoded from, read by the
	// caller after the buffer is recycled.
	b = bytes.Clone(b)
	buf.release()
	if req.Key() == 18 && len(b) >= 2 && int16(binary.BigEndian.Uint16(b)) == kerr.UnsupportedVersion.Code {
		// ApiVersions of a version the broker does not know is answered
		// in v0, whatever was asked.
		return &wireUnsupported{}
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(b)
}

// wireUnsupported: the broker does not know the ApiVersions version sent.
type wireUnsupported struct{}

func (*wireUnsupported) Error() string { return kerr.UnsupportedVersion.Error() }

// send writes a request (bufs, its first piece starting with the size and
// header, correlation id 0, which send sets) and returns its call. A
// failure to write fails the connection, and the call with it.
func (c *wireConn) send(bufs net.Buffers, flexible bool, deadline time.Time) *wireCall {
	call := &wireCall{flexible: flexible, deadline: deadline, done: make(chan struct{})}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.dead:
		call.err = c.err
		close(call.done)
		return call
	default:
	}
	c.corr++
	call.corr = c.corr
	c.last.Store(time.Now().UnixNano())
	binary.BigEndian.PutUint32(bufs[0][8:12], uint32(call.corr))
	select {
	case c.pending <- call:
	case <-c.dead:
		call.err = c.err
		close(call.done)
		return call
	}
	c.conn.SetWriteDeadline(deadline)
	var err error
	if c.tcp {
		_, err = bufs.WriteTo(c.conn)
	} else {
		for _, b := range bufs {
			if _, err = c.bw.Write(b); err != nil {
				break
			}
		}
		if err == nil {
			err = c.bw.Flush()
		}
	}
	if err != nil {
		c.fail(fmt.Errorf("write to %s: %w", c.addr, err))
	}
	return call
}

// fail closes the connection for good: the calls in flight, and any sent
// after, fail with err.
func (c *wireConn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.dead)
		c.conn.Close()
	})
}

func (c *wireConn) failed() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// readLoop reads the answers, in the order the requests were written.
func (c *wireConn) readLoop() {
	defer func() {
		c.wmu.Lock() // no call joins pending meanwhile: send sees dead
		defer c.wmu.Unlock()
		for {
			select {
			case call := <-c.pending:
				call.err = c.err
				close(call.done)
			default:
				return
			}
		}
	}()
	for {
		var call *wireCall
		select {
		case call = <-c.pending:
		case <-c.dead:
			return
		}
		buf, resp, err := c.read(call)
		if err != nil {
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			call.err = c.err
			close(call.done)
			return
		}
		call.buf, call.resp = buf, resp
		close(call.done)
	}
}

// read reads call's answer.
func (c *wireConn) read(call *wireCall) (*wireBuf, []byte, error) {
	c.conn.SetReadDeadline(call.deadline)
	var hdr [8]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > wireMaxResponse {
		return nil, nil, fmt.Errorf("answer of %d bytes", size)
	}
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != call.corr {
		return nil, nil, fmt.Errorf("answer to request %d, want %d", corr, call.corr)
	}
	buf := c.pool.get(int(size) - 4)
	if _, err := io.ReadFull(c.br, buf.b); err != nil {
		buf.release()
		return nil, nil, err
	}
	b := buf.b
	if call.flexible {
		var err error
		if b, err = skipTags(b); err != nil {
			buf.release()
			return nil, nil, err
		}
	}
	return buf, b, nil
}

// skipTags returns b after a tagged-fields section.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tagged fields in an answer's header")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tagged fields in an answer's header")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errors.New("bad tagged fields in an answer's header")
		}
		b = b[k+int(l):]
	}
	return b, nil
}

// fetch sends req (its version set here) and returns the answer, whose
// record bytes are in buf (one reference, the caller's).
func (c *wireConn) fetch(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, *wireBuf, error) {
	v, ok := c.max[req.Key()]
	if !ok || v < 4 {
		return nil, nil, fmt.Errorf("%s: the broker has no Fetch v4 or newer", c.addr)
	}
	req.Version = min(v, wireFetchMax)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	call := c.send(net.Buffers{c.fmt.AppendRequest(nil, req, 0)}, req.IsFlexible(), time.Now().Add(wait+requestTimeout))
	b, buf, err := call.wait(ctx)
	if err != nil {
		return nil, nil, err
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(b); err != nil {
		buf.release()
		c.fail(fmt.Errorf("%s: bad Fetch answer: %w", c.addr, err))
		return nil, nil, c.err
	}
	return resp, buf, nil
}

// produceVersion is the Produce version the connection sends.
func (c *wireConn) produceVersion() (int16, error) {
	v, ok := c.max[0]
	if !ok || v < wireProduceMin {
		return 0, fmt.Errorf("%s: the broker has no Produce v%d or newer", c.addr, wireProduceMin)
	}
	return min(v, wireProduceMax), nil
}

// wireProduce is a Produce request being built: the batches added are
// written where they are, between the bytes encode makes around them.
type wireProduce struct {
	version int16
	topics  []wireTopic
}

type wireTopic struct {
	name  string
	parts []wirePart
}

type wirePart struct {
	partition int32
	records   []byte
}

// add adds a batch of topic/partition (the topics in the order first
// added).
func (p *wireProduce) add(topic string, partition int32, records []byte) {
	for i := range p.topics {
		if p.topics[i].name == topic {
			p.topics[i].parts = append(p.topics[i].parts, wirePart{partition, records})
			return
		}
	}
	p.topics = append(p.topics, wireTopic{name: topic, parts: []wirePart{{partition, records}}})
}

// encode returns the request's pieces: the size and header (correlation
// id 0), the body's bytes, and the batches between them.
func (p *wireProduce) encode(clientID string, acks int16, timeoutMs int32) net.Buffers {
	flex := p.version >= 9
	m := make([]byte, 4, 256)
	m = binary.BigEndian.AppendUint16(m, 0) // Produce
	m = binary.BigEndian.AppendUint16(m, uint16(p.version))
	m = binary.BigEndian.AppendUint32(m, 0) // correlation id
	m = binary.BigEndian.AppendUint16(m, uint16(len(clientID)))
	m = append(m, clientID...)
	if flex {
		m = append(m, 0) // header tags
	}
	count := func(n int) {
		if flex {
			m = binary.AppendUvarint(m, uint64(n)+1)
		} else {
			m = binary.BigEndian.AppendUint32(m, uint32(n))
		}
	}
	if flex {
		m = append(m, 0) // transactional id: null
	} else {
		m = binary.BigEndian.AppendUint16(m, 0xffff)
	}
	m = binary.BigEndian.AppendUint16(m, uint16(acks))
	m = binary.BigEndian.AppendUint32(m, uint32(timeoutMs))
	count(len(p.topics))
	var bufs net.Buffers
	from, total := 0, 0
	for _, t := range p.topics {
		if flex {
			m = binary.AppendUvarint(m, uint64(len(t.name))+1)
		} else {
			m = binary.BigEndian.AppendUint16(m, uint16(len(t.name)))
		}
		m = append(m, t.name...)
		count(len(t.parts))
		for _, pt := range t.parts {
			m = binary.BigEndian.AppendUint32(m, uint32(pt.partition))
			count(len(pt.records))
			bufs = append(bufs, m[from:len(m):len(m)], pt.records)
			total += len(m) - from + len(pt.records)
			from = len(m)
			if flex {
				m = append(m, 0) // partition tags
			}
		}
		if flex {
			m = append(m, 0) // topic tags
		}
	}
	if flex {
		m = append(m, 0) // request tags
	}
	bufs = append(bufs, m[from:])
	total += len(m) - from
	// The first piece is a slice of the array m was when it was cut (m
	// may have moved since, growing): the size goes there.
	binary.BigEndian.PutUint32(bufs[0][:4], uint32(total-4))
	return bufs
}

// wirePool keeps the forwarder's connections to one cluster, one per
// broker, dialled when first needed and again after a failure.
type wirePool struct {
	opts wireOptions
	bufs *bufPool

	mu    sync.Mutex
	addrs map[int32]string
	conns map[wireKey]*wireConn
}

// wireKey names a connection: to broker id, the lane-th.
type wireKey struct {
	id   int32
	lane int
}

func newWirePool(o wireOptions, bufs *bufPool) *wirePool {
	return &wirePool{opts: o, bufs: bufs, addrs: map[int32]string{}, conns: map[wireKey]*wireConn{}}
}

// setBrokers records the brokers' addresses (a Metadata answer's); a
// connection to a broker whose address changed is closed.
func (p *wirePool) setBrokers(bs []kmsg.MetadataResponseBroker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range bs {
		addr := net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
		for k, c := range p.conns {
			if k.id == b.NodeID && c.addr != addr {
				c.fail(errWireClosed)
				delete(p.conns, k)
			}
		}
		p.addrs[b.NodeID] = addr
	}
}

// conn returns a live connection k, dialling one if needed.
func (p *wirePool) conn(ctx context.Context, k wireKey) (*wireConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[k]; c != nil && !c.failed() {
		if time.Since(time.Unix(0, c.last.Load())) < wireIdle {
			return c, nil
		}
		// Brokers close connections idle for long (Kafka's
		// connections.max.idle.ms, 10 minutes), unnoticed here until
		// a request is lost on it: a fresh one instead.
		c.fail(errWireClosed)
	}
	addr, ok := p.addrs[k.id]
	if !ok {
		return nil, fmt.Errorf("broker %d: address unknown", k.id)
	}
	c, err := dialWire(ctx, addr, p.opts, p.bufs)
	if err != nil {
		return nil, err
	}
	p.conns[k] = c
	return c, nil
}

// close closes every connection.
func (p *wirePool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.conns {
		c.fail(errWireClosed)
		delete(p.conns, id)
	}
}
