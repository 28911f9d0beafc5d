package peer_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cluster/peer"
)

// The client's wire handling against franz-go's fake cluster (as a consumer
// would fetch: the fake treats replica ids as Kafka's brokers do not, and
// what a follower's fetch means is the node's tests' business).

const topic = "t"

func startFake(t *testing.T) (addr string, produce func(n int)) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr = c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return addr, func(n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: make([]byte, 100)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func fetchReq(offset int64, wait time.Duration) peer.FetchRequest {
	return peer.FetchRequest{MaxWait: wait, MinBytes: 1, MaxBytes: 1 << 20,
		Partitions: []peer.FetchPartition{{Topic: topic, Partition: 0, CurrentLeaderEpoch: -1, FetchOffset: offset, MaxBytes: 1 << 20}}}
}

// countingDialer dials TCP and counts the connections.
func countingDialer(n *atomic.Int32, conns chan<- net.Conn) peer.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil && conns != nil {
			conns <- c
		}
		return c, err
	}
}

func TestFetchAndEpochs(t *testing.T) {
	addr, produce := startFake(t)
	produce(3)
	var dials atomic.Int32
	cl, err := peer.Dial(addr, -1, countingDialer(&dials, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for i := range 3 {
		res, err := cl.Fetch(ctx, fetchReq(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Err != nil || res[0].HighWatermark != 3 || len(res[0].Records) == 0 {
			t.Fatalf("fetch %d: %+v", i, res)
		}
	}
	as, err := cl.EpochEnds(ctx, []peer.EpochQuery{{Topic: topic, Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Err != nil || as[0].EndOffset != 3 {
		t.Fatalf("epoch ends: %+v", as)
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d connections for 4 requests, want 1", d)
	}
}

// writeSignal is a connection that tells when a request has been written.
type writeSignal struct {
	net.Conn
	written chan struct{}
}

func (w writeSignal) Write(b []byte) (int, error) {
	n, err := w.Conn.Write(b)
	select {
	case w.written <- struct{}{}:
	default:
	}
	return n, err
}

// A long poll ends when its context does, and the next request dials again.
func TestFetchCanceled(t *testing.T) {
	addr, produce := startFake(t)
	produce(1)
	var dials atomic.Int32
	written := make(chan struct{}, 1)
	cl, _ := peer.Dial(addr, -1, func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeSignal{c, written}, nil
	})
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cl.Fetch(ctx, fetchReq(1, time.Minute)) // at the end: waits
		done <- err
	}()
	<-written // the fetch is at the broker, waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled fetch: %v", err)
	}
	produce(1)
	res, err := cl.Fetch(context.Background(), fetchReq(1, 0))
	if err != nil || len(res) != 1 || res[0].HighWatermark != 2 {
		t.Fatalf("fetch after a cancel: %+v, %v", res, err)
	}
	if d := dials.Load(); d != 2 {
		t.Errorf("%d connections, want 2 (one dropped by the cancel)", d)
	}
}

// A connection the server (or the network) closed fails one request; the
// next dials again.
func TestRedialAfterBrokenConnection(t *testing.T) {
	addr, produce := startFake(t)
	produce(1)
	var dials atomic.Int32
	conns := make(chan net.Conn, 4)
	cl, _ := peer.Dial(addr, -1, countingDialer(&dials, conns))
	defer cl.Close()
	ctx := context.Background()
	if _, err := cl.Fetch(ctx, fetchReq(0, 0)); err != nil {
		t.Fatal(err)
	}
	(<-conns).Close()
	if _, err := cl.Fetch(ctx, fetchReq(0, 0)); err == nil {
		t.Fatal("fetch on a closed connection succeeded")
	}
	if _, err := cl.Fetch(ctx, fetchReq(0, 0)); err != nil {
		t.Fatalf("fetch after redial: %v", err)
	}
	if d := dials.Load(); d != 2 {
		t.Errorf("%d connections, want 2", d)
	}
}

func TestClosed(t *testing.T) {
	addr, _ := startFake(t)
	cl, _ := peer.Dial(addr, -1, nil)
	cl.Close()
	if _, err := cl.Fetch(context.Background(), fetchReq(0, 0)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("fetch on a closed client: %v", err)
	}
}

// Records alias the client's buffer until the next request, which reuses
// it: a fetch allocates no buffer for its records.
func TestFetchReusesBuffer(t *testing.T) {
	addr, produce := startFake(t)
	produce(20)
	cl, _ := peer.Dial(addr, -1, nil)
	defer cl.Close()
	ctx := context.Background()
	res, err := cl.Fetch(ctx, fetchReq(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	first := &res[0].Records[0]
	res, err = cl.Fetch(ctx, fetchReq(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if &res[0].Records[0] != first {
		t.Errorf("the second fetch's records are not in the first one's buffer")
	}
}
