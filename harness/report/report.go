// Package report turns a run (package result) into what people and tools
// read: a results directory with the raw run, a Markdown report, SVG plots
// and Go benchmark lines.
//
//	DIR/run.json     the run as recorded: every rep of every point (result.Run.Write)
//	DIR/report.md    environment, one set of tables per section, published
//	                 figures beside this machine's, failed reps, plots, the spec
//	DIR/bench.txt    Go benchmark format, one line per rep, for benchstat
//	DIR/plots/*.svg  each key metric against each varied factor
//
// Statistics are computed here from the reps, never stored (see package
// stats for the choices): a table cell is "median ± spread%", the spread
// being the median absolute deviation as a percentage of the median, which
// stays meaningful with the default five reps; plots draw the median with
// min-max error bars, which hide nothing. bench.txt holds the raw reps
// rather than the medians so that benchstat computes its own statistics, and
// two bench.txt files compare with `benchstat old.txt new.txt` as well as
// with `weir compare`.
//
// Reports are deterministic: the same run gives byte-identical files, so
// results committed under results/ diff cleanly and tests compare them with
// golden files.
package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// Errors returned by this package.
var (
	// ErrRun: the run cannot be reported (nil, or a section without a name).
	ErrRun = errors.New("report: invalid run")
	// ErrWrite: an output file could not be written.
	ErrWrite = errors.New("report: write")
)

// Names of the files Write creates in a results directory.
const (
	RunFile      = "run.json"
	MarkdownFile = "report.md"
	BenchFile    = "bench.txt"
	PlotsDir     = "plots"
)

// Write creates the results directory dir (and its parents) and writes the
// run's files into it: run.json, report.md, bench.txt and plots/*.svg.
// Existing files of those names are replaced, and SVG files in plots/ that
// this run does not draw are removed (a report must not link, nor sit next
// to, a plot of another run); other files are left alone.
func Write(dir string, run *result.Run) error {
	if err := check(run); err != nil {
		return err
	}
	plots := filepath.Join(dir, PlotsDir)
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	stale, err := filepath.Glob(filepath.Join(plots, "*.svg"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
	}
	if err := run.Write(filepath.Join(dir, RunFile)); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if _, err := WritePlots(plots, run); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, MarkdownFile), func(w io.Writer) error { return WriteMarkdown(w, run) }); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, BenchFile), func(w io.Writer) error { return WriteBench(w, run) })
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}

func check(run *result.Run) error {
	if run == nil {
		return fmt.Errorf("%w: nil run", ErrRun)
	}
	for i, s := range run.Sections {
		if strings.TrimSpace(s.Name) == "" {
			return fmt.Errorf("%w: section %d has no name", ErrRun, i)
		}
	}
	return nil
}

// view is a section prepared for printing: which factors vary, which
// metrics appear, and the summary of every (point, metric).
type view struct {
	sec     *result.Section
	varying []string             // factors with more than one level, in matrix order
	fixed   []result.FactorValue // factors with one level
	levels  map[string][]string  // factor -> levels in order of first appearance
	metrics []string             // report order, absent-everywhere ones dropped
	sums    []map[string]stats.Summary
	ok      []int // successful reps per point
}

func newView(sec *result.Section) *view {
	v := &view{sec: sec, levels: map[string][]string{}}
	factors := slices.Clone(sec.Factors)
	for _, p := range sec.Points { // factors a point names but the section does not
		for _, f := range p.Factors {
			if !slices.Contains(factors, f.Name) {
				factors = append(factors, f.Name)
			}
		}
	}
	for _, name := range factors {
		for _, p := range sec.Points {
			level := factorLevel(&p, name)
			if !slices.Contains(v.levels[name], level) {
				v.levels[name] = append(v.levels[name], level)
			}
		}
		switch ls := v.levels[name]; {
		case len(ls) > 1:
			v.varying = append(v.varying, name)
		case len(ls) == 1:
			v.fixed = append(v.fixed, result.FactorValue{Name: name, Value: ls[0]})
		}
	}
	v.metrics = Metrics(sec.Points)
	for i := range sec.Points {
		p := &sec.Points[i]
		sums := map[string]stats.Summary{}
		for _, m := range v.metrics {
			if s, err := stats.Summarize(p.Values(m)); err == nil {
				sums[m] = s
			}
		}
		v.sums = append(v.sums, sums)
		ok := 0
		for _, r := range p.Reps {
			if r.Error == "" {
				ok++
			}
		}
		v.ok = append(v.ok, ok)
	}
	return v
}

