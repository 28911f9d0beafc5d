package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client settings of the mirror, besides Config's.
const (
	pollWait       = 250 * time.Millisecond // longest the loop waits for records before housekeeping
	flushTimeout   = 30 * time.Second       // on shutdown, for the records in flight
	requestTimeout = 30 * time.Second       // one admin request
	produceGrace   = 5 * time.Second        // a forwarded Produce's answer may come this late after its timeout
	// recordRetries: a record the target keeps refusing with a retriable
	// error (a full disk, no leader) fails after this many tries, so the
	// partition's failure is reported and retried with the mirror's
	// backoff. (kgo.RecordDeliveryTimeout would not do: kgo counts it from
	// the record's timestamp, which is the source's.)
	recordRetries = 10
)

// Mirror copies topics from the source cluster to the target. Create it
// with New, run it with Run; Status may be called at any time.
type Mirror struct {
	cfg    Config
	log    *slog.Logger
	src    *kgo.Client // direct consumer of the source
	tgt    *kgo.Client // idempotent producer to the target
	srcAdm *kadm.Client
	tgtAdm *kadm.Client
	e2e    prometheus.Histogram

	mu     sync.Mutex // guards parts and topics; the loop writes them, Status reads
	parts  map[topicPartition]*tracker
	topics map[string]int32    // mirrored source topics and their partitions consumed
	srcIDs map[string][16]byte // their ids on the source (zero if it has none)

	wake chan struct{} // a promise tells the loop to housekeep now

	syncMu       sync.Mutex
	pendingSyncs []OffsetSync // due, or failed and to be written again

	// Owned by the loop.
	paused      map[*tracker]bool
	syncTopicOK bool
	fetchErrs   map[topicPartition]string // last fetch error logged, so a repeat is not
	truncErr    string                    // resetTruncated's last error logged, so a repeat is not
	inTxn       bool                      // exactly once: a transaction is open
	fw          *forwarder                // Config.Forward

	txnCommits, txnAborts atomic.Int64 // exactly once: transactions ended
}

// New checks cfg and connects the two clients (kgo connects lazily, so an
// unreachable cluster shows in Run's log, not here).
func New(cfg Config) (*Mirror, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	src, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Source...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.FetchMaxPartitionBytes(4 << 20),
		// After OFFSET_OUT_OF_RANGE. Never ahead: below the position,
		// kgo's move is the sign of a truncated source (truncation.go).
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, cfg.SourceOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w client: %w", ErrSource, err)
	}
	tgtOpts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Target...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(cfg.codec),
		kgo.MaxBufferedRecords(max(200_000, 4*cfg.MaxInFlight)),
		kgo.MaxBufferedBytes(256 << 20),
		kgo.RecordRetries(recordRetries),
	}
	if cfg.ExactlyOnce {
		tgtOpts = append(tgtOpts, kgo.TransactionalID(cfg.TransactionalID()),
			kgo.TransactionTimeout(max(time.Minute, 10*cfg.CommitInterval)))
	}
	tgt, err := kgo.NewClient(append(tgtOpts, cfg.TargetOpts...)...)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("%w client: %w", ErrTarget, err)
	}
	m := &Mirror{
		cfg: cfg, log: cfg.Logger, src: src, tgt: tgt,
		srcAdm: kadm.NewClient(src), tgtAdm: kadm.NewClient(tgt),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_mirror_e2e_seconds",
			Help:    "Delay from a source record's timestamp to the target's acknowledgement of its copy.",
			Buckets: prometheus.ExponentialBuckets(0.5e-3, 2, 18), // 0.5 ms .. 65 s
		}),
		wake:      make(chan struct{}, 1),
		parts:     make(map[topicPartition]*tracker),
		topics:    make(map[string]int32),
		srcIDs:    make(map[string][16]byte),
		paused:    make(map[*tracker]bool),
		fetchErrs: make(map[topicPartition]string),
	}
	if cfg.Forward {
		m.fw = newForwarder(m)
	}
	m.srcAdm.SetTimeoutMillis(int32(requestTimeout / time.Millisecond))
	m.tgtAdm.SetTimeoutMillis(int32(requestTimeout / time.Millisecond))
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(Collector(m)); err != nil {
			src.Close() // not m.Close: it would unregister the collector already there
			tgt.Close()
			return nil, fmt.Errorf("%w: register metrics: %w", ErrConfig, err)
		}
	}
	return m, nil
}

// Close closes the clients and unregisters the metrics (so a new Mirror
// may register with the same Registerer). Run must have returned.
func (m *Mirror) Close() {
	if m.cfg.Registerer != nil {
		m.cfg.Registerer.Unregister(Collector(m))
	}
	m.src.Close()
	m.tgt.Close()
	if m.fw != nil {
		m.fw.close()
	}
}

