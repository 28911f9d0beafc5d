package report

import (
	"bufio"
	"fmt"
	"io"

	"github.com/weir-broker/weir/harness/result"
)

// Print writes the report's tables to a terminal: the summary line, the
// environment, and per section the metric tables, published figures and
// failed reps, without links or plots.
func Print(w io.Writer, run *result.Run) error {
	if err := check(run); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	var err error
	render := func(t Table) {
		if err == nil {
			err = t.Render(bw, false)
		}
		p("\n")
	}

	p("weir run: %s\n%s\n", orDefault(run.Name, "unnamed"), runLine(run))
	if run.Interrupted {
		p("INTERRUPTED: %s\n", interruptedNote())
	}
	if run.Skipped != "" {
		p("SKIPPED: %s\n", run.Skipped)
	}
	p("Figures: median ± median absolute deviation (%% of the median) over the successful reps.\n\n")
	render(Table{Header: []string{"environment", ""}, Rows: envRows(run), Align: "ll"})

	for i := range run.Sections {
		v := newView(&run.Sections[i])
		p("== %s ==\n", v.sec.Name)
		if line := factorLine(v); line != "" {
			p("%s\n", line)
		}
		if len(v.sec.Points) == 0 {
			p("No point of this section finished.\n\n")
			continue
		}
		p("\n")
		if v.sec.OwnReport {
			p("%s\n\n", ownReportNote)
			if f := v.failures(); len(f.Rows) > 0 {
				p("Failed repetitions\n")
				render(f)
			}
			continue
		}
		for ti, g := range v.metricTables() {
			if g.Name != "" {
				p("%s\n", g.Name)
			}
			render(v.pointTable(g.Metrics, ti == 0))
		}
		if bt, ok := v.baselineTable(); ok {
			p("Against the baseline\n%s\n", v.baselineNote())
			render(bt)
		}
		if refs := v.references(run.References); len(refs) > 0 {
			p("This machine vs published\n")
			render(referenceTable(refs))
		}
		if f := v.failures(); len(f.Rows) > 0 {
			p("Failed repetitions\n")
			render(f)
		}
	}
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}
