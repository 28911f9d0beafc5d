package mirror

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports m's Status at each scrape, and its end-to-end delay
// histogram:
//
//	weir_mirror_records_total{topic,partition}        records the target acknowledged
//	weir_mirror_bytes_total{topic,partition}          their key and value bytes
//	weir_mirror_errors_total{topic,partition,kind}    kind: produce (records refused),
//	                                                  fetch (failed fetches), commit
//	weir_mirror_lag_records{topic,partition}          source end minus the committable position
//	weir_mirror_lag_seconds{topic,partition}          see PartitionStatus.LagSeconds
//	weir_mirror_in_flight_records{topic,partition}    sent, not yet acknowledged
//	weir_mirror_retrying{topic,partition}             1 while a failed partition waits to retry
//	weir_mirror_e2e_seconds                           source timestamp to target acknowledgement
//
// The topic label is the source topic.
func Collector(m *Mirror) prometheus.Collector { return collector{m} }

type collector struct{ m *Mirror }

var (
	descRecords  = prometheus.NewDesc("weir_mirror_records_total", "Records the target acknowledged.", []string{"topic", "partition"}, nil)
	descBytes    = prometheus.NewDesc("weir_mirror_bytes_total", "Key and value bytes of the records the target acknowledged.", []string{"topic", "partition"}, nil)
	descErrors   = prometheus.NewDesc("weir_mirror_errors_total", "Failures: produce (records the target refused), fetch (failed source fetches), commit (failed position commits).", []string{"topic", "partition", "kind"}, nil)
	descLag      = prometheus.NewDesc("weir_mirror_lag_records", "Source high watermark minus the position acknowledged by the target.", []string{"topic", "partition"}, nil)
	descLagSec   = prometheus.NewDesc("weir_mirror_lag_seconds", "Age of the oldest record sent and not acknowledged (or, with none in flight but lag, time since the last acknowledgement).", []string{"topic", "partition"}, nil)
	descInFlight = prometheus.NewDesc("weir_mirror_in_flight_records", "Records sent to the target and not yet acknowledged.", []string{"topic", "partition"}, nil)
	descRetrying = prometheus.NewDesc("weir_mirror_retrying", "1 while a partition that failed waits to retry.", []string{"topic", "partition"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descBytes, descErrors, descLag, descLagSec, descInFlight, descRetrying} {
		ch <- d
	}
	c.m.e2e.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.m.Status() {
		p := strconv.Itoa(int(s.Partition))
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(s.Records), s.Topic, p)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(s.Bytes), s.Topic, p)
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(s.Errors), s.Topic, p, "produce")
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(s.FetchErrors), s.Topic, p, "fetch")
		ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(s.CommitErrors), s.Topic, p, "commit")
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(s.LagRecords), s.Topic, p)
		ch <- prometheus.MustNewConstMetric(descLagSec, prometheus.GaugeValue, s.LagSeconds, s.Topic, p)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(s.InFlight), s.Topic, p)
		retrying := 0.0
		if s.Retrying {
			retrying = 1
		}
		ch <- prometheus.MustNewConstMetric(descRetrying, prometheus.GaugeValue, retrying, s.Topic, p)
	}
	c.m.e2e.Collect(ch)
}
