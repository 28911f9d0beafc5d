package compare

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/stats"
)

// Output formats for Write.
const (
	FormatText     = "text" // boxed terminal tables
	FormatMarkdown = "md"   // Markdown tables and headings
)

// Legend explains the columns, one line per item; Write prints it under
// the tables.
func Legend() []string {
	return []string{
		"A, B: median of the successful repetitions ± median absolute deviation (% of the median)",
		"delta: change of the median from A to B; p: two-sided Mann-Whitney U test (n = repetitions of A + B)",
		fmt.Sprintf(`"~": no significant difference (p > %v); "need >= %d reps": too few repetitions for any difference to be significant`,
			stats.Alpha, stats.MinSamplesU(stats.Alpha)),
	}
}

// Write prints the comparison in format (FormatText or FormatMarkdown): the
// two runs, their environment differences, one table per section with a
// row per (point, metric) both runs have, what only one run has, and the
// legend. It fails with ErrFormat for another format.
func (r *Result) Write(w io.Writer, format string) error {
	var md bool
	switch format {
	case FormatText:
	case FormatMarkdown:
		md = true
	default:
		return fmt.Errorf("%w %q: want %s or %s", ErrFormat, format, FormatText, FormatMarkdown)
	}
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	var err error
	render := func(t report.Table) {
		if err == nil {
			err = t.Render(bw, md)
		}
		p("\n")
	}
	text := func(s string) string {
		if md {
			return report.EscapeMarkdown(s)
		}
		return s
	}
	heading := func(level int, s string) {
		if md {
			p("%s %s\n\n", strings.Repeat("#", level), text(s))
		} else {
			p("%s\n", s)
		}
	}

	if md {
		heading(1, "weir compare")
		p("- A: %s\n- B: %s\n\n", text(describe(r.A)), text(describe(r.B)))
	} else {
		p("A: %s\nB: %s\n\n", describe(r.A), describe(r.B))
	}
	if len(r.EnvDiffs) > 0 {
		heading(2, "Environment differences")
		t := report.Table{Header: []string{"property", "A", "B"}, Align: "lll"}
		for _, d := range r.EnvDiffs {
			t.Rows = append(t.Rows, []string{d.Property, orDash(d.A), orDash(d.B)})
		}
		render(t)
	}
	for start := 0; start < len(r.Rows); {
		section := r.Rows[start].Section
		end := start
		for end < len(r.Rows) && r.Rows[end].Section == section {
			end++
		}
		heading(2, section)
		render(sectionTable(r.Rows[start:end]))
		start = end
	}
	if len(r.Rows) == 0 {
		p("%s\n\n", text("The runs have no point in common."))
	}
	for _, only := range []struct {
		side    string
		missing []Missing
	}{{"A", r.OnlyA}, {"B", r.OnlyB}} {
		if len(only.missing) == 0 {
			continue
		}
		heading(2, "Only in "+only.side)
		for _, m := range only.missing {
			item := m.Section + " " + orDash(m.Point)
			if m.Whole {
				item = m.Section + " (whole section)"
			}
			if md {
				p("- %s\n", text(item))
			} else {
				p("  %s\n", item)
			}
		}
		p("\n")
	}
	for _, l := range Legend() {
		if md {
			p("- %s\n", text(l))
		} else {
			p("%s\n", l)
		}
	}
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", report.ErrWrite, err)
	}
	return nil
}

// describe names a side: its label, run name, commit and start time.
func describe(s Side) string {
	parts := []string{"run " + orDefault(s.Run.Name, "unnamed")}
	if c := s.Run.Env.WeirCommit; c != "" {
		parts = append(parts, "commit "+c)
	}
	if !s.Run.Started.IsZero() {
		parts = append(parts, "started "+s.Run.Started.UTC().Format(time.RFC3339))
	}
	if s.Run.Interrupted {
		parts = append(parts, "interrupted")
	}
	return fmt.Sprintf("%s (%s)", s.Label, strings.Join(parts, ", "))
}

func sectionTable(rows []Row) report.Table {
	t := report.Table{Header: []string{"point", "metric", "A", "B", "delta", "p", "note"}, Align: "llrrrll"}
	for i, row := range rows {
		point := orDash(row.Point)
		if i > 0 && rows[i-1].Point == row.Point {
			point = "" // the point names its first row only
		}
		t.Rows = append(t.Rows, []string{point, row.Metric, summary(row.A), summary(row.B),
			deltaCell(row), pCell(row), note(row)})
	}
	return t
}

func summary(s stats.Summary) string {
	if s.N == 0 {
		return "-"
	}
	return report.FormatSummary(s)
}

func deltaCell(r Row) string {
	switch {
	case !r.Compared():
		return ""
	case !r.Cmp.Significant:
		return "~"
	case math.IsInf(r.Delta, 0):
		return fmt.Sprintf("%+v%%", r.Delta)
	}
	return fmt.Sprintf("%+.1f%%", r.Delta)
}

func pCell(r Row) string {
	if !r.Compared() {
		return ""
	}
	return fmt.Sprintf("p=%.3f n=%d+%d", r.Cmp.P, r.Cmp.N1, r.Cmp.N2)
}

func note(r Row) string {
	switch {
	case !r.Compared():
		return "only in " + r.Only
	case r.Cmp.NeedN > 0:
		return fmt.Sprintf("need >= %d reps", r.Cmp.NeedN)
	case !r.Cmp.Significant || r.Delta == 0:
		return ""
	}
	up := r.Delta > 0
	switch {
	case result.HigherIsBetter(r.Metric):
		return map[bool]string{true: "better", false: "worse"}[up]
	case lowerIsBetter(r.Metric):
		return map[bool]string{true: "worse", false: "better"}[up]
	}
	return ""
}

// lowerIsBetter: latencies, CPU time, bytes written, fsyncs and skew. Counts
// have no better direction (result.HigherIsBetter reports false for both).
func lowerIsBetter(metric string) bool {
	switch metric {
	case result.BrokerCPUSeconds, result.ClientCPUSeconds, result.DiskWriteBytes, result.Fsyncs, result.PartitionSkew:
		return true
	}
	return strings.HasSuffix(metric, "-us")
}

func orDash(s string) string { return orDefault(s, "-") }

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
