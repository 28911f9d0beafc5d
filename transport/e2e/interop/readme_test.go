package interop_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadmeInterop keeps README.md's Interoperability table true: a row per
// client, a column per operation in the order the tests run them, ✗ exactly
// where the client's tests skip for want of an API (lacks).
func TestReadmeInterop(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n## Interoperability\n"
	start := strings.Index(string(readme), heading)
	if start < 0 {
		t.Fatal(`README.md has no "## Interoperability" section`)
	}
	section := string(readme[start+len(heading):])
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	header := "| client | " + strings.Join(ops, " | ") + " |"
	if !strings.Contains(section, "\n"+header+"\n") {
		t.Fatalf("README.md, Interoperability: no table headed\n%s", header)
	}
	table := section[strings.Index(section, header):]
	table = table[:strings.Index(table, "\n\n")]
	rows := map[string]bool{}
	for line := range strings.Lines(table) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		name, _, _ := strings.Cut(strings.TrimSpace(cells[0]), " ")
		if _, ok := lacks[name]; !ok {
			continue // the header, its rule
		}
		rows[name] = true
		if len(cells) != 1+len(ops) {
			t.Errorf("README.md row %s: %d operations, want %d", name, len(cells)-1, len(ops))
			continue
		}
		for i, op := range ops {
			cell := strings.TrimSpace(cells[1+i])
			_, lacking := lacks[name][op]
			if want := map[bool]string{true: "✗", false: "✓"}[lacking]; !strings.HasPrefix(cell, want) {
				t.Errorf("README.md: %s %s is %q, want %s (lacks: %q)", name, op, cell, want, lacks[name][op])
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(lacks)) {
		if !rows[name] {
			t.Errorf("README.md, Interoperability: no row for %s", name)
		}
	}
}
