package mirror

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// TestWireProduceEncoding: the Produce requests the forwarder writes by
// hand (its batches in place, a writev of the pieces) read back with
// kmsg as the same request, at every version it may send, flexible or
// not, with one topic or several.
func TestWireProduceEncoding(t *testing.T) {
	batch := func(n int) []byte { return bytes.Repeat([]byte{byte(n)}, 100+n) }
	for v := int16(wireProduceMin); v <= wireProduceMax; v++ {
		for _, shape := range [][]struct {
			topic string
			part  int32
		}{
			{{"a", 0}},
			{{"a", 0}, {"b", 3}, {"a", 2}, {"topic-with-a-longer-name", 7}},
		} {
			t.Run(fmt.Sprintf("v%d/%d", v, len(shape)), func(t *testing.T) {
				p := wireProduce{version: v}
				for i, s := range shape {
					p.add(s.topic, s.part, batch(i))
				}
				bufs := p.encode("weir-mirror", -1, 30000)
				var raw []byte
				for _, b := range bufs {
					raw = append(raw, b...)
				}
				if size := int(binary.BigEndian.Uint32(raw)); size != len(raw)-4 {
					t.Fatalf("size %d, request of %d bytes after it", size, len(raw)-4)
				}
				body := raw[4:]
				if key, ver := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:])); key != 0 || ver != v {
					t.Fatalf("key %d version %d, want 0 and %d", key, ver, v)
				}
				body = body[8:] // key, version, correlation id
				idLen := int(binary.BigEndian.Uint16(body))
				if id := string(body[2 : 2+idLen]); id != "weir-mirror" {
					t.Fatalf("client id %q", id)
				}
				body = body[2+idLen:]
				req := kmsg.NewPtrProduceRequest()
				req.Version = v
				if req.IsFlexible() {
					body = body[1:] // header tags: none
				}
				if err := req.ReadFrom(body); err != nil {
					t.Fatal(err)
				}
				if req.TransactionID != nil || req.Acks != -1 || req.TimeoutMillis != 30000 {
					t.Fatalf("transactional id %v, acks %d, timeout %d", req.TransactionID, req.Acks, req.TimeoutMillis)
				}
				got := map[string][]byte{}
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.Records
					}
				}
				if len(got) != len(shape) {
					t.Fatalf("read back %d partitions, want %d: %v", len(got), len(shape), got)
				}
				for i, s := range shape {
					if b := got[fmt.Sprintf("%s/%d", s.topic, s.part)]; !bytes.Equal(b, batch(i)) {
						t.Errorf("%s/%d: records %d bytes, want the batch of %d", s.topic, s.part, len(b), len(batch(i)))
					}
				}
			})
		}
	}
}

// TestWireBufRecycled: a buffer goes back to its pool with its last
// reference, not before, and a release too many is refused loudly (it
// would hand one buffer to two answers).
func TestWireBufRecycled(t *testing.T) {
	p := &bufPool{}
	w := p.get(100 << 10)
	if len(w.b) != 100<<10 || cap(w.b) != 128<<10 {
		t.Fatalf("len %d cap %d, want 100 KiB in the 128 KiB class", len(w.b), cap(w.b))
	}
	w.ref()
	w.release()
	if w.refs.Load() != 1 {
		t.Fatalf("refs %d after ref and release, want 1", w.refs.Load())
	}
	w.release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second last release did not panic")
			}
		}()
		w.release()
	}()
	var nilBuf *wireBuf
	nilBuf.ref()
	nilBuf.release() // a batch not read from a pool: nothing to do
}

// TestSkipTags: the tagged fields of a flexible answer's header are
// skipped, and a damaged section is an error, not a panic.
func TestSkipTags(t *testing.T) {
	b := binary.AppendUvarint(nil, 2)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, 3)
	b = append(b, 1, 2, 3)
	b = binary.AppendUvarint(b, 5)
	b = binary.AppendUvarint(b, 0)
	b = append(b, 0xAA)
	rest, err := skipTags(b)
	if err != nil || !bytes.Equal(rest, []byte{0xAA}) {
		t.Fatalf("skipTags = %x, %v; want aa", rest, err)
	}
	for _, bad := range [][]byte{{}, {1}, {1, 0}, {1, 0, 9, 1}, {0x80}} {
		if _, err := skipTags(bad); err == nil {
			t.Errorf("skipTags(%x): no error", bad)
		}
	}
}

// TestWireConnFailsPending: when the broker's side of a connection goes
// away, the requests in flight on it fail, and so does one sent after;
// none hangs.
func TestWireConnFailsPending(t *testing.T) {
	a, b := net.Pipe()
	c := &wireConn{addr: "pipe", conn: a, bw: bufio.NewWriter(a), br: bufio.NewReader(a), pending: make(chan *wireCall, wirePending),
		dead: make(chan struct{}), fmt: kmsg.NewRequestFormatter(), max: map[int16]int16{}}
	go c.readLoop()
	// The "broker" reads two requests and closes.
	read := make(chan error, 1)
	go func() {
		var hdr [4]byte
		for range 2 {
			if _, err := b.Read(hdr[:]); err != nil {
				read <- err
				return
			}
			buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(b, buf); err != nil {
				read <- err
				return
			}
		}
		read <- b.Close()
	}()
	req := kmsg.NewPtrMetadataRequest()
	c1 := c.send(net.Buffers{c.fmt.AppendRequest(nil, req, 0)}, false, time.Now().Add(time.Minute))
	c2 := c.send(net.Buffers{c.fmt.AppendRequest(nil, req, 0)}, false, time.Now().Add(time.Minute))
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	for i, call := range []*wireCall{c1, c2} {
		<-call.done
		if call.err == nil {
			t.Errorf("call %d answered on a closed connection", i)
		}
	}
	c3 := c.send(net.Buffers{c.fmt.AppendRequest(nil, req, 0)}, false, time.Now().Add(time.Minute))
	<-c3.done
	if c3.err == nil || !c.failed() {
		t.Errorf("a call after the failure: err %v, connection failed %v", c3.err, c.failed())
	}
}

