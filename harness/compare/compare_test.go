package compare

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
)

// run builds a one-section run whose points hold one metric per rep.
func run(commit string, points map[string][]float64, order ...string) *result.Run {
	sec := result.Section{Name: "load", Factors: []string{"codec"}}
	for _, id := range order {
		p := result.Point{ID: id}
		for _, v := range points[id] {
			p.Reps = append(p.Reps, result.Rep{Metrics: map[string]float64{result.ProduceMBPerSec: v}})
		}
		sec.Points = append(sec.Points, p)
	}
	return &result.Run{Version: result.SchemaVersion, Name: "t", Env: result.Env{WeirCommit: commit},
		Sections: []result.Section{sec}}
}

func find(t *testing.T, res *Result, point, metric string) Row {
	t.Helper()
	for _, r := range res.Rows {
		if r.Point == point && r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no row for %s %s in %+v", point, metric, res.Rows)
	return Row{}
}

func TestCompareSignificance(t *testing.T) {
	a := run("aaa", map[string][]float64{
		"clear":     {100, 101, 99, 102, 100.5},
		"same":      {50, 51, 49, 52, 50.5},
		"overlap":   {70, 72, 74, 76, 78},
		"few":       {10, 11, 12},
		"only-in-a": {1, 2, 3, 4, 5},
	}, "clear", "same", "overlap", "few", "only-in-a")
	b := run("bbb", map[string][]float64{
		"clear":     {120, 121, 119, 122, 120.5}, // every rep above every rep of A
		"same":      {50, 51, 49, 52, 50.5},      // the very same values
		"overlap":   {71, 73, 75, 77, 79},        // shifted by less than the spread
		"few":       {20, 21, 22},                // far apart, but 3 reps a side
		"only-in-b": {1, 2, 3, 4, 5},
	}, "clear", "same", "overlap", "few", "only-in-b")
	res, err := Compare(Side{"a", a}, Side{"b", b})
	if err != nil {
		t.Fatal(err)
	}

	clear := find(t, res, "clear", result.ProduceMBPerSec)
	// Complete separation of 5 and 5: p = 2/252. Medians 100.5 -> 120.5.
	if !clear.Cmp.Significant || math.Abs(clear.Cmp.P-2.0/252) > 1e-9 {
		t.Errorf("clear difference: p = %v, significant %v; want 2/252, significant", clear.Cmp.P, clear.Cmp.Significant)
	}
	if want := 20 / 100.5 * 100; math.Abs(clear.Delta-want) > 1e-9 {
		t.Errorf("clear difference: delta %v%%, want %v%%", clear.Delta, want)
	}
	for _, id := range []string{"same", "overlap"} {
		r := find(t, res, id, result.ProduceMBPerSec)
		if r.Cmp.Significant || r.Cmp.P <= 0.05 || r.Cmp.NeedN != 0 {
			t.Errorf("%s: p = %v, significant %v, need %d; want not significant, enough reps", id, r.Cmp.P, r.Cmp.Significant, r.Cmp.NeedN)
		}
	}
	if r := find(t, res, "same", result.ProduceMBPerSec); r.Cmp.P != 1 || r.Delta != 0 {
		t.Errorf("identical samples: p = %v, delta %v; want 1 and 0", r.Cmp.P, r.Delta)
	}
	if few := find(t, res, "few", result.ProduceMBPerSec); few.Cmp.Significant || few.Cmp.NeedN != 4 {
		t.Errorf("3 reps a side: significant %v, need %d; want not significant, need 4", few.Cmp.Significant, few.Cmp.NeedN)
	}
	if len(res.OnlyA) != 1 || res.OnlyA[0].Point != "only-in-a" || len(res.OnlyB) != 1 || res.OnlyB[0].Point != "only-in-b" {
		t.Errorf("only in A %+v, only in B %+v", res.OnlyA, res.OnlyB)
	}
	if len(res.EnvDiffs) != 1 || res.EnvDiffs[0] != (EnvDiff{"weir commit", "aaa", "bbb"}) {
		t.Errorf("env diffs %+v, want the commit only", res.EnvDiffs)
	}

	var out bytes.Buffer
	if err := res.Write(&out, FormatText); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for _, want := range []struct{ point, has string }{
		{"clear", "+19.9%"}, {"clear", "better"}, {"same", " ~ "}, {"overlap", " ~ "}, {"few", "need >= 4 reps"},
	} {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, " "+want.point+" ") && strings.Contains(l, want.has)
		}
		if !found {
			t.Errorf("no line for %s with %q in:\n%s", want.point, want.has, out.String())
		}
	}
}

