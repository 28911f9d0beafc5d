package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/weir-broker/weir/harness/result"
)

// Colocated is a cluster whose brokers and load generator share one
// machine, as the harness's clusters do.
type Colocated struct {
	Brokers           int
	ReplicationFactor int
	// ConsumerGroups is how many consumers read every record live.
	ConsumerGroups int
	RecordBytes    float64
}

// Prediction is what Predict expects of a colocated cluster.
type Prediction struct {
	// ProduceMBps is the ingress the machine's CPU budget sustains.
	ProduceMBps float64 `json:"produce_mbps"`
	// CPUPerMB is the CPU seconds the brokers and the clients spend per
	// MB produced: the denominator of ProduceMBps, which does not depend
	// on how much of a shared machine the run got.
	CPUPerMB float64 `json:"cpu_s_per_mb"`
	Formula  string  `json:"formula"`
	Numbers  string  `json:"numbers"`
	// DiskPerProduced is the bytes the brokers write per key+value byte
	// produced: R × e × (1 + index).
	DiskPerProduced float64 `json:"disk_per_produced"`
	DiskNumbers     string  `json:"disk_numbers"`
}

// Predict works out what a colocated cluster sustains on the machine
// the profile measured (see the package doc).
func Predict(h Hardware, c Colocated) (Prediction, error) {
	switch {
	case c.ReplicationFactor < 1 || c.Brokers < c.ReplicationFactor:
		return Prediction{}, fmt.Errorf("%w: replication factor %d on %d brokers", ErrInput, c.ReplicationFactor, c.Brokers)
	case c.RecordBytes <= 0:
		return Prediction{}, fmt.Errorf("%w: record size %v", ErrInput, c.RecordBytes)
	case h.HostCPU <= 0 || h.ProducerCPUPerMB <= 0 || h.AppendCPUPerMB <= 0:
		return Prediction{}, fmt.Errorf("%w: the profile has no CPU figures (host CPU %v, k_c %v, k_l %v): take it from a run of the plan-profile preset", ErrInput, h.HostCPU, h.ProducerCPUPerMB, h.AppendCPUPerMB)
	}
	R, G := float64(c.ReplicationFactor), float64(c.ConsumerGroups)
	perMB := h.ProducerCPUPerMB + h.AppendCPUPerMB + (R-1)*(h.AppendCPUPerMB+h.ServeCPUPerMB) + G*(h.ServeCPUPerMB+h.ConsumerCPUPerMB)
	e := Expansion(c.RecordBytes) * (1 + IndexFraction)
	return Prediction{
		ProduceMBps: h.HostCPU / perMB,
		CPUPerMB:    perMB,
		Formula:     "W = B / (k_c + k_l + (R−1)(k_l + k_s) + G × (k_s + k_cc))",
		Numbers: fmt.Sprintf("%.3g / (%.3g + %.3g + %d × (%.3g + %.3g) + %d × (%.3g + %.3g))",
			h.HostCPU, h.ProducerCPUPerMB, h.AppendCPUPerMB, c.ReplicationFactor-1, h.AppendCPUPerMB, h.ServeCPUPerMB,
			c.ConsumerGroups, h.ServeCPUPerMB, h.ConsumerCPUPerMB),
		DiskPerProduced: R * e,
		DiskNumbers:     fmt.Sprintf("%d × %.4f", c.ReplicationFactor, e),
	}, nil
}

// Comparison is one prediction beside a measured run's median.
type Comparison struct {
	Section   string  `json:"section"`
	Point     string  `json:"point"`
	Metric    string  `json:"metric"`
	Predicted float64 `json:"predicted"`
	Measured  float64 `json:"measured"`
	// Error is (predicted − measured) / measured.
	Error   float64 `json:"error"`
	Reps    int     `json:"reps"`
	Formula string  `json:"formula"`
	Numbers string  `json:"numbers"`
	// Assumption marks a row that states what a prediction assumed and
	// what the run measured (MetricBusy: the cluster got the cores the
	// profile got), not a prediction: it is printed, not judged.
	Assumption bool `json:"assumption,omitempty"`
}

// Within reports whether the prediction is within frac of the measure.
func (c Comparison) Within(frac float64) bool { return math.Abs(c.Error) <= frac }

// Fails reports whether c is a prediction off by more than frac
// (assumptions never fail).
func (c Comparison) Fails(frac float64) bool { return !c.Assumption && !c.Within(frac) }

// Metrics Compare sets beside predictions.
const (
	// MetricDiskPerProduced is disk-write-bytes over bytes-produced.
	MetricDiskPerProduced = "disk-write-bytes/bytes-produced"
	// MetricPerBaseline is a point's produce-MB/s over its section's
	// baseline point's, both measured in the same run: the machine's CPU
	// budget cancels from the prediction.
	MetricPerBaseline = "produce-MB/s ÷ baseline"
	// MetricBusy is the cores brokers and clients kept busy over the
	// window: the budget produce-MB/s assumes is the profile's. Its row is
	// an assumption (Comparison.Assumption), set beside what the run got;
	// hold it by running profile and cluster under the same CPU budget (a
	// cgroup quota), or the throughput rows measure the machine's sharing.
	MetricBusy = "cores busy"
	// MetricCPUPerMB is (broker-cpu-s + client-cpu-s) per MB produced.
	MetricCPUPerMB = "cpu-s/MB"
)

