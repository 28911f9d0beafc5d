package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/node"
)

// Tests of the per-connection limits: a client that stops reading, or stops
// sending in the middle of a request, must not make the broker hold more
// than Config allows, nor keep other connections from being served.

// pollStats polls the server's connection stats until cond holds for one of
// them (or, with remote "", for the whole list), failing after 20 s.
func pollStats(t *testing.T, s *Server, what string, cond func([]ConnStats) bool) []ConnStats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		st := s.ConnStats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s; connections: %+v", what, st)
		}
		<-tick.C
	}
}

func statsOf(st []ConnStats, c net.Conn) (ConnStats, bool) {
	for _, s := range st {
		if s.Remote == c.LocalAddr().String() {
			return s, true
		}
	}
	return ConnStats{}, false
}

// TestClientThatStopsReading pipelines far more Fetch requests (each
// answered with about 256 KiB) than TCP can buffer, and never reads an
// answer. The broker must stop reading the connection with at most
// MaxInFlightRequests requests and MaxConnectionBytes held, so the client
// ends up blocked in its write; other connections are served meanwhile; and
// closing the stalled client frees everything the connection held.
func TestClientThatStopsReading(t *testing.T) {
	const inflight = 3
	b := startBroker(t, func(c *Config, _ *node.Config) {
		c.MaxInFlightRequests = inflight
		c.MaxConnectionBytes = 4 << 10
	})
	b.createTopic(t, "t", 1, nil)
	big := make([]record.Record, 64)
	for i := range big {
		big[i] = record.Record{Value: bytes.Repeat([]byte{byte(i)}, 4000), Timestamp: 1_700_000_000_000}
	}
	batch, err := record.Build(record.DefaultBuildOptions(), big)
	if err != nil {
		t.Fatal(err)
	}
	b.produce(t, "t", 0, batch)

	// 32 MiB of requests: more than the kernel buffers of both ends hold
	// (tcp_wmem and tcp_rmem top out at a few MiB), however many the broker
	// answers before its writes block.
	req := fetchReq(4, 0, 0, 1<<20, "t", map[int32]int64{0: 0})
	one := frame(req, 1, nil)
	reqs := bytes.Repeat(one, (32<<20)/len(one))
	stalled := b.dial(t)
	var written atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		for off := 0; off < len(reqs); off += 64 << 10 {
			n, err := stalled.c.Write(reqs[off:min(off+64<<10, len(reqs))])
			written.Add(int64(n))
			if err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- nil
	}()

	// The broker holds back: every slot taken, its reader waiting.
	var maxSeen ConnStats
	pollStats(t, b.s, "the stalled connection to be held back", func(st []ConnStats) bool {
		cs, ok := statsOf(st, stalled.c)
		if !ok {
			return false
		}
		if cs.InFlight > inflight || cs.ReservedBytes > 4<<10 || cs.FrameBytes > cs.ReservedBytes+int64(len(one)) {
			t.Fatalf("connection holds more than its limits: %+v", cs)
		}
		maxSeen.InFlight = max(maxSeen.InFlight, cs.InFlight)
		maxSeen.ReservedBytes = max(maxSeen.ReservedBytes, cs.ReservedBytes)
		return cs.HeldBack && cs.InFlight == inflight && written.Load() > 0
	})
	t.Logf("held back after %d KiB written; at most %d requests, %d bytes held", written.Load()>>10,
		maxSeen.InFlight, maxSeen.ReservedBytes)

	// Another connection is served meanwhile.
	b.checkAlive(t)
	other := b.dial(t)
	resp := other.do(fetchReq(4, 0, 0, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || len(got.RecordBatches) != len(batch) {
		t.Fatalf("fetch on another connection: error %d, %d bytes", got.ErrorCode, len(got.RecordBatches))
	}

	// Nothing the client does can finish its writes: the broker reads no more.
	select {
	case err := <-writerDone:
		t.Fatalf("the client wrote all %d MiB (err %v): the broker buffered them", len(reqs)>>20, err)
	default:
	}
	if cs, _ := statsOf(b.s.ConnStats(), stalled.c); cs.InFlight > inflight || cs.ReservedBytes > 4<<10 {
		t.Fatalf("connection holds more than its limits: %+v", cs)
	}

	// Closing the client frees the connection and everything it held.
	stalled.c.Close()
	if err := <-writerDone; err == nil {
		t.Fatal("the blocked write succeeded after close")
	}
	pollStats(t, b.s, "the stalled connection to go", func(st []ConnStats) bool {
		_, ok := statsOf(st, stalled.c)
		return !ok
	})
}

// TestClientStalledMidFrame: a client that announces a large request and
// stops after a few bytes of it holds only what it sent, not the announced
// size, and is closed after FrameReadTimeout.
func TestClientStalledMidFrame(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.FrameReadTimeout = 200 * time.Millisecond })
	rc := b.dial(t)
	const size = 50 << 20 // a Produce: up to MaxRequestBytes
	var hdr [4 + 2]byte
	binary.BigEndian.PutUint32(hdr[:], size)
	binary.BigEndian.PutUint16(hdr[4:], uint16(produceKey))
	rc.write(hdr[:])
	rc.write(make([]byte, 1000))
	st := pollStats(t, b.s, "the partial frame", func(st []ConnStats) bool {
		cs, ok := statsOf(st, rc.c)
		return ok && cs.ReservedBytes == size
	})
	if cs, _ := statsOf(st, rc.c); cs.FrameBytes > frameChunk {
		t.Fatalf("a stalled frame of %d bytes holds %d bytes after 1000 arrived", size, cs.FrameBytes)
	}
	rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := rc.r.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled client: read %v; want the connection closed", err)
	}
	if len(b.logs.find("stalled in the middle of a request")) == 0 {
		t.Error("the stall was not logged")
	}
	pollStats(t, b.s, "the connection to go", func(st []ConnStats) bool { _, ok := statsOf(st, rc.c); return !ok })
	b.checkAlive(t)
}