// Run mirrors until ctx ends, then waits (at most flushTimeout) for the
// records in flight, commits the acknowledged positions and returns nil.
// Failures on the way (a cluster unreachable, a partition refused) are
// logged, counted in Status and retried; Run does not return for them.
func (m *Mirror) Run(ctx context.Context) error {
	var nextRefresh, nextCommit, nextGroups time.Time
	if m.cfg.ExactlyOnce {
		// Fence a predecessor before reading positions.
		if err := m.initTxn(ctx); err != nil {
			return nil
		}
	}
	sendCtx, stopSend := context.WithCancel(context.Background())
	defer stopSend()
	sendDone := make(chan struct{})
	if m.fw != nil {
		go func() {
			defer close(sendDone)
			m.fw.send(sendCtx)
		}()
	} else {
		close(sendDone)
	}
	defer func() { stopSend(); <-sendDone }()
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(nextRefresh) {
			wait := m.cfg.RefreshInterval
			if err := m.refresh(ctx); err != nil {
				if ctx.Err() != nil {
					break
				}
				m.log.Warn("mirror: listing topics failed, retrying", "err", err, "retry_in", m.cfg.BackoffMin)
				wait = min(wait, max(m.cfg.BackoffMin, time.Second))
			}
			nextRefresh = time.Now().Add(wait)
		}
		m.housekeep(ctx, now)
		if m.fw == nil {
			m.resetTruncated(ctx)
		}
		if !now.Before(nextCommit) {
			if m.cfg.ExactlyOnce {
				m.commitTxn(ctx)
			} else {
				m.commit(ctx)
			}
			nextCommit = now.Add(m.cfg.CommitInterval)
		}
		if m.cfg.groups != nil && !now.Before(nextGroups) {
			if err := m.syncGroups(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("mirror: group offset sync failed", "err", err)
			}
			nextGroups = now.Add(m.cfg.SyncGroupsInterval)
		}
		if m.fw != nil {
			m.fw.fetchOnce(ctx)
			continue
		}
		fs := m.poll(ctx)
		if fs.IsClientClosed() {
			return fmt.Errorf("%w: client closed while running", ErrSource)
		}
		m.copyFetches(ctx, fs)
	}
	return m.drain()
}

// poll waits at most pollWait for records, less when a promise wakes the
// loop (a failure, or a careful partition's record resolved).
func (m *Mirror) poll(ctx context.Context) kgo.Fetches {
	pollCtx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	go func() {
		select {
		case <-m.wake:
			cancel()
		case <-pollCtx.Done():
		}
	}()
	return m.src.PollFetches(pollCtx)
}

func (m *Mirror) wakeLoop() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// drain waits for the records in flight and commits.
func (m *Mirror) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	m.src.PauseFetchTopics(m.src.GetConsumeTopics()...)
	if m.fw != nil && !m.fw.idle(ctx) {
		m.log.Warn("mirror: batches still in flight at shutdown; their positions are not committed")
	}
	if err := m.tgt.Flush(ctx); err != nil {
		m.log.Warn("mirror: records still in flight at shutdown; their positions are not committed", "err", err)
	}
	m.housekeep(ctx, time.Now()) // the last syncs
	if err := m.tgt.Flush(ctx); err != nil {
		m.log.Warn("mirror: offset syncs still in flight at shutdown", "err", err)
	}
	m.writeSyncs(ctx, nil) // those that failed, once more
	_ = m.tgt.Flush(ctx)
	if m.cfg.ExactlyOnce {
		m.commitTxn(ctx)
		if m.inTxn {
			_ = m.tgt.EndTransaction(ctx, kgo.TryAbort) // empty: nothing was produced since
		}
		return nil
	}
	m.commit(ctx)
	return nil
}

