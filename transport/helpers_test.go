package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/coord/memstore"
	"github.com/weir-broker/weir/core/groups"
	"github.com/weir-broker/weir/core/vfs"
	"github.com/weir-broker/weir/node"
)

// testBroker is a Server on 127.0.0.1:0 with a node in a temporary
// directory, closed (in order) when the test ends.
type testBroker struct {
	s    *Server
	node *node.Node
	addr string
	logs *logRecorder
}

// logRecorder keeps the server's log records; every test fails if the server
// logged a panic.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) find(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			out = append(out, m)
		}
	}
	return out
}

// forget drops the records containing substr (ones a test provoked).
func (l *logRecorder) forget(substr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.msgs[:0]
	for _, m := range l.msgs {
		if !strings.Contains(m, substr) {
			kept = append(kept, m)
		}
	}
	l.msgs = kept
}

type brokerOpt func(*Config, *node.Config)

func startBroker(t testing.TB, opts ...brokerOpt) *testBroker {
	t.Helper()
	dir := t.TempDir()
	logs := &logRecorder{}
	cfg := Config{Logger: slog.New(logs)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nc := node.Config{FS: vfs.Default, DataDir: dir, Advertised: l.Addr().String(), Logger: cfg.Logger}
	for _, o := range opts {
		o(&cfg, &nc)
	}
	n, err := node.Open(nc)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(n.Metrics())
	}
	s, err := NewServer(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
		for _, m := range logs.find("panic") {
			t.Errorf("server logged: %s", m)
		}
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testBroker{s: s, node: n, addr: l.Addr().String(), logs: logs}
}

func withMemFS(c *Config, o *node.Config)      { o.FS = vfs.NewMem() }
func withAutoCreate(c *Config, o *node.Config) { o.AutoCreateTopics = true }
func withCopyPath(c *Config, o *node.Config)   { c.DisableSendfile = true }

// withoutTxnVerification turns off the coordinator's check of transactional
// produces and offset commits (KIP-890), for tests that play the
// coordinator themselves: transactional batches of made-up producers,
// markers written with WriteTxnMarkers.
func withoutTxnVerification(c *Config, o *node.Config) { o.NoTransactionVerification = true }

func (b *testBroker) createTopic(t testing.TB, name string, partitions int32, configs map[string]string) node.TopicInfo {
	t.Helper()
	tp, err := b.node.CreateTopic(context.Background(), node.CreateTopic{Name: name, Partitions: partitions,
		ReplicationFactor: -1, Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// stats returns a partition's state, failing the test if there is none.
func (b *testBroker) stats(t testing.TB, topic string, partition int32) node.PartitionStats {
	t.Helper()
	p, err := b.node.Partition(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	return p.Stats()
}

// rawConn is a protocol-level client: it writes frames and reads responses
// without any client library in between.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func (b *testBroker) dial(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// frame encodes req with request header v1 (v2 when flexible).
func frame(req kmsg.Request, corr int32, clientID *string) []byte {
	f := kmsg.NewRequestFormatter()
	if clientID != nil {
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
	}
	return f.AppendRequest(nil, req, corr)
}

// send writes req and returns its correlation ID.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	id := "weir-test"
	rc.write(frame(req, rc.corr, &id))
	return rc.corr
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame (without its size).
func (rc *rawConn) readFrame() ([]byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(rc.r, b)
	return b, err
}

// do sends req and decodes its response at the request's version.
func (rc *rawConn) do(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req)
	return rc.recv(req, corr)
}

func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	b, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("%s v%d: reading response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp := req.ResponseKind()
	body, err := decodeResponseHeader(b, corr, resp)
	if err != nil {
		rc.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("%s v%d: decoding response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// decodeResponseHeader checks the correlation ID and skips the header's tags
// (response header v1: flexible, except ApiVersions).
func decodeResponseHeader(b []byte, corr int32, resp kmsg.Response) ([]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("short response")
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, fmt.Errorf("correlation ID %d, want %d", got, corr)
	}
	b = b[4:]
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		var err error
		if b, err = skipTags(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// expectClosed asserts that the server closes the connection (reads EOF or a
// reset) without answering.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := rc.r.ReadByte()
	if err == nil {
		rc.t.Fatalf("server answered (first byte %#x) instead of closing", b)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		rc.t.Fatal("server neither answered nor closed the connection")
	}
}

// checkAlive asserts that a fresh connection is served.
func (b *testBroker) checkAlive(t testing.TB) {
	t.Helper()
	rc := b.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1"
	resp := rc.do(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("ApiVersions on a fresh connection: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	rc.c.Close()
}

// coord returns the group coordinator of the node (every group's, on one
// node).
func (b *testBroker) coord(t testing.TB) *groups.Coordinator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.node.AwaitOffsetsLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := b.node.GroupCoordinator("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// produce appends records to a partition through the node (acks=1), failing
// the test on error.
func (b *testBroker) produce(t testing.TB, topic string, partition int32, records []byte) int64 {
	t.Helper()
	req := node.ProduceRequest{Acks: 1, Partitions: []node.ProducePartition{{Topic: topic, Partition: partition, Records: records}}}
	b.node.Produce(context.Background(), &req)
	if err := req.Partitions[0].Err; err != nil {
		t.Fatal(err)
	}
	return req.Partitions[0].BaseOffset
}

// fakeClock is a Config.seams clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// withSeams installs test seams (set before the server starts).
func withSeams(sm *seams) brokerOpt {
	return func(c *Config, _ *node.Config) { c.seams = sm }
}

// pollUntil polls cond every millisecond until it holds, failing the test
// with what after 20 s.
func pollUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		<-tick.C
	}
}

// withMemCoord keeps the coordination state in memory (core/coord/memstore)
// instead of the embedded file store, which rewrites its whole file on every
// change: creating thousands of partitions then takes seconds, not minutes.
func withMemCoord(c *Config, o *node.Config) { o.Coord = memstore.NewServer().Connect() }