// TestConnectionBytesLimit: a request that does not fit in what the
// connection may still hold waits, unread, until the earlier one is
// answered; then both are answered in order.
func TestConnectionBytesLimit(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) {
		c.MaxInFlightRequests = 3
		c.MaxConnectionBytes = 1000
	})
	b.createTopic(t, "t", 1, nil)
	rc := b.dial(t)
	// A long poll on an empty partition holds its slot and its bytes.
	fetch := fetchReq(4, 20*time.Second, 1, 1<<20, "t", map[int32]int64{0: 0})
	rc.write(frame(fetch, 1, nil))
	// Metadata naming enough topics not to fit beside it.
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 1
	for range 80 {
		mt := kmsg.NewMetadataRequestTopic()
		name := "no-such-topic"
		mt.Topic = &name
		meta.Topics = append(meta.Topics, mt)
	}
	mf := frame(meta, 2, nil)
	if len(mf) < 1000 {
		t.Fatalf("metadata frame of %d bytes fits beside the fetch", len(mf))
	}
	rc.write(mf)
	st := pollStats(t, b.s, "the metadata request to wait", func(st []ConnStats) bool {
		cs, ok := statsOf(st, rc.c)
		return ok && cs.HeldBack && cs.InFlight == 2
	})
	if cs, _ := statsOf(st, rc.c); cs.ReservedBytes != int64(len(frame(fetch, 1, nil))-4) {
		t.Fatalf("held %+v; want only the fetch's %d bytes", cs, len(frame(fetch, 1, nil))-4)
	}
	other := b.dial(t)
	if r := other.do(produceReq(7, 1, "t", 0, batch(t, "wake", 1))).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	if got := recordsIn(t, rc.recv(fetch, 1).(*kmsg.FetchResponse).Topics[0].Partitions[0]); len(got) != 1 {
		t.Fatalf("long poll answered with %v", got)
	}
	if m := rc.recv(meta, 2).(*kmsg.MetadataResponse); len(m.Topics) != 80 {
		t.Fatalf("metadata answered %d topics", len(m.Topics))
	}
}

// MaxFetchBytes caps a response below what the request allows; the first
// batch still goes whole.
func TestMaxFetchBytes(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxFetchBytes = 3000 })
	b.createTopic(t, "t", 1, nil)
	var sizes []int
	for i := range 4 {
		bt := batchOf(t, 1, 2000, int64(i))
		sizes = append(sizes, len(bt))
		b.produce(t, "t", 0, bt)
	}
	rc := b.dial(t)
	for _, tc := range []struct {
		offset int64
		want   int
	}{{0, sizes[0]}, {1, sizes[1]}} {
		resp := rc.do(fetchReq(4, 0, 0, 1<<20, "t", map[int32]int64{0: tc.offset})).(*kmsg.FetchResponse)
		if got := len(resp.Topics[0].Partitions[0].RecordBatches); got != tc.want {
			t.Fatalf("fetch at %d with MaxBytes 1 MiB and MaxFetchBytes 3000: %d record bytes, want one batch (%d)", tc.offset, got, tc.want)
		}
	}
	// A cap below the first batch still serves it whole.
	b2 := startBroker(t, func(c *Config, _ *node.Config) { c.MaxFetchBytes = 100 })
	b2.createTopic(t, "t", 1, nil)
	b2.produce(t, "t", 0, batchOf(t, 1, 2000, 0))
	resp := b2.dial(t).do(fetchReq(4, 0, 0, 1<<20, "t", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if got := len(resp.Topics[0].Partitions[0].RecordBatches); got != sizes[0] {
		t.Fatalf("fetch under a 100-byte cap: %d record bytes, want the first batch whole (%d)", got, sizes[0])
	}
}

// With MaxInFlightRequests 1 (Kafka's behaviour) pipelined requests are still
// all answered, in order.
func TestOneInFlight(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxInFlightRequests = 1 })
	rc := b.dial(t)
	var out []byte
	for i := range 50 {
		out = append(out, frame(apiVersionsReq(3), int32(i), nil)...)
	}
	rc.write(out)
	for i := range 50 {
		rc.recv(apiVersionsReq(3), int32(i))
	}
}

func TestLimitsConfig(t *testing.T) {
	var c Config
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxInFlightRequests != DefaultMaxInFlightRequests || c.MaxConnectionBytes != DefaultMaxConnectionBytes ||
		c.MaxFetchBytes != DefaultMaxFetchBytes || c.FrameReadTimeout != DefaultFrameReadTimeout {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for _, bad := range []Config{{MaxInFlightRequests: -1}, {MaxConnectionBytes: -1}, {MaxFetchBytes: -1}} {
		if err := bad.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("validate(%+v) = %v, want ErrConfig", bad, err)
		}
	}
	off := Config{FrameReadTimeout: -1}
	if err := off.validate(); err != nil || off.FrameReadTimeout >= 0 {
		t.Errorf("a negative FrameReadTimeout turns the timeout off: %v, %v", err, off.FrameReadTimeout)
	}
}