func factorLevel(p *result.Point, name string) string {
	if l, ok := p.Factor(name); ok {
		return l
	}
	return "-"
}

// labelColumns are the columns that name a point: the varied factors, or
// the point ID when nothing varies.
func (v *view) labelColumns() []string {
	if len(v.varying) == 0 {
		return []string{"point"}
	}
	return v.varying
}

func (v *view) label(i int) []string {
	p := &v.sec.Points[i]
	if len(v.varying) == 0 {
		return []string{orDash(p.ID)}
	}
	out := make([]string, len(v.varying))
	for j, f := range v.varying {
		out[j] = factorLevel(p, f)
	}
	return out
}

// cell prints one point's metric, noting the sample size when it differs
// from the point's successful reps (a metric some reps lack).
func (v *view) cell(i int, metric string) string {
	s, ok := v.sums[i][metric]
	if !ok {
		return "-"
	}
	c := FormatSummary(s)
	if s.N != v.ok[i] {
		c += " (n=" + strconv.Itoa(s.N) + ")"
	}
	return c
}

func (v *view) reps(i int) string {
	total := len(v.sec.Points[i].Reps)
	if v.ok[i] == total {
		return strconv.Itoa(total)
	}
	return fmt.Sprintf("%d of %d", v.ok[i], total)
}

// metricTables splits a section's metrics into tables: one per group, or a
// single table when there are few metrics.
func (v *view) metricTables() []Group {
	if len(v.metrics) <= 6 {
		return []Group{{Name: "", Metrics: v.metrics}}
	}
	var out []Group
	for _, m := range v.metrics {
		g := GroupOf(m)
		if len(out) == 0 || out[len(out)-1].Name != g {
			out = append(out, Group{Name: g})
		}
		out[len(out)-1].Metrics = append(out[len(out)-1].Metrics, m)
	}
	return out
}

