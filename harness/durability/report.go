package durability

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/weir-broker/weir/harness/stats"
)

// Metrics of a loss section: per point, the distribution over its runs.
const (
	MetricLostMedian       = "lost-median"     // acknowledged records lost, median over the runs
	MetricLostMax          = "lost-max"        // ... and the worst run
	MetricLossRunsPct      = "loss-runs-%"     // runs that lost any acknowledged record, in % of the runs
	MetricLostAgeMaxMs     = "lost-age-max-ms" // the oldest lost acknowledged record of any run, ms before the fault
	MetricMedianMsgsPerSec = "median-produce-msgs/s"
	MetricMedianAckP99     = "median-ack-p99-us"
)

// FactorBound names the loss sections' extra factor: what the setting may
// lose, as flushpolicy.Bound.String says it.
const FactorBound = "bound"

// IsSection reports whether a result section is a durability section
// (its points have a fault factor).
func IsSection(sec *result.Section) bool {
	return strings.HasPrefix(sec.Name, "durability") && slices.Contains(sec.Factors, "fault") &&
		!strings.HasSuffix(sec.Name, lossSuffix)
}

const lossSuffix = "-loss"

// Summarize returns, for a durability section, its loss section: one
// point per point of sec, with the bound as one more factor and a single
// rep holding the distribution of loss over the point's runs next to the
// median throughput and ack latency they bought. Runs that failed without
// figures are left out; runs that broke a guarantee count. bound gives a
// point's bound ("" when unknown).
func Summarize(sec *result.Section, bound func(pointID string) string) result.Section {
	out := result.Section{Name: sec.Name + lossSuffix, Factors: append(slices.Clone(sec.Factors), FactorBound)}
	for _, p := range sec.Points {
		var lost, ages, tput, p99 []float64
		withLoss := 0
		for _, r := range p.Reps {
			n, ok := r.Metrics[MetricAckedLost]
			if !ok {
				continue
			}
			lost = append(lost, n)
			if n > 0 {
				withLoss++
				ages = append(ages, r.Metrics[MetricLostAgeMs])
			}
			if v, ok := r.Metrics[result.ProduceMsgsPerSec]; ok {
				tput = append(tput, v)
			}
			if v, ok := r.Metrics[result.AckP99]; ok {
				p99 = append(p99, v)
			}
		}
		if len(lost) == 0 {
			continue
		}
		b := bound(p.ID)
		if b == "" {
			b = "-"
		}
		lp := result.Point{ID: p.ID + "/" + FactorBound + "=" + b,
			Factors: append(slices.Clone(p.Factors), result.FactorValue{Name: FactorBound, Value: b})}
		sum, _ := stats.Summarize(lost)
		m := map[string]float64{
			MetricLostMedian:  sum.Median,
			MetricLostMax:     sum.Max,
			MetricLossRunsPct: 100 * float64(withLoss) / float64(len(lost)),
			MetricLostAgeMaxMs: func() float64 {
				if len(ages) == 0 {
					return 0
				}
				return slices.Max(ages)
			}(),
		}
		if s, err := stats.Summarize(tput); err == nil {
			m[MetricMedianMsgsPerSec] = s.Median
		}
		if s, err := stats.Summarize(p99); err == nil {
			m[MetricMedianAckP99] = s.Median
		}
		first := p.Reps[0]
		lp.Reps = []result.Rep{{Started: first.Started, Metrics: m}}
		out.Points = append(out.Points, lp)
	}
	return out
}

// Plot layout.
const (
	plotWidth  = 7 * vg.Inch
	plotHeight = 4.5 * vg.Inch
)

// WriteReport adds what report.Write cannot draw to a results directory
// it wrote: for each durability section and fault, plots of the loss
// window (acknowledged records lost; the age of the oldest lost
// acknowledged record) against the throughput each setting bought, one
// series per ack mode, each point labelled with its flush policy; and a
// section appended to report.md with the bounds, the guarantees broken,
// and the plots. Call it after report.Write, which removes plots it did
// not draw.
func WriteReport(dir string, run *result.Run) error {
	var md bytes.Buffer
	for i := range run.Sections {
		sec := &run.Sections[i]
		if !IsSection(sec) {
			continue
		}
		var loss *result.Section
		for j := range run.Sections {
			if run.Sections[j].Name == sec.Name+lossSuffix {
				loss = &run.Sections[j]
			}
		}
		if err := writeSection(&md, dir, sec, loss); err != nil {
			return err
		}
	}
	if md.Len() == 0 {
		return nil
	}
	return report.AppendMarkdown(dir, md.Bytes())
}

