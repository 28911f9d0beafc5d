package durability

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/harness/clusterproc"
	"github.com/weir-broker/weir/harness/result"
)

// observer watches a cluster through Metadata: who leads what, who is in
// sync, which brokers are registered. It asks the running brokers in
// turn, each with a short deadline, so a stopped or paused broker delays
// nothing. While sampling, it records the cluster every sampleEvery
// (result.Sample) and counts leader elections (a new leader at a newer
// leader epoch than any seen) and ISR shrinks and expansions (the rises
// of each broker process's weir_isr_shrinks_total and _expands_total:
// what leaders wrote; a process killed between two samples takes its
// last rises with it, so these are lower bounds).
type observer struct {
	c      *clusterproc.Cluster
	cl     *kgo.Client
	topics []string
	parts  int
	next   atomic.Int64 // the broker to ask first, rotated (the sampler and the faults both ask)

	mu      sync.Mutex
	start   time.Time
	samples []result.Sample
	epochs  map[tp]int32 // the newest leader epoch seen per partition
	leaders map[tp]int32 // and its leader (the last one not none)
	// isrSeen is the last weir_isr_{shrinks,expands}_total read from each
	// broker process (by pid): counters start at zero with each process,
	// so what the lab counts is the sum of their rises.
	isrSeen  map[int][2]float64
	counts   clusterCounts
	stopping chan struct{}
	done     chan struct{}
}

// clusterCounts are what the observer counted while sampling.
type clusterCounts struct {
	elections, shrinks, expands int64
}

// metadataTimeout bounds one Metadata request to one broker.
const metadataTimeout = time.Second

func newObserver(c *clusterproc.Cluster, topics []string, parts int) (*observer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClient, err)
	}
	return &observer{c: c, cl: cl, topics: topics, parts: parts, epochs: map[tp]int32{}, leaders: map[tp]int32{}, isrSeen: map[int][2]float64{}}, nil
}

func (o *observer) metadataRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range o.topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

// metadataOfEach asks every running broker for the topics' metadata, and
// returns the answers by broker; the first failure fails it.
func (o *observer) metadataOfEach(ctx context.Context) (map[int32]*kmsg.MetadataResponse, error) {
	req := o.metadataRequest()
	ids := liveIDs(o.c)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no broker running", ErrBroker)
	}
	out := make(map[int32]*kmsg.MetadataResponse, len(ids))
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, metadataTimeout)
		resp, err := req.RequestWith(rctx, o.cl.Broker(int(id)))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("broker %d: %w", id, err)
		}
		out[id] = resp
	}
	return out, nil
}

// metadata asks the running brokers in turn for the topics' metadata and
// returns the first answer.
func (o *observer) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := o.metadataRequest()
	ids := liveIDs(o.c)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no broker running", ErrBroker)
	}
	var last error
	first := int(o.next.Add(1))
	for i := range ids {
		id := ids[(first+i)%len(ids)]
		rctx, cancel := context.WithTimeout(ctx, metadataTimeout)
		resp, err := req.RequestWith(rctx, o.cl.Broker(int(id)))
		cancel()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = fmt.Errorf("broker %d: %w", id, err)
	}
	return nil, last
}

// partitionState is one partition as Metadata described it.
type partitionState struct {
	leader, epoch int32
	replicas, isr []int32
}

