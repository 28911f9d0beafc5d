package scale

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
	"github.com/weir-broker/weir/harness/stats"
)

// The goals, checked at every N (the issue states them at
// 100,000 partitions).
const (
	GoalRSSMiB          = 2048 // peak resident memory
	GoalRestartSeconds  = 10   // clean restart, exec to serving
	GoalMetadataMs      = 200  // Metadata for every partition, p99
	GoalHotRatio        = 0.95 // hot throughput beside idle partitions over alone
	goalFDsDescription  = "descriptors never above the broker's budget (its --max-open-files, which bounds the segment files; the few the broker holds besides, listeners, client connections and the coordination store's files, come on top, and up to 64 of them are allowed; a broker without a budget is bounded only by its open-file limit, and one that runs into it fails a step)"
	plotWidth           = 7 * vg.Inch
	plotHeight          = 4.5 * vg.Inch
	reportHeading       = "## Partition scale"
	figuresIntroduction = "Each cell is the median over the repetitions whose step got that far; " +
		"\"failed at step k\" marks a figure no repetition measured because step k failed first, \"-\" a step the spec left out. " +
		"Times are from the client's side; restart times count from the exec of the new broker process."
)

// stepOf is the step a metric is measured by; 0 for the whole run's
// (fds-max, hwm-max-MiB), which hold what was sampled before any failure.
func stepOf(m string) int {
	switch {
	case m == MetricFDsMax || m == MetricHWMMax || m == MetricOpenFilesLimit || m == MetricFDBudget:
		return 0
	case strings.HasPrefix(m, "unclean-") || strings.Contains(m, "-unclean-restart"):
		return StepUncleanRestart
	case strings.HasPrefix(m, "clean-") || strings.Contains(m, "-clean-restart"):
		return StepCleanRestart
	case strings.HasPrefix(m, "metadata-"):
		return StepMetadata
	case m == "produce-all-s" || m == "consume-all-s" || m == "records-consumed":
		return StepRecords
	case strings.HasPrefix(m, "hot-"):
		return StepHot
	case strings.HasPrefix(m, "fetch") || strings.HasPrefix(m, "wire-") || strings.HasPrefix(m, "broker-cpu-s-") ||
		strings.HasPrefix(m, "session"):
		return StepSessions
	}
	return StepCreate
}

// cell is one point's figure: the median over the reps that measured it
// and got past its step, or why there is none. A rep's error that names
// no step (a broker that did not stop cleanly after the last) leaves its
// figures standing.
type cell struct {
	v        float64
	n, reps  int
	failedAt int // the earliest step a rep failed at, at or before the metric's step
}

func (c cell) ok() bool { return c.n > 0 }