// TestWireOldBrokerApiVersions: a broker that does not know ApiVersions v3
// answers it in v0 with UNSUPPORTED_VERSION; the connection asks again in
// v0 and learns the versions from that answer.
func TestWireOldBrokerApiVersions(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	served := make(chan error, 1)
	go func() {
		served <- func() error {
			for i, code := range []int16{kerr.UnsupportedVersion.Code, 0} {
				var size [4]byte
				if _, err := io.ReadFull(b, size[:]); err != nil {
					return err
				}
				req := make([]byte, binary.BigEndian.Uint32(size[:]))
				if _, err := io.ReadFull(b, req); err != nil {
					return err
				}
				if key, ver := binary.BigEndian.Uint16(req), binary.BigEndian.Uint16(req[2:]); key != 18 || (i == 1) != (ver == 0) {
					return fmt.Errorf("request %d: key %d version %d", i, key, ver)
				}
				resp := kmsg.NewPtrApiVersionsResponse()
				resp.Version, resp.ErrorCode = 0, code
				if code == 0 {
					for _, k := range [][2]int16{{0, 7}, {1, 11}} {
						ak := kmsg.NewApiVersionsResponseApiKey()
						ak.ApiKey, ak.MaxVersion = k[0], k[1]
						resp.ApiKeys = append(resp.ApiKeys, ak)
					}
				}
				body := resp.AppendTo(binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(req[4:])))
				if _, err := b.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	o := wireOptions{clientID: "t", dial: func(context.Context, string, string) (net.Conn, error) { return a, nil }}
	c, err := dialWire(context.Background(), "old-broker:9092", o, &bufPool{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.fail(errWireClosed)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if v, err := c.produceVersion(); err != nil || v != 7 {
		t.Errorf("produce version %d, %v; want 7", v, err)
	}
	if c.max[1] != 11 {
		t.Errorf("fetch version %d, want 11", c.max[1])
	}
}

// serveWire answers the requests read from conn, one after the other, with
// answer's response for each (its version set to the request's), until
// conn closes or answer has none; the channel says why it stopped.
func serveWire(conn net.Conn, answer func(key, version int16) kmsg.Response) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			var size [4]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				done <- err
				return
			}
			req := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(conn, req); err != nil {
				done <- err
				return
			}
			key, version := int16(binary.BigEndian.Uint16(req)), int16(binary.BigEndian.Uint16(req[2:]))
			resp := answer(key, version)
			if resp == nil {
				done <- fmt.Errorf("no answer to key %d v%d", key, version)
				return
			}
			resp.SetVersion(version)
			body := binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(req[4:]))
			if resp.IsFlexible() && key != 18 {
				body = append(body, 0) // header tags
			}
			body = resp.AppendTo(body)
			if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
				done <- err
				return
			}
		}
	}()
	return done
}

// challengeMech is a SASL mechanism of one round: it sends first, and
// keeps a copy of the bytes the broker's answer hands its Challenge.
type challengeMech struct{ got chan []byte }

func (challengeMech) Name() string { return "TEST-CHALLENGE" }

func (m challengeMech) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return m, []byte("client-first"), nil
}

func (m challengeMech) Challenge(b []byte) (bool, []byte, error) {
	m.got <- bytes.Clone(b)
	return true, nil, nil
}

// TestWireSASLChallengeIntact: the bytes of a SaslAuthenticate answer
// reach the mechanism's Challenge as the broker sent them. They are a
// slice of the buffer the answer was read into, so that buffer must not
// be recycled (and read into by another connection's answer) before the
// mechanism is done with them: the pool here overwrites every buffer it
// takes back, as a recycled one would be.
func TestWireSASLChallengeIntact(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	const challenge = "server-challenge: r=nonce,s=salt,i=4096"
	served := serveWire(b, func(key, version int16) kmsg.Response {
		switch key {
		case 18:
			resp := kmsg.NewPtrApiVersionsResponse()
			for _, k := range [][2]int16{{0, 11}, {1, 12}, {17, 1}, {36, 2}} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k[0], k[1]
				resp.ApiKeys = append(resp.ApiKeys, ak)
			}
			return resp
		case 17:
			return kmsg.NewPtrSASLHandshakeResponse()
		case 36:
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.SASLAuthBytes = []byte(challenge)
			return resp
		}
		return nil
	})
	mech := challengeMech{got: make(chan []byte, 1)}
	o := wireOptions{clientID: "t", sasls: []sasl.Mechanism{mech},
		dial: func(context.Context, string, string) (net.Conn, error) { return a, nil }}
	c, err := dialWire(context.Background(), "broker:9092", o, &bufPool{scribble: true})
	if err != nil {
		t.Fatal(err)
	}
	c.fail(errWireClosed)
	if err := <-served; err == nil {
		t.Fatal("the broker stopped serving without an error")
	}
	select {
	case got := <-mech.got:
		if string(got) != challenge {
			t.Fatalf("Challenge was handed %q, the broker sent %q", got, challenge)
		}
	default:
		t.Fatal("the handshake ended without the mechanism's Challenge")
	}
}