// copyFetches sends the fetched records to the target.
func (m *Mirror) copyFetches(ctx context.Context, fs kgo.Fetches) {
	fs.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		tp := topicPartition{topic, p}
		var loss *kgo.ErrDataLoss
		if tr := m.tracker(tp); tr != nil && errors.As(err, &loss) && m.sourceTruncated(tr, loss.ResetTo, err) {
			return
		}
		msg := err.Error()
		if m.fetchErrs[tp] != msg {
			m.fetchErrs[tp] = msg
			m.log.Warn("mirror: fetch from source failed, the client retries", "topic", topic, "partition", p, "err", err)
		}
		if tr := m.tracker(tp); tr != nil {
			tr.mu.Lock()
			tr.fetchErrors++
			tr.lastErr = fmt.Errorf("%s/%d: fetch: %w", topic, p, err)
			tr.lastErrAt = time.Now()
			tr.mu.Unlock()
		}
	})
	var accepted []*kgo.Record
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		tr := m.tracker(topicPartition{fp.Topic, fp.Partition})
		if tr == nil {
			return
		}
		delete(m.fetchErrs, topicPartition{fp.Topic, fp.Partition})
		if len(fp.Records) > 0 {
			if m.sourceTruncated(tr, fp.Records[0].Offset, nil) {
				return
			}
		}
		accepted = accepted[:0]
		tr.mu.Lock()
		tr.hwm = max(tr.hwm, fp.HighWatermark)
		for _, r := range fp.Records {
			if tr.send(r.Offset, r.LeaderEpoch, r.Timestamp) {
				accepted = append(accepted, r)
			}
		}
		full := tr.inFlight() >= m.cfg.MaxInFlight
		tr.mu.Unlock()
		for _, r := range accepted {
			m.produce(ctx, tr, r)
		}
		if full && !m.paused[tr] {
			m.paused[tr] = true
			m.src.PauseFetchPartitions(map[string][]int32{tr.topic: {tr.partition}})
		}
	})
}

// produce sends the copy of source record r; its promise resolves r in tr.
// It must not hold tr.mu: Produce blocks while the buffer is full, and
// promises need tr.mu to empty it.
func (m *Mirror) produce(ctx context.Context, tr *tracker, r *kgo.Record) {
	offset, ts, size := r.Offset, r.Timestamp, len(r.Key)+len(r.Value)
	out := &kgo.Record{Topic: tr.target, Partition: r.Partition, Key: r.Key, Value: r.Value,
		Headers: r.Headers, Timestamp: r.Timestamp}
	m.tgt.Produce(ctx, out, func(out *kgo.Record, err error) {
		now := time.Now()
		tr.mu.Lock()
		if err != nil {
			first := tr.fail(offset, err, now)
			retry := tr.retryAt.Sub(now)
			tr.mu.Unlock()
			m.wakeLoop()
			if first && ctx.Err() == nil {
				m.log.Warn("mirror: target refused a record; partition paused, retrying from its last acknowledged position",
					"topic", tr.topic, "partition", tr.partition, "target_topic", tr.target, "offset", offset,
					"err", err, "retry_in", retry.Round(time.Millisecond))
			}
			return
		}
		tr.ack(offset, out.Offset, size, now)
		careful := tr.refetch
		tr.mu.Unlock()
		if careful {
			m.wakeLoop()
		}
		if !ts.IsZero() {
			m.e2e.Observe(now.Sub(ts).Seconds())
		}
	})
}

func (m *Mirror) tracker(tp topicPartition) *tracker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[tp]
}

func (m *Mirror) trackers() []*tracker {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*tracker, 0, len(m.parts))
	for _, tr := range m.parts {
		out = append(out, tr)
	}
	return out
}

