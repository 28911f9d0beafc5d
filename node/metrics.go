package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/core/partlog"
)

// partitionCollector reports every partition's log offsets, size and fsyncs
// at scrape time:
//
//	weir_partition_log_start_offset{topic,partition}, weir_partition_log_end_offset,
//	weir_partition_flushed_offset, weir_partition_size_bytes, weir_partition_fsyncs_total
type partitionCollector struct {
	n                                 *Node
	start, end, flushed, size, fsyncs *prometheus.Desc
}

func newPartitionCollector(n *Node) *partitionCollector {
	labels := []string{"topic", "partition"}
	return &partitionCollector{
		n:       n,
		start:   prometheus.NewDesc("weir_partition_log_start_offset", "First offset still in the partition's log.", labels, nil),
		end:     prometheus.NewDesc("weir_partition_log_end_offset", "Offset the next record appended to the partition will get.", labels, nil),
		flushed: prometheus.NewDesc("weir_partition_flushed_offset", "Every offset below it is fsynced.", labels, nil),
		size:    prometheus.NewDesc("weir_partition_size_bytes", "Bytes of the partition's segments.", labels, nil),
		fsyncs:  prometheus.NewDesc("weir_partition_fsyncs_total", "Fsync rounds of the partition's log (group commits, rolls, closes).", labels, nil),
	}
}

func (pc *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pc.start
	ch <- pc.end
	ch <- pc.flushed
	ch <- pc.size
	ch <- pc.fsyncs
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
	}
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