// setting is one point of a durability section, summarised for plots.
type setting struct {
	id, fault, policy, mode string
	tput                    float64 // median produce msgs/s
	lostMed, lostMin        float64
	lostMax, ageMax         float64
	runs, withLoss, broken  int
	bound                   string
}

func settings(sec, loss *result.Section) []setting {
	var out []setting
	for _, p := range sec.Points {
		s := setting{id: p.ID, fault: level(&p, "fault"), policy: level(&p, "flush_policy"), mode: ackMode(&p)}
		if v, ok := p.Factor("unclean_election"); ok && s.policy == "default" {
			// A cluster's points differ by election, not by flush policy.
			s.policy = map[string]string{"true": "unclean election", "false": "clean election"}[v]
		}
		var lost, tput []float64
		for _, r := range p.Reps {
			if r.Error != "" {
				s.broken++
			}
			n, ok := r.Metrics[MetricAckedLost]
			if !ok {
				continue
			}
			s.runs++
			lost = append(lost, n)
			if n > 0 {
				s.withLoss++
				s.ageMax = max(s.ageMax, r.Metrics[MetricLostAgeMs])
			}
			if v, ok := r.Metrics[result.ProduceMsgsPerSec]; ok {
				tput = append(tput, v)
			}
		}
		if len(lost) == 0 {
			continue
		}
		ls, _ := stats.Summarize(lost)
		s.lostMed, s.lostMin, s.lostMax = ls.Median, ls.Min, ls.Max
		if ts, err := stats.Summarize(tput); err == nil {
			s.tput = ts.Median
		}
		if loss != nil {
			for _, lp := range loss.Points {
				if strings.HasPrefix(lp.ID, p.ID+"/"+FactorBound+"=") {
					s.bound = level(&lp, FactorBound)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// level is a point's factor level, "default" when the factor is not varied.
func level(p *result.Point, name string) string {
	if v, ok := p.Factor(name); ok {
		return v
	}
	return "default"
}

// ackMode names a point's acks and durable-ack levels: "acks=1",
// "acks=all durable", or "as specified" when neither varies.
func ackMode(p *result.Point) string {
	var parts []string
	if v, ok := p.Factor("acks"); ok {
		parts = append(parts, "acks="+v)
	}
	if v, ok := p.Factor("durable_acks"); ok {
		if v == "true" {
			parts = append(parts, "durable")
		} else {
			parts = append(parts, "page cache")
		}
	}
	if len(parts) == 0 {
		return "as specified"
	}
	return strings.Join(parts, ", ")
}

func writeSection(md *bytes.Buffer, dir string, sec, loss *result.Section) error {
	ss := settings(sec, loss)
	if len(ss) == 0 {
		return nil
	}
	fmt.Fprintf(md, "## %s: loss window versus throughput\n\n", report.EscapeMarkdown(sec.Name))
	if isCluster(sec) {
		md.WriteString("Each row is one setting over its runs (a cluster each, several faults each): acknowledged " +
			"records lost (median and worst run), the share of runs that lost any, the oldest lost record's " +
			"acknowledgement before the fault it is charged to (worst run), beside the median throughput before the " +
			"first fault and the bound the setting promises: acks=all with clean elections promises nothing lost. " +
			"\"broken\" counts runs that broke a guarantee (loss beyond the bound, corruption, offsets, duplicates " +
			"from an idempotent producer, a consumer served a record later truncated, replicas that differ).\n\n")
	} else {
		md.WriteString("Each row is one setting over its runs (one fault each, at a random moment): acknowledged records " +
			"lost (median and worst run), the share of runs that lost any, the oldest lost record's acknowledgement " +
			"before the fault (worst run), beside the median throughput and the bound the setting promises. A kill " +
			"and durable acks promise nothing lost; a power cut without durable acks, the flush policy's bound per " +
			"partition (ages get the spec's age slack plus the run's longest fsync). \"broken\" counts runs that broke a " +
			"guarantee (corruption, duplicates, offset gaps or reuse, loss beyond the bound); they are listed under " +
			"the section's failed repetitions.\n\n")
	}
	t := report.Table{Header: []string{"point", "bound", "runs", "runs with loss", "lost median", "lost max",
		"oldest lost (ms)", "produce msgs/s", "broken"}, Align: "llrrrrrrr"}
	for _, s := range ss {
		t.Rows = append(t.Rows, []string{s.id, orDash(s.bound), fmt.Sprint(s.runs), fmt.Sprint(s.withLoss),
			report.FormatValue(s.lostMed), report.FormatValue(s.lostMax), report.FormatValue(s.ageMax),
			report.FormatValue(s.tput), fmt.Sprint(s.broken)})
	}
	if err := t.Render(md, true); err != nil {
		return err
	}
	md.WriteString("\n")
	var faults []string
	for _, s := range ss {
		if !slices.Contains(faults, s.fault) {
			faults = append(faults, s.fault)
		}
	}
	var links []string
	for _, f := range faults {
		var fs []setting
		lossless := true
		for _, s := range ss {
			if s.fault == f {
				fs = append(fs, s)
				lossless = lossless && s.lostMax == 0
			}
		}
		if lossless {
			fmt.Fprintf(md, "fault=%s: no setting lost an acknowledged record in any run, so there is no loss window to plot.\n\n", f)
			continue
		}
		for _, kind := range []string{"lost", "age"} {
			name := fmt.Sprintf("%s-%s-vs-throughput-%s.svg", slug(sec.Name), map[string]string{"lost": "acked-lost", "age": "lost-age"}[kind], slug(f))
			svg, err := drawLoss(sec.Name, f, kind, fs, false)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, report.PlotsDir, name), svg, 0o644); err != nil {
				return fmt.Errorf("%w: %w", report.ErrWrite, err)
			}
			links = append(links, fmt.Sprintf("![%s: %s vs throughput, fault=%s](%s/%s)", report.EscapeMarkdown(sec.Name), kind, f, report.PlotsDir, name))
		}
	}
	if len(links) > 0 {
		fmt.Fprintf(md, "%s\n\n", strings.Join(links, "\n"))
	}
	if isCluster(sec) {
		return writeClusterSection(md, dir, sec)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// slug makes a file-name part, as package report does.
func slug(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// drawLoss plots one fault's settings: x the median throughput, y the
// acknowledged records lost (median, bars min to max) or the oldest lost
// record's age (worst run), a series per ack mode, points labelled with
// their flush policy. SVG, or PNG for looking at it in tests.
func drawLoss(section, fault, kind string, ss []setting, png bool) ([]byte, error) {
	p := plot.New()
	for _, st := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		*st = font.From(sans, st.Size)
	}
	if kind == "lost" {
		p.Title.Text = fmt.Sprintf("%s, fault=%s: acknowledged records lost vs throughput\n"+
			"median of the runs, bars from the best to the worst run; log scale, 0 at the bottom", section, fault)
		p.Y.Label.Text = "acked records lost per run"
	} else {
		p.Title.Text = fmt.Sprintf("%s, fault=%s: age of the oldest lost record vs throughput\n"+
			"worst run: how long before the fault it was acknowledged; log scale, 0 at the bottom", section, fault)
		p.Y.Label.Text = "oldest lost record (ms)"
	}
	p.Title.Padding = 0.15 * vg.Inch
	p.X.Label.Text = "produce throughput before the fault (records/s, median of the runs)"
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	var modes []string
	for _, s := range ss {
		if !slices.Contains(modes, s.mode) {
			modes = append(modes, s.mode)
		}
	}
	// Losses span orders of magnitude (never loses everything, a bounded
	// policy a few records, durable acks nothing): y is on a log scale of
	// value+1, so zero sits on the bottom line.
	p.Y.Scale = plot.LogScale{}
	maxY, minX, maxX := 0.0, math.Inf(1), math.Inf(-1)
	for mi, mode := range modes {
		var xys plotter.XYs
		var errs plotter.YErrors
		var labels []string
		for _, s := range ss {
			if s.mode != mode {
				continue
			}
			y, lo, hi := s.lostMed, s.lostMin, s.lostMax
			if kind == "age" {
				y, lo, hi = s.ageMax, s.ageMax, s.ageMax
			}
			xys = append(xys, plotter.XY{X: s.tput, Y: y + 1})
			errs = append(errs, struct{ Low, High float64 }{y - lo, hi - y})
			labels = append(labels, s.policy)
			maxY = max(maxY, hi)
			minX, maxX = min(minX, s.tput), max(maxX, s.tput)
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
		}
		c := plotutil.Color(mi)
		sc.Color, sc.Shape = c, plotutil.Shape(mi)
		sc.Radius = vg.Points(4)
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, errs})
		if err != nil {
			return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
		}
		bars.Color = c
		p.Add(sc)
		if kind == "lost" {
			p.Add(bars)
		}
		for i, xy := range xys {
			if xy.Y == 1 {
				// Lossless settings crowd the bottom line: their labels
				// stand upright above their markers, one column each.
				p.Add(&label{xy: xy, text: labels[i], color: c, upright: true,
					offset: vg.Point{X: vg.Points(3), Y: vg.Points(6)}})
				continue
			}
			// Settings that lose alike sit on one spot: stagger their
			// labels so each stays readable.
			p.Add(&label{xy: xy, text: labels[i], color: c,
				offset: vg.Point{X: vg.Points(6), Y: vg.Points(float64(2 - 9*((i+2*mi)%4)))}})
		}
		p.Legend.Add(mode, sc)
	}
	p.Y.Min, p.Y.Max = 1, math.Max(maxY*2, 10)+1
	p.Y.Tick.Marker = log1pTicks{}
	pad := math.Max((maxX-minX)*0.1, maxX*0.02)
	p.X.Min, p.X.Max = math.Max(minX-pad, 0), maxX+3*pad // room for the labels
	p.X.Tick.Marker = valueTicks{}
	var c vg.CanvasWriterTo = vgsvg.New(plotWidth, plotHeight)
	if png {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(96))}
	}
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
	}
	return buf.Bytes(), nil
}