func figure(p *result.Point, m string) cell {
	c := cell{reps: len(p.Reps)}
	st := stepOf(m)
	var vs []float64
	for _, r := range p.Reps {
		if f := ParseStep(r.Error); f > 0 && st > 0 && f <= st {
			if c.failedAt == 0 || f < c.failedAt {
				c.failedAt = f
			}
			continue
		}
		if v, ok := r.Metrics[m]; ok && !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if s, err := stats.Summarize(vs); err == nil {
		c.v, c.n = s.Median, len(vs)
	}
	return c
}

// text prints a cell: the figure (with n when some reps lack it), or
// why there is none.
func (c cell) text(format func(float64) string) string {
	switch {
	case c.ok():
		s := format(c.v)
		if c.n < c.reps {
			s += " (n=" + strconv.Itoa(c.n) + ")"
		}
		return s
	case c.failedAt > 0:
		return "failed at step " + strconv.Itoa(c.failedAt)
	}
	return "-"
}

func num(v float64) string { return report.FormatValue(v) }

func count(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', -1, 64) }

func secs(v float64) string { return report.FormatValue(v) + " s" }

func mib(v float64) string { return report.FormatValue(v) + " MiB" }

func ms(v float64) string { return report.FormatValue(v) + " ms" }

func ratio(v float64) string { return report.FormatValue(v) + "×" }

// otherFDs is how many descriptors besides the segment files' budget the
// fds goal allows the broker: its listeners, the client connections of the
// steps, the coordination store's files, its log (about 15 seen here).
const otherFDs = 64

// verdict appends whether a figure met its goal.
func verdict(c cell, format func(float64) string, met func(float64) bool) string {
	s := c.text(format)
	if !c.ok() {
		return s
	}
	if met(c.v) {
		return s + " (met)"
	}
	return s + " (MISSED)"
}

// points are a scale section's points, in increasing N.
func points(sec *result.Section) []*result.Point {
	var ps []*result.Point
	for i := range sec.Points {
		ps = append(ps, &sec.Points[i])
	}
	slices.SortStableFunc(ps, func(a, b *result.Point) int { return nOf(a) - nOf(b) })
	return ps
}

func nOf(p *result.Point) int {
	v, _ := p.Factor(spec.FactorTotalPartitions)
	n, _ := strconv.Atoi(v)
	return n
}

// column is a table column: a header and how a point's cell reads.
type column struct {
	head string
	cell func(p *result.Point) string
}

func fig(head, metric string, format func(float64) string) column {
	return column{head, func(p *result.Point) string { return figure(p, metric).text(format) }}
}

// goalColumns are the goals table's: each figure beside the goal.
func goalColumns() []column {
	return []column{
		{"fds, most held (budget)", func(p *result.Point) string {
			c, b, l := figure(p, MetricFDsMax), figure(p, MetricFDBudget), figure(p, MetricOpenFilesLimit)
			switch {
			case c.ok() && b.ok():
				return verdict(c, func(v float64) string { return count(v) + " (" + count(b.v) + ")" },
					func(v float64) bool { return v <= b.v+otherFDs })
			case c.ok() && l.ok():
				// No budget to hold: the limit bounds the descriptors,
				// and running into it fails a step instead.
				return count(c.v) + " (no budget; limit " + count(l.v) + ")"
			}
			return c.text(count)
		}},
		{"peak RSS (≤ 2 GiB)", func(p *result.Point) string {
			return verdict(figure(p, MetricHWMMax), mib, func(v float64) bool { return v <= GoalRSSMiB })
		}},
		{"clean restart to serving (≤ 10 s)", func(p *result.Point) string {
			m, f := figure(p, "clean-restart-metadata-s"), figure(p, "clean-restart-fetch-s")
			if !m.ok() || !f.ok() {
				return m.text(secs)
			}
			both := m
			both.v = math.Max(m.v, f.v) // serving: both answered
			return verdict(both, secs, func(v float64) bool { return v <= GoalRestartSeconds })
		}},
		{"Metadata, all partitions, p99 (≤ 200 ms)", func(p *result.Point) string {
			return verdict(figure(p, "metadata-p99-ms"), ms, func(v float64) bool { return v <= GoalMetadataMs })
		}},
		{"fetch bytes, sessions over none (req / resp)", func(p *result.Point) string {
			q, s := figure(p, "session-req-ratio"), figure(p, "session-resp-ratio")
			if !q.ok() || !s.ok() {
				return q.text(ratio)
			}
			granted := "declined"
			if figure(p, "sessions-granted").v == 1 {
				granted = "granted"
			}
			return fmt.Sprintf("%s / %s (sessions %s)", ratio(q.v), ratio(s.v), granted)
		}},
		{"hot beside idle over alone (≥ 0.95)", func(p *result.Point) string {
			return verdict(figure(p, "hot-ratio"), ratio, func(v float64) bool { return v >= GoalHotRatio })
		}},
	}
}

// figureTables are the per-step tables.
func figureTables() []struct {
	title string
	cols  []column
} {
	type table = struct {
		title string
		cols  []column
	}
	return []table{
		{"Step 1: create the partitions", []column{
			fig("create", "create-s", secs), fig("fds", "fds-created", count), fig("RSS", "rss-created-MiB", mib),
			fig("RSS peak", "hwm-created-MiB", mib), fig("goroutines", "goroutines-created", count), fig("threads", "threads-created", count)}},
		{"Step 2: Metadata for every topic; step 3: a record to each partition, one consumer reading them all", []column{
			fig("Metadata p50", "metadata-p50-ms", ms), fig("p99", "metadata-p99-ms", ms), fig("response", "metadata-response-KiB", func(v float64) string { return num(v) + " KiB" }),
			fig("produce N records", "produce-all-s", secs), fig("consume all N", "consume-all-s", secs), fig("records seen", "records-consumed", count)}},
		{"Steps 4 and 5: restarts (medians over the restarts), from exec", []column{
			fig("clean stop", "clean-stop-s", secs), fig("clean: Metadata", "clean-restart-metadata-s", secs),
			fig("clean: fetch", "clean-restart-fetch-s", secs), fig("fds", "fds-clean-restart", count), fig("RSS", "rss-clean-restart-MiB", mib),
			fig("unclean: Metadata", "unclean-restart-metadata-s", secs), fig("unclean: fetch", "unclean-restart-fetch-s", secs),
			fig("fds", "fds-unclean-restart", count), fig("RSS", "rss-unclean-restart-MiB", mib)}},
		{"Step 6: fetch sessions on and off, per fetch request", []column{
			fig("partitions read", "session-partitions", count), fig("granted", "sessions-granted", func(v float64) string { return map[bool]string{true: "yes", false: "no"}[v == 1] }),
			fig("req B, sessions", "fetch-req-B-"+ModeSessions, count), fig("resp B", "fetch-resp-B-"+ModeSessions, count),
			fig("fetches", "fetches-"+ModeSessions, count), fig("broker CPU", "broker-cpu-s-"+ModeSessions, secs),
			fig("req B, none", "fetch-req-B-"+ModeNoSessions, count), fig("resp B", "fetch-resp-B-"+ModeNoSessions, count),
			fig("fetches", "fetches-"+ModeNoSessions, count), fig("broker CPU", "broker-cpu-s-"+ModeNoSessions, secs)}},
		{"Step 7: hot partitions beside the idle ones and alone (medians over the rounds; ratios: each round's own, back to back, their median and range)", []column{
			fig("produce, beside idle", "hot-idle-produce-msgs/s", num), fig("alone", "hot-alone-produce-msgs/s", num), fig("ratio", "hot-ratio", ratio),
			fig("rounds' ratios", "hot-round-ratio-min", ratio), fig("to", "hot-round-ratio-max", ratio),
			fig("consume, beside idle", "hot-idle-consume-msgs/s", num), fig("alone", "hot-alone-consume-msgs/s", num), fig("ratio", "hot-consume-ratio", ratio)}},
	}
}

func table(ps []*result.Point, cols []column) report.Table {
	t := report.Table{Header: []string{"partitions"}, Align: "r"}
	for _, c := range cols {
		t.Header = append(t.Header, c.head)
		t.Align += "r"
	}
	for _, p := range ps {
		row := []string{count(float64(nOf(p)))}
		for _, c := range cols {
			row = append(row, c.cell(p))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// failures lists the reps that failed: N, rep, step, error.
func failures(ps []*result.Point) report.Table {
	t := report.Table{Header: []string{"partitions", "rep", "failed at", "what happened"}, Align: "rrll"}
	for _, p := range ps {
		for i, r := range p.Reps {
			if r.Error == "" {
				continue
			}
			step := "-"
			if s := ParseStep(r.Error); s > 0 {
				step = fmt.Sprintf("step %d (%s)", s, StepNames[s])
			}
			t.Rows = append(t.Rows, []string{count(float64(nOf(p))), strconv.Itoa(i + 1), step, r.Error})
		}
	}
	return t
}

// Section finds a run's scale section.
func Section(run *result.Run) *result.Section {
	for i := range run.Sections {
		if run.Sections[i].Name == spec.SectionScale {
			return &run.Sections[i]
		}
	}
	return nil
}

// WriteMarkdown writes the scale section of a report: the goals, the
// figures per step, what failed, and links to the plots WritePlots draws.
func WriteMarkdown(w io.Writer, run *result.Run, plots []string) error {
	sec := Section(run)
	if sec == nil {
		return nil
	}
	ps := points(sec)
	var err error
	render := func(t report.Table) {
		if err == nil {
			err = t.Render(w, true)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s\n\n", reportHeading)
	limit := run.Env.BrokerOpenFiles
	if limit == "" {
		limit = "not read"
	}
	fmt.Fprintf(w, "One `weir broker` per partition count, on a fresh data directory, its open-file limit %s (from its /proc/<pid>/limits), "+
		"at weir commit %s. %s\n\n", limit, run.Env.WeirCommit, report.EscapeMarkdown(figuresIntroduction))
	fmt.Fprintf(w, "### Against the issue's goals\n\nThe goals hold at 100,000 partitions and are checked at every count: %s; "+
		"peak RSS (VmHWM, sampled every 250 ms) ≤ 2 GiB; clean restart to serving (Metadata listing every partition led, "+
		"and a record fetched) ≤ 10 s; Metadata for all partitions, p99, ≤ 200 ms; hot partitions beside the idle ones at ≥ 0.95× "+
		"their throughput alone. The fetch-session ratios are bytes per fetch with sessions over without (below 1: sessions save).\n\n", goalFDsDescription)
	render(table(ps, goalColumns()))
	for _, t := range figureTables() {
		fmt.Fprintf(w, "### %s\n\n", t.title)
		render(table(ps, t.cols))
	}
	if f := failures(ps); len(f.Rows) > 0 {
		fmt.Fprintf(w, "### What failed\n\n")
		render(f)
	}
	if len(plots) > 0 {
		fmt.Fprintf(w, "### Plots\n\nMedians over the repetitions that measured them, against the partition count on a log axis; dashed: the goal.\n\n")
		for _, p := range plots {
			fmt.Fprintf(w, "![%s](%s/%s)\n", strings.TrimSuffix(p, ".svg"), report.PlotsDir, p)
		}
		fmt.Fprintln(w)
	}
	return err
}

// Print writes the goals table and what failed, for a terminal.
func Print(w io.Writer, run *result.Run) error {
	sec := Section(run)
	if sec == nil {
		return nil
	}
	ps := points(sec)
	fmt.Fprintf(w, "== partition scale: against the issue's goals (broker open-file limit: %s) ==\n", run.Env.BrokerOpenFiles)
	if err := table(ps, goalColumns()).Render(w, false); err != nil {
		return err
	}
	if f := failures(ps); len(f.Rows) > 0 {
		fmt.Fprintln(w, "\nWhat failed")
		return f.Render(w, false)
	}
	return nil
}

// WriteReport appends the scale section to dir's report.md and draws its
// plots into dir/plots; call it after report.Write.
func WriteReport(dir string, run *result.Run) error {
	sec := Section(run)
	if sec == nil {
		return nil
	}
	plots, err := WritePlots(filepath.Join(dir, report.PlotsDir), sec)
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, run, plots); err != nil {
		return err
	}
	return report.AppendMarkdown(dir, md.Bytes())
}

// series is one line of a plot.
type series struct{ label, metric string }

// plotSpec is one plot: its series against N, and a goal line.
type plotSpec struct {
	file, title, ylabel string
	series              []series
	goal                float64 // 0: none
	goalMetric          string  // a per-point goal (fd-budget), drawn as a series
}

var plotSpecs = []plotSpec{
	{"scale-fds.svg", "open descriptors of the broker", "descriptors", []series{
		{"after creating", "fds-created"}, {"after a clean restart", "fds-clean-restart"}, {"most held (sampled)", MetricFDsMax}}, 0, MetricFDBudget},
	{"scale-memory.svg", "resident memory of the broker", "MiB", []series{
		{"after creating", "rss-created-MiB"}, {"after a clean restart", "rss-clean-restart-MiB"}, {"peak (VmHWM)", MetricHWMMax}}, GoalRSSMiB, ""},
	{"scale-times.svg", "creating and restarting", "seconds", []series{
		{"create N partitions", "create-s"}, {"clean restart: Metadata", "clean-restart-metadata-s"}, {"clean restart: fetch", "clean-restart-fetch-s"},
		{"unclean restart: Metadata", "unclean-restart-metadata-s"}, {"unclean restart: fetch", "unclean-restart-fetch-s"}}, GoalRestartSeconds, ""},
	{"scale-metadata.svg", "Metadata for every topic", "ms", []series{
		{"p50", "metadata-p50-ms"}, {"p99", "metadata-p99-ms"}}, GoalMetadataMs, ""},
}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// WritePlots draws the figures against N (log axis) into dir, one SVG per
// plot with at least one figure, and returns their file names.
func WritePlots(dir string, sec *result.Section) ([]string, error) {
	ps := points(sec)
	var files []string
	for _, ps2 := range plotSpecs {
		svg, ok, err := drawPlot(sec.Name, ps2, ps, false)
		if err != nil {
			return files, err
		}
		if !ok {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return files, fmt.Errorf("%w: %w", report.ErrWrite, err)
		}
		if err := os.WriteFile(filepath.Join(dir, ps2.file), svg, 0o644); err != nil {
			return files, fmt.Errorf("%w: %w", report.ErrWrite, err)
		}
		files = append(files, ps2.file)
	}
	return files, nil
}

// drawPlot draws one plot as SVG, or PNG for looking at it in tests; ok
// is false when no point has any of its figures.
func drawPlot(section string, spec plotSpec, ps []*result.Point, png bool) (out []byte, ok bool, err error) {
	p := plot.New()
	for _, st := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		*st = font.From(sans, st.Size)
	}
	p.Title.Text = section + ": " + spec.title
	p.X.Label.Text = "partitions (log scale)"
	p.Y.Label.Text = spec.ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	drawn := false
	maxY := 0.0
	all := spec.series
	if spec.goalMetric != "" {
		all = append(slices.Clone(all), series{"budget", spec.goalMetric})
	}
	for i, s := range all {
		var xys plotter.XYs
		for _, pt := range ps {
			if c := figure(pt, s.metric); c.ok() && nOf(pt) > 0 {
				xys = append(xys, plotter.XY{X: float64(nOf(pt)), Y: c.v})
				maxY = math.Max(maxY, c.v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		if s.metric != spec.goalMetric {
			drawn = true
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, false, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
		}
		line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		if s.metric == spec.goalMetric {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line, points)
		p.Legend.Add(s.label, line, points)
	}
	if !drawn {
		return nil, false, nil
	}
	if spec.goal > 0 {
		goal := plotter.NewFunction(func(float64) float64 { return spec.goal })
		goal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		goal.Color = plotutil.Color(7)
		p.Add(goal)
		p.Legend.Add(fmt.Sprintf("goal: %s", report.FormatValue(spec.goal)), goal)
		maxY = math.Max(maxY, spec.goal)
	}
	p.Y.Min, p.Y.Max = 0, maxY*1.4 // room for the legend above the data
	p.Title.Padding = 0.1 * vg.Inch
	lo, hi := math.Inf(1), 0.0
	for _, pt := range ps {
		if n := float64(nOf(pt)); n > 0 {
			lo, hi = math.Min(lo, n), math.Max(hi, n)
		}
	}
	p.X.Min, p.X.Max = lo/2, hi*2
	var c vg.CanvasWriterTo = vgsvg.New(plotWidth, plotHeight)
	if png {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(96))}
	}
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, false, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
	}
	return buf.Bytes(), true, nil
}
