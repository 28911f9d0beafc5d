package scale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/harness/procstat"
)

// The modes of step 6, as metric suffixes.
const (
	ModeSessions   = "sessions"
	ModeNoSessions = "no-sessions"
)

// fetchKey is the Fetch API key.
const fetchKey = 1

// fetchCounter counts the Fetch requests a client wrote and the bytes of
// them and of their responses (kgo hooks: the bytes are the requests' and
// responses' frames, without TLS).
type fetchCounter struct {
	fetches, reqBytes, respBytes atomic.Int64
}

func (c *fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == fetchKey && err == nil {
		c.fetches.Add(1)
		c.reqBytes.Add(int64(n))
	}
}

func (c *fetchCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == fetchKey && err == nil {
		c.respBytes.Add(int64(n))
	}
}

// wireCounter counts every byte through the connections a client dials:
// Fetch and everything else (Metadata, ListOffsets, ApiVersions).
type wireCounter struct{ bytes atomic.Int64 }

func (w *wireCounter) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &w.bytes}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// Step 6: a consumer of min(N, SessionPartitions) partitions from their
// ends, with and without fetch sessions, while a producer writes
// SessionRate records/s to SessionHot of them.
func (r *run) sessions(ctx context.Context) error {
	sc := r.cfg.Scale
	n := min(r.cfg.Partitions, sc.SessionPartitions)
	hot := min(sc.SessionHot, n)
	r.m["session-partitions"] = float64(n)
	granted, err := r.sessionGranted(ctx)
	if err != nil {
		return fmt.Errorf("probing for a fetch session: %w", err)
	}
	r.m["sessions-granted"] = map[bool]float64{true: 1, false: 0}[granted]
	r.progress(fmt.Sprintf("step 6: the broker %s fetch sessions; a consumer of %d partitions, %g records/s to %d of them",
		map[bool]string{true: "grants", false: "declines"}[granted], n, sc.SessionRate, hot))
	per := map[string][2]float64{}
	for _, mode := range []string{ModeSessions, ModeNoSessions} {
		f, err := r.sessionWindow(ctx, mode, n, hot)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		per[mode] = [2]float64{f.reqPerFetch, f.respPerFetch}
		r.m["fetch-req-B-"+mode] = f.reqPerFetch
		r.m["fetch-resp-B-"+mode] = f.respPerFetch
		r.m["wire-B-"+mode] = f.wirePerFetch
		r.m["fetches-"+mode] = float64(f.fetches)
		r.m["broker-cpu-s-"+mode] = f.cpu
		r.progress(fmt.Sprintf("step 6: %s: %d fetches in %v, %.0f B per request, %.0f B per response, broker CPU %.2fs",
			mode, f.fetches, sc.SessionWindow, f.reqPerFetch, f.respPerFetch, f.cpu))
	}
	on, off := per[ModeSessions], per[ModeNoSessions]
	if off[0] > 0 && off[1] > 0 {
		r.m["session-req-ratio"] = on[0] / off[0]
		r.m["session-resp-ratio"] = on[1] / off[1]
	}
	return nil
}

// windowFigures are one mode's figures over the window.
type windowFigures struct {
	fetches                                 int64
	reqPerFetch, respPerFetch, wirePerFetch float64
	cpu                                     float64
	records                                 int64
}

