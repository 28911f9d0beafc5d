package transport

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

// discardConn is a net.Conn that keeps what is written to it, for driving the
// dispatcher without sockets.
type discardConn struct {
	mu      sync.Mutex
	written []byte
}

func (d *discardConn) Read([]byte) (int, error) { return 0, net.ErrClosed }
func (d *discardConn) Write(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written = append(d.written, b...)
	return len(b), nil
}
func (d *discardConn) Close() error { return nil }
func (d *discardConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}
}
func (d *discardConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (d *discardConn) SetDeadline(time.Time) error      { return nil }
func (d *discardConn) SetReadDeadline(time.Time) error  { return nil }
func (d *discardConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzRequest feeds arbitrary frames (without their size prefix) to the
// dispatcher of a server backed by in-memory storage. Invariants: nothing
// panics (the server logs recovered panics, which fail the test); a frame is
// answered with exactly one whole response carrying its correlation ID, or
// none (acks=0), or refused with an error that closes the connection.
func FuzzRequest(f *testing.F) {
	mem := vfs.NewMem()
	logs := &logRecorder{}
	n, err := node.Open(node.Config{FS: mem, DataDir: "data", Advertised: "127.0.0.1:9092", AutoCreateTopics: true})
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewServer(Config{Logger: slog.New(logs)}, n)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		s.Close()
		n.Close()
	})
	if _, err := n.CreateTopic(context.Background(), node.CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: -1}); err != nil {
		f.Fatal(err)
	}

	// Seeds: a valid request of every served API and version, that request
	// cut short and with garbage after it, and degenerate frames.
	for _, a := range apis {
		for v := a.min; v <= a.max; v++ {
			fr := frame(versionCases[a.key].build(f, v), 1, nil)[4:]
			f.Add(fr)
			f.Add(fr[:len(fr)/2])
			f.Add(append(fr[:len(fr):len(fr)], 0xff, 0, 0x7f, 0xff, 0xff, 0xff))
		}
	}
	f.Add([]byte{})
	f.Add(make([]byte, 10))
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0x7f, 0xff, 0x7f, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff})

	f.Fuzz(func(t *testing.T, fr []byte) {
		if len(fr) >= 4 && binary.BigEndian.Uint16(fr) == 19 && tooManyPartitions(fr) {
			t.Skip("would create thousands of partitions")
		}
		dc := &discardConn{}
		c := newConn(s, dc)
		defer c.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		c.ctx = ctx
		err := c.handle(fr)
		if m := logs.find("panic"); len(m) > 0 {
			t.Fatalf("panic: %s", m[0])
		}
		out := dc.written
		if err != nil || len(out) == 0 {
			return
		}
		if len(out) < 8 || int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("response of %d bytes with size prefix %d", len(out), binary.BigEndian.Uint32(out))
		}
		if got, want := binary.BigEndian.Uint32(out[4:]), binary.BigEndian.Uint32(fr[4:]); got != want {
			t.Fatalf("correlation ID %d, want %d", got, want)
		}
		if ts := n.Topics(); len(ts) > 50 {
			for _, tp := range ts {
				n.DeleteTopic(context.Background(), tp.Name)
			}
		}
	})
}

// tooManyPartitions reports whether a CreateTopics frame asks for more
// partitions than a fuzz iteration should create.
func tooManyPartitions(fr []byte) bool {
	r, err := parseRequest(fr)
	if err != nil || lookupAPI(r.key) == nil || r.version < 0 || r.version > lookupAPI(r.key).max {
		return false
	}
	if err := r.decodeBody(fr); err != nil {
		return false
	}
	for _, t := range r.body.(*kmsg.CreateTopicsRequest).Topics {
		if t.NumPartitions > 64 || len(t.ReplicaAssignment) > 64 {
			return true
		}
	}
	return false
}
