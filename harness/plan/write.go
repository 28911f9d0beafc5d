package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/weir-broker/weir/harness/report"
)

// Write prints the plan as tables (Markdown when markdown is set): the
// answers with their formulas and numbers and what bound each, then the
// broker constraints, the hardware the plan assumed and any warnings.
func (p *Plan) Write(w io.Writer, markdown bool) error {
	ans := report.Table{Header: []string{"answer", "value", "formula", "numbers", "bound by"}, Align: "lr"}
	for _, a := range p.Answers {
		ans.Rows = append(ans.Rows, []string{a.Name, value(a.Value, a.Unit), a.Formula, a.Numbers, a.BoundBy})
	}
	cons := report.Table{Header: []string{"constraint", "brokers", "formula", "numbers", "binding"}, Align: "lr"}
	for _, c := range p.Constraints {
		n, bind := fmt.Sprint(c.Brokers), ""
		if c.Skipped != "" {
			n, bind = "-", "skipped: "+c.Skipped
		} else if c.Binding {
			bind = "binding"
		}
		cons.Rows = append(cons.Rows, []string{c.Name, n, c.Formula, c.Numbers, bind})
	}
	h := p.Hardware
	hw := report.Table{Header: []string{"hardware (per broker)", "value"}, Align: "lr"}
	for _, r := range [][2]string{
		{"source", h.Source},
		{"broker produce (P)", value(h.BrokerProduceMBps, "MB/s")},
		{"broker consume (C)", value(h.BrokerConsumeMBps, "MB/s")},
		{"partition produce (p)", value(h.PartitionProduceMBps, "MB/s")},
		{"disk sequential write (D)", value(h.DiskSeqWriteMBps, "MB/s")},
		{"fsync latency (p50)", value(float64(h.FsyncLatency.Microseconds()), "µs")},
		{"disks", fmt.Sprint(h.DisksPerBroker)},
		{"disk size", value(h.DiskGiB, "GiB")},
		{"NIC", value(h.NetworkMBps, "MB/s")},
		{"cores", value(h.Cores, "")},
		{"memory", value(h.MemoryGiB, "GiB")},
		{"append CPU (k_l)", value(h.AppendCPUPerMB*1000, "ms/MB")},
		{"serve CPU (k_s)", value(h.ServeCPUPerMB*1000, "ms/MB")},
	} {
		hw.Rows = append(hw.Rows, r[:])
	}
	for _, t := range []report.Table{ans, cons, hw} {
		if err := t.Render(w, markdown); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	notes := append(append([]string(nil), h.Notes...), p.Warnings...)
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// WriteComparisons prints predictions beside measurements, and whether
// each is within frac ("assumed" for the rows that state an assumption).
func WriteComparisons(w io.Writer, cs []Comparison, frac float64, markdown bool) error {
	t := report.Table{Header: []string{"section", "point", "metric", "predicted", "measured (median)", "error", "reps", fmt.Sprintf("within %.0f%%", frac*100)}, Align: "lllrrrrl"}
	for _, c := range cs {
		ok := "yes"
		switch {
		case c.Assumption:
			ok = "assumed"
		case !c.Within(frac):
			ok = "NO"
		}
		t.Rows = append(t.Rows, []string{c.Section, c.Point, c.Metric, fmt.Sprintf("%.4g", c.Predicted), fmt.Sprintf("%.4g", c.Measured),
			fmt.Sprintf("%+.1f%%", 100*c.Error), fmt.Sprint(c.Reps), ok})
	}
	if err := t.Render(w, markdown); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, c := range cs {
		line := c.Metric + ": " + c.Formula + " = " + c.Numbers
		key := c.Section + c.Point + c.Metric
		if seen[key] {
			continue
		}
		seen[key] = true
		if _, err := fmt.Fprintf(w, "%s %s: %s\n", c.Section, c.Point, line); err != nil {
			return err
		}
	}
	return nil
}

// value prints a figure and its unit; "-" for an unknown (zero) one.
func value(v float64, unit string) string {
	if v == 0 {
		return "-"
	}
	return strings.TrimSpace(num(v) + " " + unit)
}
