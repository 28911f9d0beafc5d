package transport

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-broker/weir/node"
)

func TestConfigValidation(t *testing.T) {
	b := startBroker(t)
	for _, cfg := range []Config{
		{MaxRequestBytes: 5},
		{MaxConnections: -1},
		{MaxInFlightRequests: -1},
		{MaxFetchBytes: -3},
	} {
		if _, err := NewServer(cfg, b.node); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", cfg, err)
		}
	}
	if _, err := NewServer(Config{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil node: %v", err)
	}
	s, err := NewServer(Config{}, b.node)
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.MaxRequestBytes != DefaultMaxRequestBytes || s.log == nil {
		t.Fatalf("defaults not filled: %+v", s.cfg)
	}
	// Serve after Close returns at once.
	s.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
}

// The advertised address defaults to the listener's.
func TestAdvertisedFromListener(t *testing.T) {
	b := startBroker(t)
	rc := b.dial(t)
	resp := rc.do(&kmsg.MetadataRequest{Version: 1}).(*kmsg.MetadataResponse)
	host, port, _ := net.SplitHostPort(b.addr)
	if got := net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))); got != net.JoinHostPort(host, port) {
		t.Fatalf("advertised %s, listening on %s", got, b.addr)
	}
}

func TestMaxConnections(t *testing.T) {
	b := startBroker(t, func(c *Config, _ *node.Config) { c.MaxConnections = 2 })
	first, second := b.dial(t), b.dial(t)
	first.do(apiVersionsReq(3))
	second.do(apiVersionsReq(3))
	third := b.dial(t)
	third.expectClosed()
	// Once one closes, a new connection is served again.
	first.c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc := b.dial(t)
		rc.send(apiVersionsReq(3))
		if _, err := rc.readFrame(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one closed")
		}
	}
}

func TestMetrics(t *testing.T) {
	b := startBroker(t)
	reg := b.node.Metrics()
	b.createTopic(t, "t", 2, nil)
	rc := b.dial(t)
	rc.do(produceReq(7, 1, "t", 1, batch(t, "m", 5)))
	rc.do(produceReq(7, 1, "t", 1, batch(t, "m", 5)))
	rc.do(fetchReq(11, 0, 1, 1<<20, "t", map[int32]int64{0: 0, 1: 0}))
	// A request's metrics are recorded after its response is written, but
	// before the connection reads its next request: one more round trip on
	// the same connection settles them.
	rc.do(kmsg.NewPtrApiVersionsRequest())

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	find := func(name string, labels map[string]string) *dto.Metric {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metrics:
			for _, m := range mf.Metric {
				for _, lp := range m.Label {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue metrics
					}
				}
				return m
			}
		}
		t.Fatalf("no metric %s%v", name, labels)
		return nil
	}
	if v := find("weir_requests_total", map[string]string{"api": "Produce"}).Counter.GetValue(); v != 2 {
		t.Errorf("Produce requests %v", v)
	}
	if v := find("weir_request_duration_seconds", map[string]string{"api": "Fetch"}).Histogram.GetSampleCount(); v != 1 {
		t.Errorf("Fetch latency samples %v", v)
	}
	if v := find("weir_partition_log_end_offset", map[string]string{"topic": "t", "partition": "1"}).Gauge.GetValue(); v != 10 {
		t.Errorf("log end offset %v", v)
	}
	if v := find("weir_partition_log_end_offset", map[string]string{"topic": "t", "partition": "0"}).Gauge.GetValue(); v != 0 {
		t.Errorf("log end offset of partition 0: %v", v)
	}
	find("weir_partition_fsyncs_total", map[string]string{"topic": "t", "partition": "1"})
	in := find("weir_received_bytes_total", nil).Counter.GetValue()
	out := find("weir_sent_bytes_total", nil).Counter.GetValue()
	if in < 200 || out < 200 {
		t.Errorf("bytes in %v, out %v", in, out)
	}
	if v := find("weir_connections", nil).Gauge.GetValue(); v != 1 {
		t.Errorf("connections %v", v)
	}
	// A request that closes its connection counts as an error.
	bad := b.dial(t)
	bad.send(&kmsg.ProduceRequest{Version: 7, Acks: 0, Topics: []kmsg.ProduceRequestTopic{{Topic: "none", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{1}}}}}})
	bad.expectClosed()
	// The count is taken before the connection closes.
	if mfs, err = reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if v := find("weir_request_errors_total", map[string]string{"api": "Produce"}).Counter.GetValue(); v != 1 {
		t.Fatalf("failed Produce requests %v", v)
	}
	if !strings.HasPrefix(kmsg.NameForKey(0), "Produce") {
		t.Fatal("api label names changed")
	}
}