// log1pTicks labels a log axis of value+1 with the values: 0, 1, 10, 100...
type log1pTicks struct{}

func (log1pTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := []plot.Tick{{Value: 1, Label: "0"}}
	for v := 1.0; v+1 <= hi; v *= 10 {
		ts = append(ts, plot.Tick{Value: v + 1, Label: trimZeros(report.FormatValue(v))})
		for m := 2.0; m < 10 && m*v+1 <= hi; m++ {
			ts = append(ts, plot.Tick{Value: m*v + 1}) // minor
		}
	}
	return ts
}

// valueTicks labels a linear axis as the tables print figures (12.5k).
type valueTicks struct{}

func (valueTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = trimZeros(report.FormatValue(ts[i].Value))
		}
	}
	return ts
}

func trimZeros(s string) string {
	num := strings.TrimRight(s, "kMGT")
	suffix := s[len(num):]
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + suffix
}

// label is a text beside a data point. Unlike plotter.Labels it claims no
// glyph box, so it never makes the plot pad its data area (staggered
// labels at the bottom of a log axis would squash the data into a strip).
type label struct {
	xy      plotter.XY
	text    string
	color   color.Color
	offset  vg.Point
	upright bool // rotated a quarter turn, reading upwards
}

func (l *label) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	st := draw.TextStyle{Color: l.color, Font: font.From(sans, vg.Points(8)), Handler: p.Title.TextStyle.Handler}
	if l.upright {
		st.Rotation = math.Pi / 2
	}
	c.FillText(st, vg.Point{X: trX(l.xy.X) + l.offset.X, Y: trY(l.xy.Y) + l.offset.Y}, l.text)
}