// states indexes a Metadata answer by partition; it fails unless every
// partition of every topic is described without error.
func (o *observer) states(resp *kmsg.MetadataResponse) (map[tp]partitionState, []int32, error) {
	out := map[tp]partitionState{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		ti := slices.Index(o.topics, *t.Topic)
		if ti < 0 {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, nil, fmt.Errorf("topic %s: %w", *t.Topic, err)
		}
		for _, p := range t.Partitions {
			out[tp{int32(ti), p.Partition}] = partitionState{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR}
		}
	}
	if len(out) != len(o.topics)*o.parts {
		return nil, nil, fmt.Errorf("%d of %d partitions described", len(out), len(o.topics)*o.parts)
	}
	brokers := make([]int32, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	return out, brokers, nil
}

// poll calls cond with each Metadata answer until it returns true or the
// timeout passes; the error then says what cond said last.
func (o *observer) poll(ctx context.Context, timeout time.Duration, cond func(map[tp]partitionState, []int32) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		resp, err := o.metadata(ctx)
		if err == nil {
			var st map[tp]partitionState
			var brokers []int32
			if st, brokers, err = o.states(resp); err == nil {
				var ok bool
				if ok, err = cond(st, brokers); ok {
					return nil
				}
			}
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %v", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// waitWhole waits until every running broker describes every partition
// with a registered leader and a full ISR, all of them the same leader in
// the same epoch, and returns how long that took. Every broker, not one:
// a broker that has just woken up (SIGCONT, a link back up) answers from
// the picture it had before the fault, whole and stale, until it has read
// the cluster again; a check made then would compare replicas it has not
// yet truncated or caught up.
func (o *observer) waitWhole(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	deadline := begin.Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = o.whole(ctx)
		if last == nil {
			return time.Since(begin), nil
		}
		if time.Now().After(deadline) {
			return time.Since(begin), fmt.Errorf("not within %v: %v", timeout, last)
		}
		select {
		case <-ctx.Done():
			return time.Since(begin), ctx.Err()
		case <-tick.C:
		}
	}
}

// whole is one look of waitWhole: nil when every running broker describes
// the cluster whole and all agree.
func (o *observer) whole(ctx context.Context) error {
	answers, err := o.metadataOfEach(ctx)
	if err != nil {
		return err
	}
	var agreed map[tp]partitionState
	var from int32
	for _, id := range slices.Sorted(maps.Keys(answers)) {
		st, brokers, err := o.states(answers[id])
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		for k, s := range st {
			switch {
			case s.leader < 0 || !slices.Contains(brokers, s.leader):
				return fmt.Errorf("broker %d: %d/%d has no leader", id, k.topic, k.partition)
			case len(s.isr) != len(s.replicas):
				return fmt.Errorf("broker %d: %d/%d has ISR %v of replicas %v", id, k.topic, k.partition, s.isr, s.replicas)
			}
			if a, ok := agreed[k]; ok && (a.leader != s.leader || a.epoch != s.epoch) {
				return fmt.Errorf("%d/%d: broker %d says leader %d in epoch %d, broker %d leader %d in epoch %d",
					k.topic, k.partition, from, a.leader, a.epoch, id, s.leader, s.epoch)
			}
		}
		if agreed == nil {
			agreed, from = st, id
		}
	}
	return nil
}

// leaderOf waits for partition (topic index, partition) to have a leader
// and returns it.
func (o *observer) leaderOf(ctx context.Context, topic, partition int, timeout time.Duration) (int32, error) {
	leader := int32(-1)
	err := o.poll(ctx, timeout, func(st map[tp]partitionState, brokers []int32) (bool, error) {
		s := st[tp{int32(topic), int32(partition)}]
		if s.leader < 0 || !slices.Contains(brokers, s.leader) {
			return false, fmt.Errorf("%d/%d: %w", topic, partition, errNoLeader)
		}
		leader = s.leader
		return true, nil
	})
	return leader, err
}

// followerOf waits for partition (topic index, partition) to have a
// leader and a registered follower, and returns the follower (the first
// in the assignment).
func (o *observer) followerOf(ctx context.Context, topic, partition int, timeout time.Duration) (int32, error) {
	follower := int32(-1)
	err := o.poll(ctx, timeout, func(st map[tp]partitionState, brokers []int32) (bool, error) {
		s := st[tp{int32(topic), int32(partition)}]
		for _, r := range s.replicas {
			if r != s.leader && s.leader >= 0 && slices.Contains(brokers, r) {
				follower = r
				return true, nil
			}
		}
		return false, fmt.Errorf("%d/%d (leader %d, replicas %v): no follower registered", topic, partition, s.leader, s.replicas)
	})
	return follower, err
}

// controller waits for the cluster to have a controller and returns it.
func (o *observer) controller(ctx context.Context, timeout time.Duration) (int32, error) {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := o.metadata(ctx)
		if err == nil && resp.ControllerID >= 0 {
			return resp.ControllerID, nil
		}
		if err == nil {
			err = fmt.Errorf("no controller")
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("%w: controller: %w", ErrBroker, err)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitGone waits until the brokers no longer list broker id (its
// ZooKeeper session expired and its registration went with it).
func (o *observer) waitGone(ctx context.Context, id int32, timeout time.Duration) error {
	err := o.poll(ctx, timeout, func(_ map[tp]partitionState, brokers []int32) (bool, error) {
		if slices.Contains(brokers, id) {
			return false, fmt.Errorf("broker %d still registered", id)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: session of broker %d: %w", ErrBroker, id, err)
	}
	return nil
}

// assignment returns each partition's replicas, as described now, its
// leader first (when it has one); the error says why Metadata could not tell within 10 s.
func (o *observer) assignment() (map[tp][]int32, error) {
	out := map[tp][]int32{}
	err := o.poll(context.Background(), 10*time.Second, func(st map[tp]partitionState, _ []int32) (bool, error) {
		for k, s := range st {
			// The leader first: the others are compared with it.
			rs := slices.Clone(s.replicas)
			if i := slices.Index(rs, s.leader); i > 0 {
				rs[0], rs[i] = rs[i], rs[0]
			}
			out[k] = rs
		}
		return true, nil
	})
	return out, err
}

// startSampling samples the cluster every sampleEvery until stopSampling,
// times counted from start.
func (o *observer) startSampling(start time.Time) {
	o.start = start
	o.stopping, o.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(o.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			o.sample()
			select {
			case <-o.stopping:
				return
			case <-tick.C:
			}
		}
	}()
}

func (o *observer) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*metadataTimeout)
	defer cancel()
	at := time.Since(o.start)
	resp, err := o.metadata(ctx)
	if err != nil {
		return // nobody answered: the sample is missing, not zero
	}
	st, brokers, err := o.states(resp)
	if err != nil {
		return
	}
	lag, isr := o.scrape(ctx)
	s := result.Sample{At: at, MaxLag: lag}
	o.mu.Lock()
	defer o.mu.Unlock()
	for pid, v := range isr {
		last := o.isrSeen[pid]
		o.counts.shrinks += int64(max(v[0]-last[0], 0))
		o.counts.expands += int64(max(v[1]-last[1], 0))
		o.isrSeen[pid] = v
	}
	for k, p := range st {
		if p.leader < 0 || !slices.Contains(brokers, p.leader) {
			s.Offline++
		}
		if len(p.isr) < len(p.replicas) {
			s.UnderReplicated++
		}
		// An election is a new leader at a newer leader epoch: the epoch
		// also moves with ISR changes, and a broker asked may still
		// describe an older epoch (it is ignored).
		if e, ok := o.epochs[k]; !ok || p.epoch > e {
			o.epochs[k] = p.epoch
			if p.leader >= 0 {
				if l, ok := o.leaders[k]; ok && l != p.leader {
					o.counts.elections++
				}
				o.leaders[k] = p.leader
			}
		}
	}
	o.samples = append(o.samples, s)
}

// scrape reads the running brokers' /metrics: the largest
// weir_partition_replica_lag_records (-1 when none answered), and each
// process's ISR shrink and expand counters, by pid.
func (o *observer) scrape(ctx context.Context) (int64, map[int][2]float64) {
	type target struct {
		addr string
		pid  int
	}
	var ts []target
	for _, b := range o.c.Members() {
		select {
		case <-b.Exited():
		default:
			if b.MetricsAddr != "" {
				ts = append(ts, target{b.MetricsAddr, b.Pid()})
			}
		}
	}
	lags := make([]int64, len(ts))
	isrs := make([]*[2]float64, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() { lags[i], isrs[i] = scrapeBroker(ctx, t.addr) })
	}
	wg.Wait()
	lag := int64(-1)
	isr := map[int][2]float64{}
	for i, t := range ts {
		lag = max(lag, lags[i])
		if isrs[i] != nil {
			isr[t.pid] = *isrs[i]
		}
	}
	return lag, isr
}

// scrapeBroker reads one broker's largest replica lag and its ISR shrink
// and expand counters from its /metrics (-1 and nil when it does not
// answer in time).
func scrapeBroker(ctx context.Context, addr string) (int64, *[2]float64) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return -1, nil
	}
	lag := int64(0)
	if f := fams["weir_partition_replica_lag_records"]; f != nil {
		for _, m := range f.GetMetric() {
			lag = max(lag, int64(m.GetGauge().GetValue()))
		}
	}
	var isr [2]float64
	for i, name := range []string{"weir_isr_shrinks_total", "weir_isr_expands_total"} {
		if f := fams[name]; f != nil {
			for _, m := range f.GetMetric() {
				isr[i] += m.GetCounter().GetValue()
			}
		}
	}
	return lag, &isr
}

// stopSampling ends sampling and returns the samples and counts.
func (o *observer) stopSampling() ([]result.Sample, clusterCounts) {
	if o.stopping == nil {
		return nil, clusterCounts{}
	}
	select {
	case <-o.stopping:
	default:
		close(o.stopping)
	}
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.samples), o.counts
}

func (o *observer) close() {
	o.stopSampling()
	o.cl.Close()
}
