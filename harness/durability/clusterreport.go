package durability

import (
	"bytes"
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// isCluster reports whether a durability section holds cluster runs.
func isCluster(sec *result.Section) bool {
	for _, p := range sec.Points {
		for _, r := range p.Reps {
			if len(r.Faults) > 0 {
				return true
			}
		}
	}
	return false
}

// writeClusterSection adds a cluster section's own tables and plots: what
// each kind of fault cost per setting (faults injected, acknowledged
// records charged to them), availability (unavailability, elections, ISR
// changes, under-replicated partitions), why records failed, and a
// timeline of the first run of each setting.
func writeClusterSection(md *bytes.Buffer, dir string, sec *result.Section) error {
	fmt.Fprintf(md, "## %s: faults, loss and availability\n\n", report.EscapeMarkdown(sec.Name))
	md.WriteString("Each run injects its faults one after the other under load; a lost acknowledged record is charged " +
		"to the first fault that struck after it was acknowledged. Unavailability is measured at the producer: the " +
		"longest time one partition went without an acknowledgement, and the mean per partition of the gaps longer " +
		"than " + UnavailableGap.String() + " (the client's retries and metadata refreshes included).\n\n")
	t := report.Table{Header: []string{"point", "fault", "injected", "failed to inject", "acked lost", "in unchecked runs"},
		Align: "llrrrr"}
	for _, p := range sec.Points {
		type tally struct{ n, errs, lost, unchecked int64 }
		by := map[string]*tally{}
		for _, r := range p.Reps {
			// A run that broke off before its checks (the cluster did not
			// heal) kept its schedule but charged no losses.
			unchecked := r.Error != "" && len(r.Metrics) == 0
			for _, f := range r.Faults {
				tl := by[f.Kind]
				if tl == nil {
					tl = &tally{}
					by[f.Kind] = tl
				}
				if unchecked {
					tl.unchecked++
					continue
				}
				tl.n++
				tl.lost += f.Lost
				if f.Error != "" {
					tl.errs++
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(by)) {
			tl := by[k]
			t.Rows = append(t.Rows, []string{p.ID, k, fmt.Sprint(tl.n), fmt.Sprint(tl.errs), fmt.Sprint(tl.lost), fmt.Sprint(tl.unchecked)})
		}
	}
	if err := t.Render(md, true); err != nil {
		return err
	}
	md.WriteString("\n")

	med := func(p *result.Point, metric string) string {
		var vs []float64
		for _, r := range p.Reps {
			if v, ok := r.Metrics[metric]; ok {
				vs = append(vs, v)
			}
		}
		s, err := stats.Summarize(vs)
		if err != nil {
			return "-"
		}
		return report.FormatValue(s.Median)
	}
	a := report.Table{Header: []string{"point", "longest unavailable (ms)", "mean unavailable (ms)", "leader elections",
		"ISR shrinks (by leaders)", "ISR expands", "most under-replicated", "most offline", "read truncated", "replicas differ"},
		Align: "lrrrrrrrrr"}
	for i := range sec.Points {
		p := &sec.Points[i]
		a.Rows = append(a.Rows, []string{p.ID, med(p, MetricUnavailableMaxMs), med(p, MetricUnavailableMs), med(p, MetricElections),
			med(p, MetricISRShrinks), med(p, MetricISRExpands), med(p, MetricUnderReplicatedMax), med(p, MetricOfflineMax),
			med(p, MetricReadTruncated), med(p, MetricReplicaMismatch)})
	}
	md.WriteString("Availability, medians over the runs:\n\n")
	if err := a.Render(md, true); err != nil {
		return err
	}
	md.WriteString("\n")

	var fails []string
	for _, p := range sec.Points {
		total := map[string]int64{}
		for _, r := range p.Reps {
			for msg, n := range r.Failures {
				total[msg] += n
			}
		}
		for _, msg := range slices.Sorted(maps.Keys(total)) {
			fails = append(fails, fmt.Sprintf("- %s: %d records: %s", p.ID, total[msg], msg))
		}
	}
	if len(fails) > 0 {
		md.WriteString("Records whose produce failed (the producers' clients give up on what is still pending when they " +
			"close after the load, and on what their delivery timeout expired):\n\n" + strings.Join(fails, "\n") + "\n\n")
	}

	var links []string
	for _, p := range sec.Points {
		if len(p.Reps) == 0 || len(p.Reps[0].Timeline) == 0 {
			continue
		}
		name := fmt.Sprintf("%s-timeline-%s.svg", slug(sec.Name), slug(p.ID))
		svg, err := drawTimeline(p.ID, p.Reps[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, report.PlotsDir, name), svg, 0o644); err != nil {
			return fmt.Errorf("%w: %w", report.ErrWrite, err)
		}
		links = append(links, fmt.Sprintf("![%s: timeline of the first run](%s/%s)", report.EscapeMarkdown(p.ID), report.PlotsDir, name))
	}
	if len(links) > 0 {
		fmt.Fprintf(md, "%s\n\n", strings.Join(links, "\n"))
	}
	return nil
}

// drawTimeline plots one run: under-replicated and offline partitions
// over time, each fault a shaded band from its strike to its heal,
// labelled with its kind.
func drawTimeline(point string, r result.Rep) ([]byte, error) {
	p := plot.New()
	for _, st := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		*st = font.From(sans, st.Size)
	}
	p.Title.Text = point + ": the first run's faults (bands) and the cluster as sampled"
	p.X.Label.Text = "seconds since the first acknowledgement"
	p.Y.Label.Text = "partitions"
	p.Add(plotter.NewGrid())
	top := 1.0
	for _, s := range r.Timeline {
		top = max(top, float64(s.UnderReplicated), float64(s.Offline))
	}
	top++
	for i, f := range r.Faults {
		x0, x1 := f.At.Seconds(), max(f.Healed, f.At+50*time.Millisecond).Seconds()
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: top}, {X: x0, Y: top}})
		if err != nil {
			return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
		}
		band.Color = color.RGBA{R: 200, G: 200, B: 200, A: 120}
		band.LineStyle.Width = 0
		p.Add(band)
		p.Add(&label{xy: plotter.XY{X: x0, Y: top - 0.05*top*float64(i%4)}, text: f.Kind, color: color.Gray{Y: 60}, upright: false,
			offset: vg.Point{X: vg.Points(2), Y: vg.Points(-8)}})
	}
	under, offline := make(plotter.XYs, len(r.Timeline)), make(plotter.XYs, len(r.Timeline))
	for i, s := range r.Timeline {
		under[i] = plotter.XY{X: s.At.Seconds(), Y: float64(s.UnderReplicated)}
		offline[i] = plotter.XY{X: s.At.Seconds(), Y: float64(s.Offline)}
	}
	for i, series := range []struct {
		name string
		xys  plotter.XYs
		c    color.Color
	}{{"under-replicated", under, color.RGBA{R: 30, G: 90, B: 200, A: 255}}, {"offline (no leader)", offline, color.RGBA{R: 200, G: 40, B: 40, A: 255}}} {
		l, err := plotter.NewLine(series.xys)
		if err != nil {
			return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
		}
		l.Color = series.c
		l.Width = vg.Points(1.5)
		if i == 1 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(series.name, l)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, top
	var c vg.CanvasWriterTo = vgsvg.New(plotWidth, plotHeight)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("%w: plot: %w", report.ErrWrite, err)
	}
	return buf.Bytes(), nil
}
