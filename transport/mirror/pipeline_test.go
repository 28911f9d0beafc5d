package mirror_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/transport/broker/brokertest"
	"github.com/weir-broker/weir/transport/mirror"
)

// cuttingConn cuts its connection in the middle of a Produce request for
// the topic when cut says so: half the request is written, then the
// connection closes, so the requests written before it on that connection
// are served by the target but their answers are lost, and the request
// itself is not served.
type cuttingConn struct {
	net.Conn
	topic []byte
	cut   func() bool
}

func (c *cuttingConn) Write(b []byte) (int, error) {
	if len(b) > 6 && b[4] == 0 && b[5] == 0 && bytes.Contains(b, c.topic) && c.cut() { // api key 0: Produce
		n, _ := c.Conn.Write(b[:len(b)/2])
		c.Conn.Close()
		return n, errors.New("test: connection cut in the middle of a produce request")
	}
	return c.Conn.Write(b)
}

// TestMirrorForwardPipelineCut: forwarding keeps several batches of a
// partition in flight; the target connection is cut in the middle of such
// a pipeline, several times. Every time, the batches in flight are dropped
// and the partition resumes from its last acknowledged batch with the same
// sequence numbers, so the target, which served some of the dropped
// requests, answers those as duplicates: in the end each target partition
// holds exactly the source partition's records, in order, none lost and
// none twice.
func TestMirrorForwardPipelineCut(t *testing.T) {
	src := brokertest.Start(t, "").Addr()
	dst := brokertest.Start(t, "").Addr()
	const topic, parts, n = "pipeline-cut", 2, 3000
	brokertest.CreateTopic(t, src, topic, parts, nil)
	// Small batches, so that each partition has hundreds.
	cl := brokertest.Client(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(2048))
	var recs []*kgo.Record
	for i := range n {
		for p := range int32(parts) {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d %d", p, i)})
		}
	}
	if err := cl.ProduceSync(brokertest.Context(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	end := brokertest.ListOffsets(t, src, topic, parts, -1)

	const wantCuts = 3
	var (
		m          atomic.Pointer[mirror.Mirror]
		mu         sync.Mutex
		cuts, seen int
	)
	cut := func() bool {
		mm := m.Load()
		if mm == nil || mirror.SentBatches(mm) < 2 {
			return false // not in the middle of a pipeline
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if cuts < wantCuts && seen%4 == 1 {
			cuts++
			return true
		}
		return false
	}
	cfg := testConfig(t, src, dst, topic)
	cfg.Forward = true
	cfg.TargetOpts = []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &cuttingConn{Conn: c, topic: []byte(topic), cut: cut}, nil
	})}
	mm, stop := runMirror(t, cfg)
	m.Store(mm)
	waitFor(t, "the position at the source end", func() bool {
		return fmt.Sprint(brokertest.CommittedOffsets(t, dst, mirror.DefaultName, topic, parts)) == fmt.Sprint(end)
	})
	stop()
	mu.Lock()
	if cuts != wantCuts {
		t.Fatalf("cut %d pipelines (of %d produce requests written with 2 or more batches of a partition in flight), want %d", cuts, seen, wantCuts)
	}
	mu.Unlock()
	var retried int64
	for _, s := range mm.Status() {
		retried += s.Errors
	}
	if retried == 0 {
		t.Fatal("no batch failed: the cuts did not hit a request in flight")
	}
	got := readAll(t, dst, topic, parts)
	for p := range int32(parts) {
		if len(got[p]) != n {
			t.Errorf("target partition %d holds %d records, want %d", p, len(got[p]), n)
		}
		for i, r := range got[p] {
			if want := fmt.Sprintf("%d %d", p, i); string(r.Value) != want {
				t.Fatalf("target partition %d record %d is %q, want %q", p, i, r.Value, want)
			}
		}
	}
	t.Logf("%d cuts, %d batch failures", cuts, retried)
}
