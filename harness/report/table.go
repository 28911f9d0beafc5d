package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Table is a header and rows of cells, rendered as a Markdown table or a
// terminal table by tablewriter. Package compare prints its output with it
// too.
type Table struct {
	Header []string
	Rows   [][]string
	// Align has one letter per column: 'r' right-aligns it (figures),
	// anything else, or a missing letter, left-aligns it (names).
	Align string
}

// Render writes t as a Markdown table (markdown true) or a boxed terminal
// table. Header cells print as given (tablewriter would upper-case them),
// whitespace runs in cells fold to one space, and a Markdown table escapes
// the characters that would break its cells or start formatting.
func (t Table) Render(w io.Writer, markdown bool) error {
	clean := oneLine
	if markdown {
		clean = EscapeMarkdown
	}
	align := make([]tw.Align, len(t.Header))
	for i := range align {
		align[i] = tw.AlignLeft
		if i < len(t.Align) && t.Align[i] == 'r' {
			align[i] = tw.AlignRight
		}
	}
	opts := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	}
	if markdown {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
	}
	tab := tablewriter.NewTable(w, opts...)
	tab.Header(cleanAll(t.Header, clean))
	for _, r := range t.Rows {
		if err := tab.Append(cleanAll(r, clean)); err != nil {
			return fmt.Errorf("%w: table: %w", ErrWrite, err)
		}
	}
	if err := tab.Render(); err != nil {
		return fmt.Errorf("%w: table: %w", ErrWrite, err)
	}
	return nil
}

func cleanAll(cells []string, clean func(string) string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = clean(c)
	}
	return out
}

// EscapeMarkdown makes s safe inside a Markdown table cell or a heading:
// pipes and the characters that start emphasis, code, links, HTML or a
// heading are
// backslash-escaped, and whitespace runs (newlines too) fold to one space.
func EscapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range oneLine(s) {
		switch r {
		case '|', '\\', '*', '_', '`', '[', ']', '<', '#':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
