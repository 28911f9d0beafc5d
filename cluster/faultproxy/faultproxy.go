// Package faultproxy is a TCP proxy for one directed link between brokers
// running as separate processes ("broker A's connections to broker B"),
// with faults injected while it runs: delay, one-way partitions
// (blackholes), cuts and connection drops. It stands in for tc netem and
// iptables, which the lab's kernel lacks. Broker A's replication from B
// goes through it with `weir broker --replica-route B=PROXY` on A
// (node.Config.ReplicaRoutes); cluster/netfault is the in-process
// analogue.
//
// Each accepted connection is forwarded to the target address (SetTarget
// changes it for new connections, for a broker restarted on a new port).
// The two directions are Upstream (A's bytes to B) and Downstream (B's
// bytes to A). Each direction of each connection is a reader that stamps
// every chunk with the time it was read and queues it, and a writer that
// forwards the chunks in order, each once its delay has passed since it
// was read: a delay adds latency, it does not divide throughput. At most
// queueChunks chunks of chunkSize bytes are in flight per direction.
//
// Every fault applies to open connections and new ones, and Heal clears
// them all:
//
//   - Delay(dir, d): each chunk is forwarded d after it was read.
//   - Blackhole(dir, true): bytes in that direction are read and discarded;
//     connections stay open, as over a network that drops every packet one
//     way. The connection setup itself is not refused (the proxy accepts
//     and dials), so a client sees requests time out rather than a
//     connection refused. A byte stream with a hole in it is never
//     forwarded: once a connection lost bytes in a direction it forwards
//     nothing more that way (not even its end), and when the blackhole is
//     lifted (Blackhole(dir, false) or Heal) it is reset, as TCP over a
//     real partition would have timed out or been reset by then.
//     Connections that lost nothing live on. A partition shorter than
//     TCP's retransmission timeout, which a real connection survives
//     intact, is a Delay.
//   - Cut(): every open connection is reset and new ones are accepted and
//     closed at once (a reset, as a refusal) until Heal.
//   - DropRate(p, seed): before each chunk is forwarded, its connection is
//     reset with probability p, as for packet loss a connection cannot
//     survive. The draws come from a generator seeded with seed, so their
//     sequence is deterministic (which connection gets which draw depends
//     on the order the chunks arrive in).
//
// Whatever the faults, what arrives on either side is an exact prefix of
// what was sent, and then possibly the connection's end or reset.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInvalid: a fault's argument is out of range; the message names it.
var ErrInvalid = errors.New("faultproxy: invalid argument")

const (
	chunkSize   = 32 << 10 // bytes read at once per direction
	queueChunks = 64       // chunks in flight per direction and connection
	dialTimeout = 10 * time.Second
)

// Dir is a direction of the link.
type Dir int

const (
	// Upstream is the bytes from the proxy's clients (broker A) to the
	// target (broker B).
	Upstream Dir = iota
	// Downstream is the bytes from the target back to the clients.
	Downstream
)

