package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Opcodes of ZooKeeper requests, for Tap.Arm (go-zookeeper/zk sends Create
// as OpCreate, not create2).
const (
	OpCreate       int32 = 1
	OpDelete       int32 = 2
	OpExists       int32 = 3
	OpGetData      int32 = 4
	OpSetData      int32 = 5
	OpGetChildren2 int32 = 12
	OpMulti        int32 = 14
	opCloseSession int32 = -11
)

// Fault is what Tap does to an armed request.
type Fault int

const (
	// DropRequest cuts the connection instead of sending the request: the
	// server never sees it, the client cannot know.
	DropRequest Fault = iota
	// DropReply sends the request, waits for the server's reply (so the
	// request was applied) and cuts the connection instead of delivering
	// it: the outcome is unknown to the client.
	DropReply
	// GarbleReply delivers the reply with its header intact and its body
	// replaced by garbage, so the client's decoder fails on a request the
	// server applied.
	GarbleReply
)

func (f Fault) String() string {
	switch f {
	case DropRequest:
		return "drop-request"
	case DropReply:
		return "drop-reply"
	case GarbleReply:
		return "garble-reply"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// ErrPartitioned is what a Tap's dials and cut connections fail with.
var ErrPartitioned = errors.New("zktest: tap: partitioned")

// Tap is a dialer for go-zookeeper/zk (zk.WithDialer, or cluster/zk's
// Config.Dialer) that sits on the client's side of every connection it
// dials. It reads the framing of ZooKeeper's protocol (a 4-byte length,
// then for requests xid and opcode, for replies xid, zxid and error) and:
//
//   - records the session of each connect reply (id, password and the
//     negotiated timeout), which go-zookeeper keeps private, so a test can
//     hand them to ExpireSession;
//   - fails the next request with a given opcode in one of three ways
//     (Arm), to reach the "unknown outcome" paths deterministically;
//   - cuts every connection and refuses new ones (Partition, Heal), which
//     is a network partition from this client only: the server runs on and
//     expires the session when its timeout passes.
//
// It relies on go-zookeeper writing each frame with one Write call, which
// v1.0.4 does.
type Tap struct {
	mu          sync.Mutex
	partitioned bool
	conns       map[*tapConn]struct{}
	armed       map[int32][]*armedFault
	sessionID   int64
	passwd      []byte
	timeout     time.Duration
	dials       int
}

type armedFault struct {
	fault  Fault
	struck chan struct{}
}

// NewTap returns a Tap with no faults armed.
func NewTap() *Tap {
	return &Tap{conns: map[*tapConn]struct{}{}, armed: map[int32][]*armedFault{}}
}

// Dial has the signature of go-zookeeper's Dialer.
func (t *Tap) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	t.mu.Lock()
	partitioned := t.partitioned
	t.dials++
	t.mu.Unlock()
	if partitioned {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrPartitioned)
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	tc := &tapConn{Conn: c, tap: t, faults: map[int32]*armedFault{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.partitioned {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, ErrPartitioned)
	}
	t.conns[tc] = struct{}{}
	return tc, nil
}

// Dials counts the Tap's dial attempts.
func (t *Tap) Dials() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dials
}

// Session returns the last session a server granted through the tap: its id,
// password and negotiated timeout (zeros before the first).
func (t *Tap) Session() (id int64, passwd []byte, timeout time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessionID, append([]byte(nil), t.passwd...), t.timeout
}

// Arm makes the next request with opcode op fail with fault. The returned
// channel is closed when the fault has struck.
func (t *Tap) Arm(op int32, fault Fault) <-chan struct{} {
	f := &armedFault{fault: fault, struck: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed[op] = append(t.armed[op], f)
	return f.struck
}

// Partition cuts every connection and refuses dials until Heal.
func (t *Tap) Partition() {
	t.mu.Lock()
	t.partitioned = true
	conns := t.conns
	t.conns = map[*tapConn]struct{}{}
	t.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// Heal ends a Partition.
func (t *Tap) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partitioned = false
}

func (t *Tap) take(op int32) *armedFault {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.armed[op]
	if len(fs) == 0 {
		return nil
	}
	t.armed[op] = fs[1:]
	return fs[0]
}

func (t *Tap) forget(c *tapConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

type tapConn struct {
	net.Conn
	tap *Tap

	wmu       sync.Mutex
	wroteConn bool // the connect request went out

	mu     sync.Mutex
	faults map[int32]*armedFault // xid -> fault to apply to its reply

	// read side: only the client's receive goroutine reads.
	readConn bool   // the connect reply came in
	pending  []byte // the rest of the frame being delivered
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.wroteConn {
		c.wroteConn = true
		return c.Conn.Write(b)
	}
	if len(b) >= 12 {
		xid := int32(binary.BigEndian.Uint32(b[4:8]))
		op := int32(binary.BigEndian.Uint32(b[8:12]))
		if f := c.tap.take(op); f != nil {
			if f.fault == DropRequest {
				c.Conn.Close()
				close(f.struck)
				return 0, fmt.Errorf("zktest: tap: %v of opcode %d: %w", f.fault, op, net.ErrClosed)
			}
			c.mu.Lock()
			c.faults[xid] = f
			c.mu.Unlock()
		}
	}
	return c.Conn.Write(b)
}

func (c *tapConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		frame, err := c.readFrame()
		if err != nil {
			return 0, err
		}
		c.pending = frame
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readFrame reads one whole frame (length prefix included) and applies what
// the tap wants to it.
func (c *tapConn) readFrame() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("zktest: tap: frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, hdr[:])
	if _, err := io.ReadFull(c.Conn, frame[4:]); err != nil {
		return nil, err
	}
	body := frame[4:]
	if !c.readConn {
		c.readConn = true
		// protocolVersion int32, timeOut int32, sessionId int64, passwd buffer
		if len(body) >= 20 {
			timeout := int32(binary.BigEndian.Uint32(body[4:8]))
			id := int64(binary.BigEndian.Uint64(body[8:16]))
			pl := int(int32(binary.BigEndian.Uint32(body[16:20])))
			if id != 0 && pl >= 0 && 20+pl <= len(body) {
				c.tap.mu.Lock()
				c.tap.sessionID, c.tap.timeout = id, time.Duration(timeout)*time.Millisecond
				c.tap.passwd = append([]byte(nil), body[20:20+pl]...)
				c.tap.mu.Unlock()
			}
		}
		return frame, nil
	}
	if len(body) < 16 {
		return frame, nil
	}
	xid := int32(binary.BigEndian.Uint32(body[0:4]))
	c.mu.Lock()
	f := c.faults[xid]
	delete(c.faults, xid)
	c.mu.Unlock()
	if f == nil {
		return frame, nil
	}
	defer close(f.struck)
	switch f.fault {
	case DropReply:
		c.Conn.Close()
		return nil, fmt.Errorf("zktest: tap: %v: %w", f.fault, net.ErrClosed)
	case GarbleReply:
		// The reply's error code says OK and the body claims a string far
		// longer than the frame: the client's decoder runs off the end.
		garbled := make([]byte, 4+16+4)
		binary.BigEndian.PutUint32(garbled[0:4], uint32(16+4))
		copy(garbled[4:16], body[0:12]) // xid, zxid
		binary.BigEndian.PutUint32(garbled[16:20], 0)
		binary.BigEndian.PutUint32(garbled[20:24], 0x7ffffff0)
		return garbled, nil
	}
	return frame, nil
}

func (c *tapConn) Close() error {
	c.tap.forget(c)
	return c.Conn.Close()
}

// ExpireSession ends a session from outside, the way ZooKeeper's own tests
// do: it connects with the session's id and password (which moves the
// session to this connection and makes the server drop the owner's
// connection) and closes the session. The server deletes the session's
// ephemeral nodes at once; the owner learns of the expiry when it next
// reconnects. A session that is already gone is not an error.
//
// The owner may reconnect and take the session back in between (with several
// servers it redials at once); the close then fails with "session moved"
// and is retried until timeout.
func ExpireSession(addr string, id int64, passwd []byte, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		done, err := expireOnce(addr, id, passwd, deadline)
		if done {
			return nil
		}
		last = err
		time.Sleep(20 * time.Millisecond) // retry pacing against a racing owner, not synchronisation
	}
	return fmt.Errorf("zktest: expire session %#x at %s: %w", id, addr, last)
}

func expireOnce(addr string, id int64, passwd []byte, deadline time.Time) (bool, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	// connect request: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd
	req := make([]byte, 4+4+8+4+8+4+len(passwd))
	binary.BigEndian.PutUint32(req[0:4], uint32(len(req)-4))
	binary.BigEndian.PutUint32(req[16:20], 10000)
	binary.BigEndian.PutUint64(req[20:28], uint64(id))
	binary.BigEndian.PutUint32(req[28:32], uint32(len(passwd)))
	copy(req[32:], passwd)
	if _, err := conn.Write(req); err != nil {
		return false, err
	}
	reply, err := readRawFrame(conn)
	if err != nil {
		return false, fmt.Errorf("connect reply: %w", err)
	}
	if len(reply) < 16 {
		return false, fmt.Errorf("connect reply of %d bytes", len(reply))
	}
	if got := int64(binary.BigEndian.Uint64(reply[8:16])); got != id {
		return true, nil // the server no longer knows the session
	}
	// closeSession: xid, opcode
	closeReq := make([]byte, 12)
	binary.BigEndian.PutUint32(closeReq[0:4], 8)
	binary.BigEndian.PutUint32(closeReq[4:8], 1)
	op := opCloseSession
	binary.BigEndian.PutUint32(closeReq[8:12], uint32(op))
	if _, err := conn.Write(closeReq); err != nil {
		return false, err
	}
	for {
		reply, err := readRawFrame(conn)
		if err != nil {
			return false, fmt.Errorf("close reply: %w", err)
		}
		if len(reply) < 16 || int32(binary.BigEndian.Uint32(reply[0:4])) != 1 {
			continue // a watch event or ping, not our reply
		}
		if code := int32(binary.BigEndian.Uint32(reply[12:16])); code != 0 {
			return false, fmt.Errorf("close: error code %d", code)
		}
		return true, nil
	}
}

func readRawFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
