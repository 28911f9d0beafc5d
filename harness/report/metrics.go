package report

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// Group is a family of metrics that share a table in a report.
type Group struct {
	Name    string   // heading: "Throughput", "Produce latency", ...
	Metrics []string // known members, in report order
}

// Groups are the metric families in report order: throughput first, then
// latency percentiles, then what the broker spent (CPU, disk, fsyncs), what
// the codec and partitioner achieved (ratio, skew), and the raw counts.
// Metrics no group names go to "Other", sorted by name, except that unknown
// "/s" metrics join Throughput and unknown "-us" ones join Latency.
var Groups = []Group{
	{"Throughput", []string{
		result.ProduceMsgsPerSec, result.ProduceMBPerSec, result.ConsumeMsgsPerSec, result.ConsumeMBPerSec,
		result.MBPerSec, result.OpsPerSec, result.ValuesPerSec,
	}},
	{"Produce latency", []string{result.AckP50, result.AckP95, result.AckP99, result.AckP999, result.AckMax}},
	{"End-to-end latency", []string{result.E2EP50, result.E2EP95, result.E2EP99, result.E2EP999, result.E2EMax}},
	{"Latency", []string{result.LatP50, result.LatP99, result.LatP999, result.LatMax}},
	{"Resources", []string{
		result.BrokerCPUSeconds, result.BrokerCPUPerGBProduced, result.BrokerConsumeCPUSeconds, result.BrokerCPUPerGBConsumed,
		result.ClientCPUSeconds, result.DiskWriteBytes, result.Fsyncs, result.CompressionRatio, result.PartitionSkew,
	}},
	{"Counts", []string{result.MsgsProduced, result.MsgsConsumed, result.BytesProduced, result.BytesConsumed}},
	{"Other", nil},
}

// rank places a metric in report order: its group, then its position in the
// group (unknown members last, by name).
func rank(metric string) (group, pos int) {
	for gi, g := range Groups {
		if i := slices.Index(g.Metrics, metric); i >= 0 {
			return gi, i
		}
	}
	switch {
	case strings.HasSuffix(metric, "/s"):
		return 0, len(Groups[0].Metrics)
	case strings.HasSuffix(metric, "-us"):
		return 3, len(Groups[3].Metrics)
	}
	return len(Groups) - 1, 0
}

// GroupOf names the group a metric is reported under.
func GroupOf(metric string) string {
	g, _ := rank(metric)
	return Groups[g].Name
}

// SortMetrics sorts metric names into report order, in place.
func SortMetrics(metrics []string) {
	slices.SortFunc(metrics, func(a, b string) int {
		ga, pa := rank(a)
		gb, pb := rank(b)
		if ga != gb {
			return ga - gb
		}
		if pa != pb {
			return pa - pb
		}
		return strings.Compare(a, b)
	})
}

// Metrics returns every metric any successful rep of the points holds, in
// report order; metrics absent everywhere do not appear.
func Metrics(points []result.Point) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range points {
		for _, r := range p.Reps {
			if r.Error != "" {
				continue
			}
			for m := range r.Metrics {
				if !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
		}
	}
	SortMetrics(out)
	return out
}

// metricLabels describe known metrics for plot axes, with units in words.
var metricLabels = map[string]string{
	result.ProduceMsgsPerSec:       "produce throughput (records/s)",
	result.ProduceMBPerSec:         "produce throughput (MB/s)",
	result.ConsumeMsgsPerSec:       "consume throughput (records/s)",
	result.ConsumeMBPerSec:         "consume throughput (MB/s)",
	result.AckP50:                  "produce ack latency p50 (µs)",
	result.AckP95:                  "produce ack latency p95 (µs)",
	result.AckP99:                  "produce ack latency p99 (µs)",
	result.AckP999:                 "produce ack latency p99.9 (µs)",
	result.AckMax:                  "produce ack latency max (µs)",
	result.E2EP50:                  "end-to-end latency p50 (µs)",
	result.E2EP95:                  "end-to-end latency p95 (µs)",
	result.E2EP99:                  "end-to-end latency p99 (µs)",
	result.E2EP999:                 "end-to-end latency p99.9 (µs)",
	result.E2EMax:                  "end-to-end latency max (µs)",
	result.BrokerCPUSeconds:        "broker CPU time (s)",
	result.ClientCPUSeconds:        "load generator CPU time (s)",
	result.BrokerCPUPerGBProduced:  "broker CPU s per GB produced",
	result.BrokerConsumeCPUSeconds: "broker CPU time reading the backlog (s)",
	result.BrokerCPUPerGBConsumed:  "broker CPU s per GB consumed",
	result.DiskWriteBytes:          "bytes written to disk",
	result.Fsyncs:                  "fsyncs",
	result.CompressionRatio:        "compression ratio (uncompressed / stored)",
	result.PartitionSkew:           "partition skew (max / mean records)",
	result.MBPerSec:                "throughput (MB/s)",
	result.OpsPerSec:               "operations/s",
	result.ValuesPerSec:            "values/s",
	result.LatP50:                  "latency p50 (µs)",
	result.LatP99:                  "latency p99 (µs)",
	result.LatP999:                 "latency p99.9 (µs)",
	result.LatMax:                  "latency max (µs)",
}

// MetricLabel describes a metric with its unit, for axis labels; unknown
// metrics are described by their name, which carries the unit.
func MetricLabel(metric string) string {
	if l, ok := metricLabels[metric]; ok {
		return l
	}
	return metric
}

// FormatValue prints v with four significant digits, scaled by k, M, G or T
// from 10000 up, so table columns stay narrow and comparable:
// 0.01235, 1.235, 812.3, 8123, 12.35k, 1.235M.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case v == 0:
		return "0"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	suffix := ""
	for _, s := range []string{"k", "M", "G", "T"} {
		if v < 1e4 && suffix == "" || v < 1e3 && suffix != "" {
			break
		}
		v /= 1000
		suffix = s
	}
	// %.4g would switch to an exponent; 'f' with the decimals that leave
	// four significant digits does not. Rounding may carry into a new
	// digit (9.9996 -> 10.00), which takes one decimal away.
	exp := int(math.Floor(math.Log10(v)))
	if math.Round(v*math.Pow10(3-exp)) >= 1e4 {
		exp++
	}
	return sign + strconv.FormatFloat(v, 'f', max(3-exp, 0), 64) + suffix
}

// FormatSummary prints a sample as "median ± spread%", the spread being the
// MAD as a percentage of the median (see package stats), benchstat's layout.
// A single value prints alone, without a spread.
func FormatSummary(s stats.Summary) string {
	m := FormatValue(s.Median)
	if s.N <= 1 {
		return m
	}
	return m + " ± " + formatPct(s.SpreadPct())
}

func formatPct(p float64) string {
	switch {
	case math.IsInf(p, 0):
		return "∞%"
	case p < 9.95:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}