// housekeep rewinds failed partitions whose backoff passed, pauses and
// resumes fetching, and produces the offset syncs due.
func (m *Mirror) housekeep(ctx context.Context, now time.Time) {
	pause := map[string][]int32{}
	resume := map[string][]int32{}
	rewind := map[string]map[int32]kgo.EpochOffset{}
	var syncs []OffsetSync
	for _, tr := range m.trackers() {
		tr.mu.Lock()
		syncs = append(syncs, tr.takeSyncs()...)
		at, due := tr.rewindDue(now)
		if m.cfg.ExactlyOnce {
			due = false // the transaction aborts at the next commit and rewinds every partition
		}
		if due {
			tr.rewound()
		} else if at, due = tr.refetchDue(); due {
			tr.mu.Unlock()
			if rewind[tr.topic] == nil {
				rewind[tr.topic] = map[int32]kgo.EpochOffset{}
			}
			rewind[tr.topic][tr.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
			continue
		}
		failed, truncated, low := tr.failed, tr.truncated, tr.inFlight() < m.cfg.MaxInFlight/2
		tr.mu.Unlock()
		switch {
		case due:
			if rewind[tr.topic] == nil {
				rewind[tr.topic] = map[int32]kgo.EpochOffset{}
			}
			rewind[tr.topic][tr.partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
			m.log.Info("mirror: retrying partition", "topic", tr.topic, "partition", tr.partition, "from_offset", at)
			if m.paused[tr] && low && !truncated { // a truncated one resumes once reset (resetTruncated)
				resume[tr.topic] = append(resume[tr.topic], tr.partition)
				delete(m.paused, tr)
			}
		case (failed || truncated) && !m.paused[tr]:
			pause[tr.topic] = append(pause[tr.topic], tr.partition)
			m.paused[tr] = true
		case !failed && !truncated && m.paused[tr] && low: // a truncated one resumes once reset (resetTruncated)
			resume[tr.topic] = append(resume[tr.topic], tr.partition)
			delete(m.paused, tr)
		}
	}
	if len(pause) > 0 {
		m.src.PauseFetchPartitions(pause)
	}
	if len(rewind) > 0 {
		m.src.SetOffsets(rewind)
		if m.fw != nil {
			m.fw.setOffsets(rewind)
		}
	}
	if len(resume) > 0 {
		m.src.ResumeFetchPartitions(resume)
	}
	m.writeSyncs(ctx, syncs)
}

// maxPendingSyncs bounds the offset syncs kept while the target refuses
// them; past it the oldest are dropped (translation gets more
// conservative, never wrong).
const maxPendingSyncs = 100_000

// writeSyncs produces the offset syncs due and those that failed before.
// A sync that fails is kept for the next call: a lost sync only makes
// translation more conservative, but syncs are sparse, and the first ones
// (written right after the topic was created, while the producer may not
// see it yet) matter most.
func (m *Mirror) writeSyncs(ctx context.Context, due []OffsetSync) {
	m.syncMu.Lock()
	m.pendingSyncs = append(m.pendingSyncs, due...)
	if n := len(m.pendingSyncs); n > maxPendingSyncs {
		m.pendingSyncs = append(m.pendingSyncs[:0], m.pendingSyncs[n-maxPendingSyncs:]...)
	}
	if !m.syncTopicOK || len(m.pendingSyncs) == 0 {
		m.syncMu.Unlock()
		return
	}
	out := m.pendingSyncs
	m.pendingSyncs = nil
	m.syncMu.Unlock()
	for _, s := range out {
		m.tgt.Produce(ctx, &kgo.Record{Topic: m.cfg.SyncTopic(), Partition: 0, Key: s.key(), Value: s.value()},
			func(_ *kgo.Record, err error) {
				if err == nil {
					return
				}
				m.syncMu.Lock()
				m.pendingSyncs = append(m.pendingSyncs, s)
				m.syncMu.Unlock()
				if ctx.Err() == nil {
					m.log.Debug("mirror: offset sync not written, retrying", "topic", s.Topic, "partition", s.Partition, "err", err)
				}
			})
	}
}

// commit commits the acknowledged positions that moved to the target group
// cfg.Name.
func (m *Mirror) commit(ctx context.Context) {
	var offs kadm.Offsets
	for _, tr := range m.trackers() {
		tr.mu.Lock()
		if tr.next != tr.committed {
			// With the leader epoch of the record before it, so that a
			// restarted mirror can tell whether the source's log was
			// truncated below it meanwhile (KIP-320).
			offs.Add(kadm.Offset{Topic: tr.target, Partition: tr.partition, At: tr.next, LeaderEpoch: tr.epoch, Metadata: tr.srcID})
		}
		tr.mu.Unlock()
	}
	if len(offs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := m.tgtAdm.CommitOffsets(cctx, m.cfg.Name, offs)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("mirror: committing positions to the target failed, retrying", "group", m.cfg.Name, "err", err)
		}
		return
	}
	m.mu.Lock()
	byTarget := make(map[topicPartition]*tracker, len(m.parts))
	for _, tr := range m.parts {
		byTarget[topicPartition{tr.target, tr.partition}] = tr
	}
	m.mu.Unlock()
	var failed []error
	resp.Each(func(r kadm.OffsetResponse) {
		tr := byTarget[topicPartition{r.Topic, r.Partition}]
		if tr == nil {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if r.Err != nil {
			tr.lastErr = fmt.Errorf("%s/%d: commit position %d to target group %s: %w", tr.topic, tr.partition, r.At, m.cfg.Name, r.Err)
			tr.lastErrAt = time.Now()
			tr.commitErrors++
			tr.commitFails++
			if tr.commitFails > 1 { // the first commit after creating a topic may precede its metadata
				failed = append(failed, tr.lastErr)
			}
			return
		}
		tr.commitFails = 0
		tr.committed = r.At
	})
	if len(failed) > 0 && ctx.Err() == nil {
		m.log.Warn("mirror: committing positions to the target failed, retrying", "partitions", len(failed), "first", failed[0])
	}
}

// Status returns what the mirror knows of each partition, sorted by topic
// and partition.
func (m *Mirror) Status() []PartitionStatus {
	now := time.Now()
	trs := m.trackers()
	out := make([]PartitionStatus, 0, len(trs))
	for _, tr := range trs {
		out = append(out, tr.status(now))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
