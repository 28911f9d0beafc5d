package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/core/partlog"
	"github.com/weir-broker/weir/core/replica"
)

// partitionCollector reports every partition's log offsets, size and fsyncs,
// and its replication state on this broker, at scrape time:
//
//	weir_partition_log_start_offset{topic,partition}, weir_partition_log_end_offset,
//	weir_partition_flushed_offset, weir_partition_size_bytes, weir_partition_fsyncs_total,
//	weir_partition_high_watermark, weir_partition_leader (1 where this broker leads),
//	and where it leads: weir_partition_replicas, weir_partition_in_sync_replicas,
//	weir_partition_under_replicated (1 while the ISR is smaller than the replicas, Kafka's
//	UnderReplicatedPartitions), weir_partition_replica_lag_records (the largest follower
//	lag behind the log end, of those heard from in this leader's term: one not heard from
//	yet is left out, its lag unknown, rather than counted from 0 as if it held nothing)
type partitionCollector struct {
	n                                 *Node
	start, end, flushed, size, fsyncs *prometheus.Desc
	hw, leader, replicas, isr, under  *prometheus.Desc
	lag                               *prometheus.Desc
}

func newPartitionCollector(n *Node) *partitionCollector {
	labels := []string{"topic", "partition"}
	return &partitionCollector{
		n:        n,
		start:    prometheus.NewDesc("weir_partition_log_start_offset", "First offset still in the partition's log.", labels, nil),
		end:      prometheus.NewDesc("weir_partition_log_end_offset", "Offset the next record appended to the partition will get.", labels, nil),
		flushed:  prometheus.NewDesc("weir_partition_flushed_offset", "Every offset below it is fsynced.", labels, nil),
		size:     prometheus.NewDesc("weir_partition_size_bytes", "Bytes of the partition's segments.", labels, nil),
		fsyncs:   prometheus.NewDesc("weir_partition_fsyncs_total", "Fsync rounds of the partition's log (group commits, rolls, closes).", labels, nil),
		hw:       prometheus.NewDesc("weir_partition_high_watermark", "Offset consumers read up to on this broker.", labels, nil),
		leader:   prometheus.NewDesc("weir_partition_leader", "1 where this broker leads the partition, else 0.", labels, nil),
		replicas: prometheus.NewDesc("weir_partition_replicas", "Assigned replicas of a partition this broker leads.", labels, nil),
		isr:      prometheus.NewDesc("weir_partition_in_sync_replicas", "In-sync replicas of a partition this broker leads.", labels, nil),
		under:    prometheus.NewDesc("weir_partition_under_replicated", "1 while a partition this broker leads has fewer in-sync replicas than replicas.", labels, nil),
		lag:      prometheus.NewDesc("weir_partition_replica_lag_records", "Records the furthest follower of a partition this broker leads is behind its log end.", labels, nil),
	}
}

func (pc *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pc.start
	ch <- pc.end
	ch <- pc.flushed
	ch <- pc.size
	ch <- pc.fsyncs
	for _, d := range []*prometheus.Desc{pc.hw, pc.leader, pc.replicas, pc.isr, pc.under, pc.lag} {
		ch <- d
	}
}