func (d Dir) String() string {
	switch d {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

func (d Dir) valid() bool { return d == Upstream || d == Downstream }

// Stats counts what the proxy did since it started.
type Stats struct {
	// Forwarded is the bytes written on, by Dir.
	Forwarded [2]int64
	// Discarded is the bytes a blackhole swallowed, by Dir.
	Discarded [2]int64
	// Accepted is the connections accepted, Refused those of them closed at
	// once (cut, no target, or the target's dial failed).
	Accepted, Refused int64
	// Reset is the open connections reset by a fault: Cut, a drop, or a
	// lifted blackhole that had swallowed their bytes.
	Reset int64
	// Open is the connections being forwarded now.
	Open int
}

// faults is one immutable set of faults; a change stores a new one and
// closes the old one's changed, waking writers waiting out a delay.
type faults struct {
	delay   [2]time.Duration
	hole    [2]bool
	cut     bool
	drop    float64
	changed chan struct{}
}

// Proxy forwards the connections it accepts to its target.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // ends at Close: cancels dials
	cancel context.CancelFunc
	wg     sync.WaitGroup
	faults atomic.Pointer[faults]

	mu     sync.Mutex // guards the fields below and fault changes
	target string
	links  map[*link]struct{}
	closed bool

	randMu sync.Mutex
	rand   *rand.Rand

	forwarded, discarded [2]atomic.Int64
	accepted, refused    atomic.Int64
	reset                atomic.Int64
}

// New listens on listen ("127.0.0.1:0" picks a free port; Addr tells it)
// and forwards every connection to target (empty: connections are refused
// until SetTarget). Close stops it.
func New(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, ctx: ctx, cancel: cancel, target: target, links: map[*link]struct{}{},
		rand: rand.New(rand.NewPCG(0, 0))}
	p.faults.Store(&faults{changed: make(chan struct{})})
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes new connections go to target (empty: refused); open
// ones keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Target is the address new connections go to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// change applies edit to a copy of the faults and publishes it, waking the
// writers waiting out a delay. The caller holds p.mu.
func (p *Proxy) change(edit func(*faults)) {
	old := p.faults.Load()
	f := *old
	edit(&f)
	f.changed = make(chan struct{})
	p.faults.Store(&f)
	close(old.changed)
}

// Delay forwards each chunk in direction dir d after it was read (0: at
// once), on open connections and new ones.
func (p *Proxy) Delay(dir Dir, d time.Duration) error {
	if !dir.valid() {
		return fmt.Errorf("%w: direction %v", ErrInvalid, dir)
	}
	if d < 0 {
		return fmt.Errorf("%w: delay %v is negative", ErrInvalid, d)
	}
	p.mu.Lock()
	p.change(func(f *faults) { f.delay[dir] = d })
	p.mu.Unlock()
	return nil
}

// Blackhole discards the bytes in direction dir (on) or stops doing so
// (off), resetting the connections that lost bytes; see the package doc.
func (p *Proxy) Blackhole(dir Dir, on bool) error {
	if !dir.valid() {
		return fmt.Errorf("%w: direction %v", ErrInvalid, dir)
	}
	p.mu.Lock()
	p.change(func(f *faults) { f.hole[dir] = on })
	p.mu.Unlock()
	if !on {
		p.resetDamaged()
	}
	return nil
}

// Cut resets every open connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.change(func(f *faults) { f.cut = true })
	var open []*link
	for l := range p.links {
		open = append(open, l)
	}
	p.mu.Unlock()
	for _, l := range open {
		l.kill(true)
	}
}

// DropRate resets a connection with probability rate (in [0, 1]) before
// each chunk it forwards, drawing from a generator seeded with seed.
func (p *Proxy) DropRate(rate float64, seed uint64) error {
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return fmt.Errorf("%w: drop rate %v outside [0, 1]", ErrInvalid, rate)
	}
	p.randMu.Lock()
	p.rand = rand.New(rand.NewPCG(seed, seed))
	p.randMu.Unlock()
	p.mu.Lock()
	p.change(func(f *faults) { f.drop = rate })
	p.mu.Unlock()
	return nil
}

// Heal clears every fault; connections a blackhole took bytes from are
// reset.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.change(func(f *faults) { *f = faults{} })
	p.mu.Unlock()
	p.resetDamaged()
}