func (r *run) sessionWindow(ctx context.Context, mode string, n, hot int) (windowFigures, error) {
	sc := r.cfg.Scale
	var fig windowFigures
	ctx, cancel := context.WithTimeout(ctx, sc.StepTimeout)
	defer cancel()

	parts := map[string]map[int32]kgo.Offset{}
	for i := range n {
		topic, p := r.at(i)
		if parts[topic] == nil {
			parts[topic] = map[int32]kgo.Offset{}
		}
		parts[topic][p] = kgo.NewOffset().AtEnd()
	}
	counter, wire := &fetchCounter{}, &wireCounter{}
	opts := []kgo.Opt{kgo.ConsumePartitions(parts), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithHooks(counter), kgo.Dialer(wire.dial)}
	if mode == ModeNoSessions {
		opts = append(opts, kgo.DisableFetchSessions())
	}
	cons, err := r.client(opts...)
	if err != nil {
		return fig, err
	}
	defer cons.Close()
	prod, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return fig, err
	}
	defer prod.Close()

	var records atomic.Int64
	var pollErr firstError
	first := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					pollErr.set(err)
				}
			})
			if k := fs.NumRecords(); k > 0 && records.Add(int64(k)) == int64(k) {
				close(first)
			}
		}
	}()
	produced := make(chan error, 1)
	go func() { produced <- r.paced(ctx, prod, hot, sc.SessionRate) }()
	defer func() {
		cancel()
		<-polled
		<-produced
	}()

	// The window opens once the consumer reads the producer's records:
	// its offsets are known, its session (if any) is set up.
	select {
	case <-first:
	case err := <-produced:
		return fig, fmt.Errorf("the producer: %w", err)
	case <-ctx.Done():
		msg := fmt.Sprintf("the consumer read none of the producer's records within %v", sc.StepTimeout)
		if e := pollErr.get(); e != nil {
			msg += fmt.Sprintf(" (a fetch error: %v)", e)
		}
		return fig, errors.New(msg)
	}
	pid := r.broker.Pid()
	cpu0, err := procstat.CPUSeconds(pid)
	if err != nil {
		return fig, err
	}
	f0, q0, s0, w0, rec0 := counter.fetches.Load(), counter.reqBytes.Load(), counter.respBytes.Load(), wire.bytes.Load(), records.Load()
	timer := time.NewTimer(sc.SessionWindow)
	select {
	case <-timer.C:
	case err := <-produced:
		timer.Stop()
		return fig, fmt.Errorf("the producer: %w", err)
	case <-ctx.Done():
		timer.Stop()
		return fig, ctx.Err()
	}
	cpu1, err := procstat.CPUSeconds(pid)
	if err != nil {
		return fig, err
	}
	fig.fetches = counter.fetches.Load() - f0
	fig.records = records.Load() - rec0
	fig.cpu = cpu1 - cpu0
	if fig.fetches == 0 {
		return fig, fmt.Errorf("no fetch request in the %v window", sc.SessionWindow)
	}
	per := func(v int64) float64 { return float64(v) / float64(fig.fetches) }
	fig.reqPerFetch = per(counter.reqBytes.Load() - q0)
	fig.respPerFetch = per(counter.respBytes.Load() - s0)
	fig.wirePerFetch = per(wire.bytes.Load() - w0)
	return fig, nil
}

// paced produces rate records/s round robin over the first hot
// partitions until ctx ends; an acknowledgement error ends it.
func (r *run) paced(ctx context.Context, cl *kgo.Client, hot int, rate float64) error {
	value := []byte(strings.Repeat("s", 100))
	begin := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var failed firstError
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if e := failed.get(); e != nil {
			return e
		}
		for due := int(rate * time.Since(begin).Seconds()); sent < due; sent++ {
			topic, p := r.at(sent % hot)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					failed.set(err)
				}
			})
		}
	}
}

// sessionGranted asks for a fetch session (KIP-227: session id 0, epoch
// 0) on the last partition and reports whether the broker gave one; a
// session given is closed again.
func (r *run) sessionGranted(ctx context.Context) (bool, error) {
	cl, err := r.client()
	if err != nil {
		return false, err
	}
	defer cl.Close()
	topic, part := r.at(r.cfg.Partitions - 1)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes = -1, 1<<20
	req.SessionID, req.SessionEpoch = 0, 0
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.PartitionMaxBytes = part, 1<<20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false, err
	}
	if resp.SessionID == 0 {
		return false, nil
	}
	end := kmsg.NewPtrFetchRequest()
	end.ReplicaID, end.SessionID, end.SessionEpoch = -1, resp.SessionID, -1
	_, _ = end.RequestWith(ctx, cl) // the session expires anyway
	return true, nil
}

// firstError keeps the first error set, for goroutines to report.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