// pointTable is one table of a section: a row per point, the label
// columns, the given metrics and, when withReps, the rep count.
func (v *view) pointTable(metrics []string, withReps bool) Table {
	t := Table{Header: slices.Clone(v.labelColumns())}
	t.Align = strings.Repeat("l", len(t.Header))
	t.Header = append(t.Header, metrics...)
	if withReps {
		t.Header = append(t.Header, "reps")
	}
	t.Align += strings.Repeat("r", len(t.Header)-len(t.Align))
	for i := range v.sec.Points {
		row := v.label(i)
		for _, m := range metrics {
			row = append(row, v.cell(i, m))
		}
		if withReps {
			row = append(row, v.reps(i))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// refRow is a published figure beside this machine's.
type refRow struct {
	ref      result.Reference
	point    string // the point measured ("" when none)
	measured *stats.Summary
}

// references pairs the run's references for section v with measured
// figures. A reference to the section as a whole takes the best point (by
// the metric's direction).
func (v *view) references(refs []result.Reference) []refRow {
	var out []refRow
	for _, ref := range refs {
		if ref.Section != v.sec.Name {
			continue
		}
		row := refRow{ref: ref}
		for i, p := range v.sec.Points {
			s, ok := v.sums[i][ref.Metric]
			if !ok || (ref.PointID != "" && p.ID != ref.PointID) {
				continue
			}
			better := row.measured == nil ||
				(result.HigherIsBetter(ref.Metric) && s.Median > row.measured.Median) ||
				(!result.HigherIsBetter(ref.Metric) && s.Median < row.measured.Median)
			if better {
				row.point, row.measured = p.ID, &s
			}
		}
		out = append(out, row)
	}
	return out
}

func referenceTable(refs []refRow) Table {
	t := Table{Header: []string{"point", "metric", "this machine", "published", "ratio", "published figure", "source"}, Align: "llrrrll"}
	for _, r := range refs {
		measured, ratio := "not measured", "-"
		if r.measured != nil {
			measured = FormatSummary(*r.measured)
			if r.ref.Value != 0 {
				ratio = FormatValue(r.measured.Median/r.ref.Value) + "×"
			}
		}
		point := r.point
		if r.ref.PointID != "" {
			point = r.ref.PointID
		} else if point != "" {
			point = "best: " + point
		}
		t.Rows = append(t.Rows, []string{orDash(point), r.ref.Metric, measured, FormatValue(r.ref.Value), ratio,
			orDash(r.ref.Label), orDash(r.ref.Source)})
	}
	return t
}

// baselineMetrics are the metrics a baseline table sets against the
// baseline's, those present: throughput, the latencies' middle and tail,
// and what the brokers spent.
var baselineMetrics = []string{
	result.ProduceMBPerSec, result.ProduceMsgsPerSec, result.ConsumeMBPerSec,
	result.AckP50, result.AckP99, result.E2EP50, result.E2EP99, result.BrokerCPUSeconds,
	result.BrokerCPUPerGBProduced, result.BrokerCPUPerGBConsumed,
}

// baselineTable sets every point against the section's baseline: each
// metric's median over the baseline's. ok is false when the section has
// no baseline, or the baseline point did not finish.
func (v *view) baselineTable() (t Table, ok bool) {
	base := slices.IndexFunc(v.sec.Points, func(p result.Point) bool { return p.ID == v.sec.Baseline })
	if v.sec.Baseline == "" || base < 0 {
		return Table{}, false
	}
	var metrics []string
	for _, m := range baselineMetrics {
		if _, ok := v.sums[base][m]; ok {
			metrics = append(metrics, m)
		}
	}
	if len(metrics) == 0 {
		return Table{}, false
	}
	t.Header = slices.Clone(v.labelColumns())
	t.Align = strings.Repeat("l", len(t.Header)) + strings.Repeat("r", len(metrics))
	t.Header = append(t.Header, metrics...)
	for i := range v.sec.Points {
		row := v.label(i)
		for _, m := range metrics {
			s, ok := v.sums[i][m]
			b := v.sums[base][m]
			if !ok || b.Median == 0 {
				row = append(row, "-")
				continue
			}
			row = append(row, FormatValue(s.Median/b.Median)+"×")
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

// baselineNote introduces a baseline table.
func (v *view) baselineNote() string {
	return fmt.Sprintf("Each point's median over the baseline's (%s), measured in this run: above 1× is more "+
		"throughput, or more latency or CPU, than the baseline.", v.sec.Baseline)
}

// failures lists failed reps: point, rep number (from 1), error.
func (v *view) failures() Table {
	t := Table{Header: []string{"point", "rep", "error"}, Align: "lrl"}
	for _, p := range v.sec.Points {
		for j, r := range p.Reps {
			if r.Error != "" {
				t.Rows = append(t.Rows, []string{orDash(p.ID), strconv.Itoa(j + 1), r.Error})
			}
		}
	}
	return t
}

// envRows describes where the run measured, for the environment table.
func envRows(run *result.Run) [][]string {
	e := run.Env
	rot := "unknown"
	if e.Rotational != nil {
		rot = map[bool]string{true: "yes (the kernel's flag)", false: "no (the kernel's flag)"}[*e.Rotational]
	}
	cpu := orDash(e.CPUModel)
	if e.CPUs > 0 {
		cpu += fmt.Sprintf(" (%d CPUs)", e.CPUs)
	}
	mem := "-"
	if e.MemoryMiB > 0 {
		mem = fmt.Sprintf("%d MiB", e.MemoryMiB)
	}
	rows := [][]string{
		{"host", orDash(e.Hostname)},
		{"CPU", cpu},
		{"memory", mem},
		{"kernel", orDash(e.Kernel)},
		{"Go", orDash(e.GoVersion)},
		{"weir commit", orDash(e.WeirCommit)},
		{"target", orDash(e.Target)},
	}
	// Only runs whose target was started by the runner say these; older
	// runs' reports stay as they were.
	if e.Brokers > 0 {
		rows = append(rows, []string{"brokers", strconv.Itoa(e.Brokers)})
	}
	if e.ZooKeeper != "" {
		rows = append(rows, []string{"ZooKeeper", e.ZooKeeper})
	}
	if e.Networking != "" {
		rows = append(rows, []string{"networking", e.Networking})
	}
	if e.TLSFetch != "" {
		rows = append(rows, []string{"TLS fetch path", e.TLSFetch})
	}
	if e.BrokerOpenFiles != "" {
		rows = append(rows, []string{"broker open-file limit", e.BrokerOpenFiles})
	}
	return deviceRows(append(rows, [][]string{
		{"data directory", orDash(e.DataDir)},
		{"file system", orDash(strings.TrimSpace(e.FileSystem + " " + parens(e.MountOptions)))},
		{"device", orDash(strings.TrimSpace(e.Device + " " + parens(e.DeviceModel)))},
		{"rotational", rot},
		{"I/O scheduler", orDash(e.Scheduler)},
		{"RAID", orDefault(e.RAID, "none")},
	}...), e)
}

// deviceRows adds what runs on emulated disks, or with a disk probe, say about the device; older runs' reports
// stay as they were.
func deviceRows(rows [][]string, e result.Env) [][]string {
	if e.EmulatedDevice != "" {
		rows = append(rows, []string{"emulated disk", e.EmulatedDevice})
	}
	if e.DiskVerdict != "" {
		rows = append(rows, []string{"disk as measured", e.DiskVerdict})
	}
	return rows
}

// runLine is the one-line summary under a report's title.
func runLine(run *result.Run) string {
	var parts []string
	if !run.Started.IsZero() {
		s := "started " + run.Started.UTC().Format(time.RFC3339)
		if !run.Ended.IsZero() && run.Ended.After(run.Started) {
			s += ", ran " + run.Ended.Sub(run.Started).Round(time.Second).String()
		}
		parts = append(parts, s)
	}
	parts = append(parts, "seed "+strconv.FormatInt(run.Seed, 10))
	reps, points := 0, 0
	for _, s := range run.Sections {
		for _, p := range s.Points {
			points++
			reps += len(p.Reps)
		}
	}
	parts = append(parts, fmt.Sprintf("%d sections, %d points, %d reps", len(run.Sections), points, reps))
	return strings.Join(parts, "; ")
}

// ownReportNote stands for the tables of a section that reports itself
// (result.Section.OwnReport).
const ownReportNote = "This experiment reports its figures in a section of its own, below; every repetition's raw " +
	"figures are in run.json and bench.txt."

func interruptedNote() string {
	return "This run was interrupted: the points that finished are reported, the rest are missing."
}

func orDash(s string) string { return orDefault(s, "-") }

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// oneLine folds whitespace runs (newlines included) to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// AppendMarkdown appends md to the report.md Write made in dir: for an
// experiment kind whose section renders its own part of the report
// (result.Section.OwnReport). Errors wrap ErrWrite.
func AppendMarkdown(dir string, md []byte) error {
	f, err := os.OpenFile(filepath.Join(dir, MarkdownFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if _, err := f.Write(md); err != nil {
		f.Close()
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}
