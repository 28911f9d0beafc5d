package report

import (
	"bytes"
	"fmt"
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

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// Plot budget and layout.
const (
	// MaxPlots bounds the plots of one run: past a dozen nobody reads them,
	// and the tables hold every figure anyway.
	MaxPlots = 12
	// maxSeries is the most lines one plot draws, one per combination of
	// the other varied factors; beyond it the other factors are pooled.
	maxSeries = 6

	plotWidth  = 6 * vg.Inch
	plotHeight = 4 * vg.Inch
)

// PlotSpec is one planned plot: a metric of a section against one factor.
type PlotSpec struct {
	Section string
	Metric  string
	Factor  string
	File    string // base name under plots/, "load-produce-MB-per-s-by-codec.svg"
	Title   string // drawn on the plot, "load: produce-MB/s by codec"
}

// keyMetrics are the metrics worth a plot, in priority order: the first
// throughput and the first p99 latency present always; the rest only when
// they change with the factor plotted (a compression ratio against a flush
// policy is a flat line nobody needs).
var keyMetrics = [][]string{
	{result.ProduceMBPerSec, result.MBPerSec, result.ValuesPerSec, result.OpsPerSec, result.ProduceMsgsPerSec,
		result.ConsumeMBPerSec, result.ConsumeMsgsPerSec},
	{result.AckP99, result.LatP99, result.E2EP99},
	{result.E2EP99},
	{result.CompressionRatio},
	{result.PartitionSkew},
	{result.BrokerCPUSeconds},
	{result.BrokerCPUPerGBConsumed},
	{result.Fsyncs},
}

// PlanPlots chooses the plots of a run, at most MaxPlots. Each section with
// a varied factor proposes its key metrics present, each against each
// varied factor, in priority order; sections then take turns, one plot at a
// time, so a small section keeps its plots and a large one uses what the
// others leave. The choice depends only on the run, so WriteMarkdown links
// exactly the files WritePlots writes.
func PlanPlots(run *result.Run) []PlotSpec {
	var candidates [][]PlotSpec
	for i := range run.Sections {
		v := newView(&run.Sections[i])
		if len(v.varying) == 0 || len(v.sec.Points) < 2 || v.sec.OwnReport {
			continue
		}
		var cs []PlotSpec
		chosen := map[string]bool{}
		for ki, alternatives := range keyMetrics {
			usable := func(m string) bool { return slices.Contains(v.metrics, m) && !chosen[m] }
			// Of the alternatives, plot the one that moves most with the
			// varied factors: a consumer experiment's consume rate, not
			// its producer's (noise moves that a little too).
			i, best := -1, -1.0
			for j, m := range alternatives {
				if !usable(m) {
					continue
				}
				if r := v.relRange(m); i < 0 || r > best*1.5 {
					i, best = j, r
				}
			}
			if i < 0 {
				continue
			}
			m := alternatives[i]
			chosen[m] = true
			for _, f := range v.varying {
				if ki >= 2 && v.flat(m, f) {
					continue
				}
				cs = append(cs, PlotSpec{Section: v.sec.Name, Metric: m, Factor: f,
					Title: fmt.Sprintf("%s: %s by %s", v.sec.Name, m, f)})
			}
		}
		candidates = append(candidates, cs)
	}
	taken := make([]int, len(candidates))
	total := 0
	for progress := true; progress && total < MaxPlots; {
		progress = false
		for i, cs := range candidates {
			if taken[i] < len(cs) && total < MaxPlots {
				taken[i]++
				total++
				progress = true
			}
		}
	}
	var out []PlotSpec
	used := map[string]bool{}
	for i, cs := range candidates {
		for _, spec := range cs[:taken[i]] {
			spec.File = uniqueName(used, slug(spec.Section)+"-"+slug(spec.Metric)+"-by-"+slug(spec.Factor))
			out = append(out, spec)
		}
	}
	return out
}

// relRange is how much metric m's medians move across the section's
// points: (max - min) / max, 0 when flat or absent.
func (v *view) relRange(m string) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, f := range v.varying {
		for _, s := range v.series(m, f) {
			for _, pt := range s.points {
				lo, hi = math.Min(lo, pt.median), math.Max(hi, pt.median)
			}
		}
	}
	if hi <= 0 || math.IsInf(hi, 0) {
		return 0
	}
	return (hi - lo) / hi
}

// flat reports whether metric m does not change with factor f: every
// series' medians lie within 1% of each other.
func (v *view) flat(m, f string) bool {
	for _, s := range v.series(m, f) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, pt := range s.points {
			lo, hi = math.Min(lo, pt.median), math.Max(hi, pt.median)
		}
		if hi-lo > 0.01*math.Max(math.Abs(lo), math.Abs(hi)) {
			return false
		}
	}
	return true
}

func uniqueName(used map[string]bool, base string) string {
	name := base + ".svg"
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d.svg", base, i)
	}
	used[name] = true
	return name
}