// Compare predicts every load point of a measured run of a colocated
// cluster (a cluster target, or one embedded broker) from h, and sets
// each prediction beside the point's median: produce-MB/s (at the CPU
// budget the profile run had), produce-MB/s as a ratio to the section's
// baseline point (the budget cancels), the cores the run kept busy
// against the profile's (the budget assumed), the CPU seconds brokers and clients spent
// per MB produced (which a shared machine's varying load leaves alone:
// produce-MB/s is the CPU a run got over it), and the bytes the brokers
// wrote per byte produced.
func Compare(h Hardware, r *result.Run) ([]Comparison, error) {
	brokers := r.Env.Brokers
	if brokers == 0 {
		return nil, fmt.Errorf("%w: the run measured a bootstrap address (%s): the planner predicts only clusters the harness started", ErrInput, r.Env.Target)
	}
	predict := func(section string, p *result.Point) (Prediction, bool, error) {
		w, ok := workloadOf(r, section, p.ID)
		if !ok || w.MessageSize.Size <= 0 || len(p.Values(result.ProduceMBPerSec)) == 0 || w.Rate > 0 {
			return Prediction{}, false, nil // paced: its throughput is the pace, not the machine's
		}
		groups := 0
		if w.Consumers > 0 {
			groups = 1
		}
		pr, err := Predict(h, Colocated{Brokers: brokers, ReplicationFactor: max(1, w.ReplicationFactor), ConsumerGroups: groups, RecordBytes: float64(w.MessageSize.Size)})
		return pr, err == nil, err
	}
	var out []Comparison
	for _, sec := range r.Sections {
		var base Prediction
		var baseMeasured float64
		for i := range sec.Points {
			if sec.Baseline != "" && sec.Points[i].ID == sec.Baseline {
				pr, ok, err := predict(sec.Name, &sec.Points[i])
				if err != nil {
					return nil, err
				}
				if ok {
					base, baseMeasured = pr, median(sec.Points[i].Values(result.ProduceMBPerSec))
				}
			}
		}
		for i := range sec.Points {
			p := &sec.Points[i]
			pr, ok, err := predict(sec.Name, p)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			produced := p.Values(result.ProduceMBPerSec)
			out = append(out, comparison(sec.Name, p.ID, result.ProduceMBPerSec, pr.ProduceMBps, median(produced), len(produced), pr.Formula, pr.Numbers))
			if base.CPUPerMB > 0 && baseMeasured > 0 && p.ID != sec.Baseline {
				out = append(out, comparison(sec.Name, p.ID, MetricPerBaseline, base.CPUPerMB/pr.CPUPerMB, median(produced)/baseMeasured, len(produced),
					"W / W_baseline = cost_baseline / cost", fmt.Sprintf("%.4g / %.4g (B cancels)", base.CPUPerMB, pr.CPUPerMB)))
			}
			if b := busy(p); len(b) > 0 {
				c := comparison(sec.Name, p.ID, MetricBusy, h.HostCPU, median(b), len(b),
					"B: the cores the profile run kept busy, assumed again", fmt.Sprintf("%.3g", h.HostCPU))
				c.Assumption = true
				out = append(out, c)
			}
			if costs := cpuPerMB(p); len(costs) > 0 {
				out = append(out, comparison(sec.Name, p.ID, MetricCPUPerMB, pr.CPUPerMB, median(costs), len(costs),
					"k_c + k_l + (R−1)(k_l + k_s) + G × (k_s + k_cc)", strings.TrimSuffix(pr.Numbers[strings.Index(pr.Numbers, "(")+1:], ")")))
			}
			if ratios := diskRatios(p); len(ratios) > 0 {
				out = append(out, comparison(sec.Name, p.ID, MetricDiskPerProduced, pr.DiskPerProduced, median(ratios), len(ratios), "R × e × (1 + index)", pr.DiskNumbers))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the run has no unpaced load point with produce-MB/s to compare", ErrInput)
	}
	return out, nil
}

func comparison(section, id, metric string, predicted, measured float64, reps int, formula, numbers string) Comparison {
	c := Comparison{Section: section, Point: id, Metric: metric, Predicted: predicted, Measured: measured, Reps: reps, Formula: formula, Numbers: numbers}
	if measured != 0 {
		c.Error = (predicted - measured) / measured
	}
	return c
}

func cpuPerMB(p *result.Point) []float64 {
	var out []float64
	for _, rp := range p.Reps {
		c, okc := rp.Metrics[result.ClientCPUSeconds]
		b, okb := rp.Metrics[result.BrokerCPUSeconds]
		n := rp.Metrics[result.BytesProduced]
		if rp.Error == "" && okc && okb && n > 0 {
			out = append(out, (c+b)/(n/MB))
		}
	}
	return out
}

func diskRatios(p *result.Point) []float64 {
	var out []float64
	for _, rp := range p.Reps {
		d, ok := rp.Metrics[result.DiskWriteBytes]
		b := rp.Metrics[result.BytesProduced]
		if rp.Error == "" && ok && b > 0 {
			out = append(out, d/b)
		}
	}
	return out
}