func (pc *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range pc.n.localPartitions() {
		st := (&Partition{p: p}).Stats()
		labels := []string{p.Topic, strconv.Itoa(int(p.Index))}
		ch <- prometheus.MustNewConstMetric(pc.start, prometheus.GaugeValue, float64(st.LogStartOffset), labels...)
		ch <- prometheus.MustNewConstMetric(pc.end, prometheus.GaugeValue, float64(st.LogEndOffset), labels...)
		ch <- prometheus.MustNewConstMetric(pc.flushed, prometheus.GaugeValue, float64(st.FlushedOffset), labels...)
		ch <- prometheus.MustNewConstMetric(pc.size, prometheus.GaugeValue, float64(st.Size), labels...)
		ch <- prometheus.MustNewConstMetric(pc.fsyncs, prometheus.CounterValue, float64(st.Fsyncs), labels...)
		ch <- prometheus.MustNewConstMetric(pc.hw, prometheus.GaugeValue, float64(st.HighWatermark), labels...)
		rs := p.replicationStats()
		ch <- prometheus.MustNewConstMetric(pc.leader, prometheus.GaugeValue, boolGauge(rs.leading), labels...)
		if !rs.leading {
			continue
		}
		ch <- prometheus.MustNewConstMetric(pc.replicas, prometheus.GaugeValue, float64(rs.replicas), labels...)
		ch <- prometheus.MustNewConstMetric(pc.isr, prometheus.GaugeValue, float64(rs.isr), labels...)
		ch <- prometheus.MustNewConstMetric(pc.under, prometheus.GaugeValue, boolGauge(rs.isr < rs.replicas), labels...)
		ch <- prometheus.MustNewConstMetric(pc.lag, prometheus.GaugeValue, float64(rs.lag), labels...)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// replicationStats is a partition's replication state, for metrics.
type replicationStats struct {
	leading       bool
	replicas, isr int
	lag           int64 // the largest follower lag (records), leader only
}

func (rp *replicated) replicationStats() replicationStats {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r := rp.r
	if r.Role() != replica.Leader {
		return replicationStats{}
	}
	st := replicationStats{leading: true, replicas: len(r.Replicas()), isr: len(r.ISR())}
	for _, id := range r.Replicas() {
		if id == r.Leader() {
			continue
		}
		if end := r.FollowerLogEnd(id); end >= 0 {
			st.lag = max(st.lag, r.LogEnd()-end)
		}
	}
	return st
}

// replicationCounters count replication events on this broker:
//
//	weir_isr_shrinks_total, weir_isr_expands_total (ISR changes this broker wrote as leader),
//	weir_replica_resignations_total (in-sync replicas whose log failed, see replica.LogFailed)
type replicationCounters struct {
	shrinks, expands, resignations prometheus.Counter
}

func newReplicationCounters(reg prometheus.Registerer) *replicationCounters {
	c := &replicationCounters{
		shrinks:      prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_isr_shrinks_total", Help: "ISR shrinks this broker wrote as a leader."}),
		expands:      prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_isr_expands_total", Help: "ISR expansions this broker wrote as a leader."}),
		resignations: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_replica_resignations_total", Help: "Times this broker resigned from a partition's ISR: its log failed while it was in the ISR, or came back from an unclean shutdown with the ISR still naming it."}),
	}
	reg.MustRegister(c.shrinks, c.expands, c.resignations)
	return c
}

// cleanerStats are the log cleaner's counters:
//
//	weir_log_cleaner_passes_total, weir_log_cleaner_bytes_read_total,
//	weir_log_cleaner_bytes_removed_total, weir_log_cleaner_records_removed_total
type cleanerStats struct {
	passes, bytesRead, bytesRemoved, recordsRemoved prometheus.Counter
}

func newCleanerStats(reg prometheus.Registerer) *cleanerStats {
	c := &cleanerStats{
		passes:         prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_log_cleaner_passes_total", Help: "Log cleaner passes that rewrote segments."}),
		bytesRead:      prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_log_cleaner_bytes_read_total", Help: "Bytes of segments the log cleaner rewrote."}),
		bytesRemoved:   prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_log_cleaner_bytes_removed_total", Help: "Bytes the log cleaner removed."}),
		recordsRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_log_cleaner_records_removed_total", Help: "Records the log cleaner removed (superseded, and tombstones past delete.retention.ms)."}),
	}
	reg.MustRegister(c.passes, c.bytesRead, c.bytesRemoved, c.recordsRemoved)
	return c
}

func (c *cleanerStats) record(r partlog.CleanResult) {
	c.passes.Inc()
	c.bytesRead.Add(float64(r.BytesBefore))
	c.bytesRemoved.Add(float64(max(r.BytesBefore-r.BytesAfter, 0)))
	c.recordsRemoved.Add(float64(r.RecordsRemoved))
}

// fileCacheCollector reports the segment-file descriptor budget (package
// filecache) at scrape time:
//
//	weir_segment_files_open, weir_segment_files_limit (0: no limit),
//	weir_segment_file_hits_total (uses that found the file open),
//	weir_segment_file_misses_total (uses that opened it),
//	weir_segment_file_evictions_total (idle files closed to make room),
//	weir_segment_file_overflows_total (opens past the limit, every open file in use),
//	weir_segment_file_refusals_total (fetch reads cut short by the budget)
type fileCacheCollector struct {
	n                       *Node
	open, limit             *prometheus.Desc
	hits, misses, evictions *prometheus.Desc
	overflows, refusals     *prometheus.Desc
}

func newFileCacheCollector(n *Node) *fileCacheCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &fileCacheCollector{
		n:         n,
		open:      d("weir_segment_files_open", "Descriptors the segment files hold now."),
		limit:     d("weir_segment_files_limit", "The segment files' descriptor budget (0: none)."),
		hits:      d("weir_segment_file_hits_total", "Segment file uses that found the file open."),
		misses:    d("weir_segment_file_misses_total", "Segment file uses that opened the file."),
		evictions: d("weir_segment_file_evictions_total", "Idle segment files closed to stay within the budget."),
		overflows: d("weir_segment_file_overflows_total", "Segment files opened past the budget because every open one was in use."),
		refusals:  d("weir_segment_file_refusals_total", "Fetch reads cut short because the budget was full of files in use."),
	}
}

func (fc *fileCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fc.open, fc.limit, fc.hits, fc.misses, fc.evictions, fc.overflows, fc.refusals} {
		ch <- d
	}
}

func (fc *fileCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := fc.n.files.Stats()
	ch <- prometheus.MustNewConstMetric(fc.open, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(fc.limit, prometheus.GaugeValue, float64(st.Limit))
	for _, c := range []struct {
		d *prometheus.Desc
		v int64
	}{{fc.hits, st.Hits}, {fc.misses, st.Misses}, {fc.evictions, st.Evictions}, {fc.overflows, st.Overflows}, {fc.refusals, st.Refusals}} {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
	}
}