// slug makes a file-name part: "/" reads "per", anything but letters,
// digits, '.', '_' and '-' becomes '-'.
func slug(s string) string {
	s = strings.ReplaceAll(s, "/", "-per-")
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

// seriesPoint is one level of the plotted factor within a series.
type seriesPoint struct {
	level         int // index into the factor's levels
	median        float64
	lo, hi        float64 // min and max over reps
	pooledMedians []float64
}

type series struct {
	label  string
	points []seriesPoint
}

// series splits the points of v that hold metric m by the other varied
// factors: one series per combination when there are at most maxSeries,
// else a single series pooling them (the median of the points' medians,
// error bars spanning every rep).
func (v *view) series(m, f string) []series {
	others := slices.DeleteFunc(slices.Clone(v.varying), func(o string) bool { return o == f })
	key := func(p *result.Point) string {
		parts := make([]string, len(others))
		for i, o := range others {
			parts[i] = o + "=" + factorLevel(p, o)
		}
		return strings.Join(parts, ", ")
	}
	var keys []string
	for i := range v.sec.Points {
		if _, ok := v.sums[i][m]; ok {
			if k := key(&v.sec.Points[i]); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	pooled := len(keys) > maxSeries
	if pooled {
		keys = []string{fmt.Sprintf("median over %s", strings.Join(others, ", "))}
	}
	out := make([]series, len(keys))
	for si := range out {
		out[si].label = keys[si]
	}
	levels := v.levels[f]
	for li, level := range levels {
		for si := range out {
			var sp *seriesPoint
			for i := range v.sec.Points {
				p := &v.sec.Points[i]
				s, ok := v.sums[i][m]
				if !ok || factorLevel(p, f) != level || (!pooled && key(p) != keys[si]) {
					continue
				}
				if sp == nil {
					sp = &seriesPoint{level: li, lo: s.Min, hi: s.Max}
				}
				sp.lo, sp.hi = math.Min(sp.lo, s.Min), math.Max(sp.hi, s.Max)
				sp.pooledMedians = append(sp.pooledMedians, s.Median)
			}
			if sp == nil {
				continue
			}
			sum, _ := stats.Summarize(sp.pooledMedians)
			sp.median = sum.Median
			out[si].points = append(out[si].points, *sp)
		}
	}
	return out
}

// WritePlots draws the plots PlanPlots chooses as SVG files in dir, which
// must exist, and returns their paths.
func WritePlots(dir string, run *result.Run) ([]string, error) {
	if err := check(run); err != nil {
		return nil, err
	}
	views := map[string]*view{}
	for i := range run.Sections {
		views[run.Sections[i].Name] = newView(&run.Sections[i])
	}
	var paths []string
	for _, spec := range PlanPlots(run) {
		svg, err := drawPlot(views[spec.Section], spec, false)
		if err != nil {
			return paths, err
		}
		path := filepath.Join(dir, spec.File)
		if err := os.WriteFile(path, svg, 0o644); err != nil {
			return paths, fmt.Errorf("%w: %w", ErrWrite, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// drawPlot draws spec as SVG, or as PNG for looking at it in tests.
func drawPlot(v *view, spec PlotSpec, png bool) ([]byte, error) {
	p := plot.New()
	for _, st := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		*st = font.From(sans, st.Size)
	}
	p.Title.Text = spec.Title + "\nmedian of the reps; bars span min to max"
	p.Title.Padding = 0.15 * vg.Inch
	p.X.Label.Text = spec.Factor
	p.Y.Label.Text = MetricLabel(spec.Metric)
	p.Y.Tick.Marker = valueTicks{}
	p.Add(plotter.NewGrid())
	levels := v.levels[spec.Factor]
	p.NominalX(levels...)

	ss := v.series(spec.Metric, spec.Factor)
	legend := plot.NewLegend()
	legend.TextStyle.Font = font.From(sans, legend.TextStyle.Font.Size)
	legend.Top, legend.Left = true, true
	minY := math.Inf(1)
	for si, s := range ss {
		// Dodge series sideways so their error bars do not hide each other.
		dx := 0.0
		if len(ss) > 1 {
			dx = (float64(si) - float64(len(ss)-1)/2) * 0.3 / float64(len(ss))
		}
		xys := make(plotter.XYs, len(s.points))
		errs := make(plotter.YErrors, len(s.points))
		for i, pt := range s.points {
			xys[i] = plotter.XY{X: float64(pt.level) + dx, Y: pt.median}
			errs[i].Low, errs[i].High = pt.median-pt.lo, pt.hi-pt.median
			minY = math.Min(minY, pt.lo)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("%w: plot %s: %w", ErrWrite, spec.File, err)
		}
		c := plotutil.Color(si)
		line.Color, points.Color = c, c
		line.Dashes = plotutil.Dashes(si)
		points.Shape = plotutil.Shape(si)
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, errs})
		if err != nil {
			return nil, fmt.Errorf("%w: plot %s: %w", ErrWrite, spec.File, err)
		}
		bars.Color = c
		p.Add(line, points, bars)
		if s.label != "" {
			legend.Add(s.label, line, points)
		}
	}
	if minY >= 0 {
		p.Y.Min = 0 // a baseline at zero keeps differences in proportion
	}
	p.X.Min, p.X.Max = -0.5, float64(len(levels))-0.5

	width := plotWidth
	var legendWidth vg.Length
	if len(ss) > 1 {
		for _, s := range ss {
			legendWidth = max(legendWidth, legend.TextStyle.Width(s.label))
		}
		// Viewers without Liberation Sans fall back to wider fonts: leave
		// room rather than clip the legend at the canvas edge.
		legendWidth = legendWidth*13/10 + legend.ThumbnailWidth + 0.3*vg.Inch
		width += legendWidth
	}
	var c vg.CanvasWriterTo = vgsvg.New(width, plotHeight)
	if png {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, plotHeight), vgimg.UseDPI(96))}
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	if legendWidth > 0 {
		legend.Draw(draw.Crop(dc, width-legendWidth+0.1*vg.Inch, 0, 0, -0.3*vg.Inch))
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("%w: plot %s: %w", ErrWrite, spec.File, err)
	}
	return buf.Bytes(), nil
}

// valueTicks labels the Y axis the way the tables print figures (12.5k
// rather than 12500), trailing zeros trimmed.
type valueTicks struct{}

func (valueTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = trimZeros(FormatValue(ts[i].Value))
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
