package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/weir-broker/weir/harness/result"
)

// WriteMarkdown writes the Markdown report of run: a title and summary
// line, a note when the run was interrupted, the environment, then per
// section its tables (one per metric group), published figures beside this
// machine's, failed reps and the plots PlanPlots chooses (linked under
// plots/, as Write lays them out), and last the spec the run used.
func WriteMarkdown(w io.Writer, run *result.Run) error {
	if err := check(run); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	var err error
	render := func(t Table) {
		if err == nil {
			err = t.Render(bw, true)
		}
		p("\n")
	}

	p("# weir run: %s\n\n", EscapeMarkdown(orDefault(run.Name, "unnamed")))
	p("%s.\n\n", EscapeMarkdown(runLine(run)))
	if run.Interrupted {
		p("> **Interrupted.** %s\n\n", interruptedNote())
	}
	if run.Skipped != "" {
		p("> **Skipped.** %s\n\n", EscapeMarkdown(run.Skipped))
	}
	p("Each figure is the median of a point's successful repetitions, \"± x%%\" the median absolute deviation " +
		"as a percentage of the median; \"(n=k)\" marks a metric that only k repetitions recorded. " +
		"Latencies are in µs, CPU time in s. The raw repetitions are in [run.json](run.json), and in Go benchmark " +
		"format in [bench.txt](bench.txt) (`benchstat bench.txt`; `weir compare` compares two runs).\n\n")

	p("## Environment\n\n")
	render(Table{Header: []string{"property", "value"}, Rows: envRows(run), Align: "ll"})

	plots := PlanPlots(run)
	for i := range run.Sections {
		v := newView(&run.Sections[i])
		p("## %s\n\n", EscapeMarkdown(v.sec.Name))
		if line := factorLine(v); line != "" {
			p("%s\n\n", EscapeMarkdown(line))
		}
		if len(v.sec.Points) == 0 {
			p("No point of this section finished.\n\n")
			continue
		}
		if v.sec.OwnReport {
			p("%s\n\n", ownReportNote)
			if f := v.failures(); len(f.Rows) > 0 {
				p("### Failed repetitions\n\n")
				render(f)
			}
			continue
		}
		tables := v.metricTables()
		for ti, g := range tables {
			if g.Name != "" {
				p("### %s\n\n", g.Name)
			}
			render(v.pointTable(g.Metrics, ti == 0))
		}
		if bt, ok := v.baselineTable(); ok {
			p("### Against the baseline\n\n%s\n\n", EscapeMarkdown(v.baselineNote()))
			render(bt)
		}
		if refs := v.references(run.References); len(refs) > 0 {
			p("### This machine vs published\n\n")
			render(referenceTable(refs))
		}
		if f := v.failures(); len(f.Rows) > 0 {
			p("### Failed repetitions\n\n")
			render(f)
		}
		var links []string
		for _, ps := range plots {
			if ps.Section == v.sec.Name {
				links = append(links, fmt.Sprintf("![%s](%s/%s)", EscapeMarkdown(ps.Title), PlotsDir, ps.File))
			}
		}
		if len(links) > 0 {
			p("### Plots\n\nMedians with error bars from the fastest to the slowest repetition.\n\n")
			p("%s\n\n", strings.Join(links, "\n"))
		}
	}
	if refs := orphanReferences(run); len(refs) > 0 {
		p("## Published figures without a measurement\n\nThe run has no section these belong beside.\n\n")
		render(referenceTable(refs))
	}
	if strings.TrimSpace(run.Spec) != "" {
		fence := "```"
		for strings.Contains(run.Spec, fence) {
			fence += "`"
		}
		p("## Spec\n\nThe spec this run executed, with seed %d:\n\n%syaml\n%s\n%s\n", run.Seed, fence,
			strings.TrimRight(run.Spec, "\n"), fence)
	}
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}

// factorLine names the varied factors with their levels and the fixed ones
// with their value: "codec: none, zstd; flush: never, every-batch. Fixed:
// acks=1."
func factorLine(v *view) string {
	var parts []string
	for _, f := range v.varying {
		parts = append(parts, f+": "+strings.Join(v.levels[f], ", "))
	}
	line := strings.Join(parts, "; ")
	if line != "" {
		line = "Varied " + line + "."
	}
	if len(v.fixed) > 0 {
		var fixed []string
		for _, f := range v.fixed {
			fixed = append(fixed, f.Name+"="+f.Value)
		}
		line = strings.TrimSpace(line + " Fixed: " + strings.Join(fixed, ", ") + ".")
	}
	return line
}

// orphanReferences are references to sections the run does not have.
func orphanReferences(run *result.Run) []refRow {
	var out []refRow
	for _, ref := range run.References {
		found := false
		for _, s := range run.Sections {
			found = found || s.Name == ref.Section
		}
		if !found {
			out = append(out, refRow{ref: ref})
		}
	}
	return out
}