// TestMetricsAndSections: a metric one side lacks is a row without a test;
// sections one run lacks are listed whole; failed reps are left out.
func TestMetricsAndSections(t *testing.T) {
	a := run("c", map[string][]float64{"p": {1, 2, 3, 4, 5}}, "p")
	b := run("c", map[string][]float64{"p": {1, 2, 3, 4, 5}}, "p")
	b.Sections[0].Points[0].Reps[0].Metrics[result.Fsyncs] = 7
	b.Sections[0].Points[0].Reps = append(b.Sections[0].Points[0].Reps,
		result.Rep{Error: "timeout", Metrics: map[string]float64{result.ProduceMBPerSec: 1e9}})
	a.Sections = append(a.Sections, result.Section{Name: "disk"})
	b.Sections = append(b.Sections, result.Section{Name: "replication"})
	res, err := Compare(Side{"a", a}, Side{"b", b})
	if err != nil {
		t.Fatal(err)
	}
	if r := find(t, res, "p", result.Fsyncs); r.Compared() || r.Only != "B" || r.B.N != 1 || r.A.N != 0 {
		t.Errorf("fsyncs only in B: %+v", r)
	}
	if r := find(t, res, "p", result.ProduceMBPerSec); r.Cmp.N2 != 5 || r.Cmp.Significant {
		t.Errorf("failed rep compared: %+v", r.Cmp)
	}
	if len(res.OnlyA) != 1 || !res.OnlyA[0].Whole || res.OnlyA[0].Section != "disk" ||
		len(res.OnlyB) != 1 || !res.OnlyB[0].Whole || res.OnlyB[0].Section != "replication" {
		t.Errorf("only in A %+v, only in B %+v; want the sections whole", res.OnlyA, res.OnlyB)
	}
	var md bytes.Buffer
	if err := res.Write(&md, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# weir compare", "## load", "| only in B", "## Only in A\n\n- disk (whole section)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestDelta(t *testing.T) {
	tests := []struct{ a, b, want float64 }{
		{100, 120, 20}, {100, 80, -20}, {-100, -50, 50}, {0, 0, 0}, {0, 5, math.Inf(1)}, {0, -5, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := delta(tc.a, tc.b); got != tc.want {
			t.Errorf("delta(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	r := run("c", map[string][]float64{"p": {1}}, "p")
	dir := t.TempDir()
	if err := report.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, report.RunFile)} {
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Env.WeirCommit != "c" {
			t.Errorf("Load(%s) read %+v", path, got.Env)
		}
	}
	notJSON := filepath.Join(dir, report.MarkdownFile)
	for _, path := range []string{filepath.Join(dir, "missing"), t.TempDir(), notJSON} {
		if _, err := Load(path); !errors.Is(err, ErrInput) {
			t.Errorf("Load(%s) = %v, want ErrInput", path, err)
		}
	}
	if _, err := Load(notJSON); !errors.Is(err, result.ErrSchema) {
		t.Errorf("Load(report.md) = %v, want it to wrap result.ErrSchema", err)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Compare(Side{"a", nil}, Side{"b", run("c", nil)}); !errors.Is(err, ErrInput) {
		t.Errorf("Compare(nil) = %v, want ErrInput", err)
	}
	res, err := Compare(Side{"a", run("c", nil)}, Side{"b", run("c", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Write(&bytes.Buffer{}, "html"); !errors.Is(err, ErrFormat) {
		t.Errorf("Write(html) = %v, want ErrFormat", err)
	}
	var out bytes.Buffer
	if err := res.Write(&out, FormatText); err != nil || !strings.Contains(out.String(), "no point in common") {
		t.Errorf("empty comparison: %v\n%s", err, out.String())
	}
}