// resetDamaged resets the links that lost bytes in a direction no longer
// blackholed.
func (p *Proxy) resetDamaged() {
	f := p.faults.Load()
	var damaged []*link
	p.mu.Lock()
	for l := range p.links {
		for dir := range 2 {
			if !f.hole[dir] && l.damaged[dir].Load() {
				damaged = append(damaged, l)
				break
			}
		}
	}
	p.mu.Unlock()
	for _, l := range damaged {
		l.kill(true)
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	var s Stats
	for dir := range 2 {
		s.Forwarded[dir], s.Discarded[dir] = p.forwarded[dir].Load(), p.discarded[dir].Load()
	}
	s.Accepted, s.Refused, s.Reset = p.accepted.Load(), p.refused.Load(), p.reset.Load()
	p.mu.Lock()
	s.Open = len(p.links)
	p.mu.Unlock()
	return s
}

// Close stops listening, closes every connection and returns once every
// goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var open []*link
	for l := range p.links {
		open = append(open, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	for _, l := range open {
		l.kill(false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // backing off a failing accept (EMFILE), not synchronising
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

// refuse closes c with a reset.
func (p *Proxy) refuse(c net.Conn) {
	p.refused.Add(1)
	abort(c)
}

// abort closes c with a reset (SO_LINGER 0) rather than an orderly end.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	target := p.Target()
	if p.faults.Load().cut || target == "" {
		p.refuse(client)
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", target)
	if err != nil {
		p.refuse(client)
		return
	}
	l := &link{p: p, conns: [2]net.Conn{client, server}, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.faults.Load().cut {
		p.mu.Unlock()
		abort(server)
		p.refuse(client)
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(4)
	p.mu.Unlock()
	for dir := range 2 {
		q := &queue{chunks: make(chan chunk, queueChunks), free: make(chan []byte, queueChunks)}
		src, dst := l.conns[dir], l.conns[1-dir]
		go l.read(q, src)
		go l.write(Dir(dir), q, dst)
	}
}

// draw reports whether a drop strikes.
func (p *Proxy) draw(rate float64) bool {
	p.randMu.Lock()
	defer p.randMu.Unlock()
	return p.rand.Float64() < rate
}

// link is one proxied connection: conns[Upstream] is the client's,
// conns[Downstream] the target's (the source of each direction's bytes).
type link struct {
	p       *Proxy
	conns   [2]net.Conn
	done    chan struct{} // closed by kill
	once    sync.Once
	damaged [2]atomic.Bool // a blackhole swallowed bytes in this direction
	ended   atomic.Int32   // directions whose end was forwarded
}

// kill closes both connections (with a reset when reset, which counts it
// as one) and ends the link's goroutines.
func (l *link) kill(reset bool) {
	l.once.Do(func() {
		close(l.done)
		// Counted before the close, so that a side that sees it can read
		// the stats it changed.
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
		if reset {
			l.p.reset.Add(1)
		}
		for _, c := range l.conns {
			if reset {
				abort(c)
			} else {
				c.Close()
			}
		}
	})
}

// queue carries one direction's chunks from its reader to its writer; the
// buffers go back through free.
type queue struct {
	chunks    chan chunk
	free      chan []byte
	allocated int // by the reader
}

// chunk is bytes read at one time, or the end of the source (err set).
type chunk struct {
	buf []byte // nil with err
	at  time.Time
	err error
}

// read reads src into chunks until it ends or the link is killed.
func (l *link) read(q *queue, src net.Conn) {
	defer l.p.wg.Done()
	for {
		var buf []byte
		select {
		case buf = <-q.free:
		default:
			if q.allocated < queueChunks {
				q.allocated++
				buf = make([]byte, chunkSize)
			} else {
				select {
				case buf = <-q.free:
				case <-l.done:
					return
				}
			}
		}
		n, err := src.Read(buf[:cap(buf)])
		if n > 0 {
			select {
			case q.chunks <- chunk{buf: buf[:n], at: time.Now()}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			select {
			case q.chunks <- chunk{at: time.Now(), err: err}:
			case <-l.done:
			}
			return
		}
	}
}

// write forwards dir's chunks to dst until the link is killed or the
// direction ends.
func (l *link) write(dir Dir, q *queue, dst net.Conn) {
	defer l.p.wg.Done()
	for {
		var c chunk
		select {
		case c = <-q.chunks:
		case <-l.done:
			return
		}
		if !l.forward(dir, dst, c) {
			return
		}
		if c.buf != nil {
			q.free <- c.buf // never blocks: at most queueChunks buffers exist
		}
	}
}

// forward applies the faults to c and forwards it; false: the direction
// is over.
func (l *link) forward(dir Dir, dst net.Conn, c chunk) bool {
	for {
		f := l.p.faults.Load()
		if f.hole[dir] || l.damaged[dir].Load() {
			if !f.hole[dir] {
				l.kill(true) // the blackhole was lifted under us: resetDamaged may have missed us
				return false
			}
			l.damaged[dir].Store(true)
			if !l.p.faults.Load().hole[dir] {
				l.kill(true) // lifted between the load and the store
				return false
			}
			// Swallowed; an end is not forwarded either (the stream has a hole).
			l.p.discarded[dir].Add(int64(len(c.buf)))
			return true
		}
		if wait := time.Until(c.at.Add(f.delay[dir])); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-f.changed: // the delay may have changed: look again
				t.Stop()
			case <-l.done:
				t.Stop()
				return false
			}
			continue
		}
		if c.err != nil {
			if !errors.Is(c.err, io.EOF) {
				l.kill(false) // the source was reset or failed: so is the other side
				return false
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			if l.ended.Add(1) == 2 {
				l.kill(false)
			}
			return false
		}
		if f.drop > 0 && l.p.draw(f.drop) {
			l.kill(true)
			return false
		}
		if _, err := dst.Write(c.buf); err != nil {
			l.kill(false)
			return false
		}
		l.p.forwarded[dir].Add(int64(len(c.buf)))
		return true
	}
}
