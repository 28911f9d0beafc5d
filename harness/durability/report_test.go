package durability

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
)

// syntheticRun is a durability section of two policies under both faults,
// three runs each, never losing under power and nothing else losing.
func syntheticRun() *result.Run {
	sec := result.Section{Name: "durability", Factors: []string{"flush_policy", "fault"}}
	for _, policy := range []string{"every-batch", "never"} {
		for _, fault := range []string{"kill", "power"} {
			p := result.Point{ID: "flush_policy=" + policy + "/fault=" + fault,
				Factors: []result.FactorValue{{Name: "flush_policy", Value: policy}, {Name: "fault", Value: fault}}}
			for i := range 3 {
				lost := 0.0
				if policy == "never" && fault == "power" && i > 0 {
					lost = float64(100 * i)
				}
				m := (&Outcome{Acked: 1000, AckedLost: int64(lost), OldestLostAge: time.Duration(lost) * time.Millisecond / 10,
					Window: time.Second, MsgsPerSec: 5000 + float64(1000*i), AckP99: time.Millisecond, AckMax: 2 * time.Millisecond}).Metrics()
				p.Reps = append(p.Reps, result.Rep{Started: time.Unix(int64(i), 0).UTC(), Duration: time.Second, Metrics: m})
			}
			sec.Points = append(sec.Points, p)
		}
	}
	sec.Points[0].Reps[2].Error = "guarantee broken: durability: acknowledged records lost"
	run := &result.Run{Version: result.SchemaVersion, Name: "durability", Seed: 1, Sections: []result.Section{sec}}
	run.Sections = append(run.Sections, Summarize(&run.Sections[0], func(id string) string {
		if strings.Contains(id, "never") && strings.Contains(id, "power") {
			return "unbounded"
		}
		return "nothing"
	}))
	return run
}

func TestSummarize(t *testing.T) {
	run := syntheticRun()
	loss := run.Sections[1]
	if loss.Name != "durability-loss" || strings.Join(loss.Factors, ",") != "flush_policy,fault,bound" || len(loss.Points) != 4 {
		t.Fatalf("loss section %s %v with %d points", loss.Name, loss.Factors, len(loss.Points))
	}
	p := loss.Points[3]
	if p.ID != "flush_policy=never/fault=power/bound=unbounded" || len(p.Reps) != 1 {
		t.Fatalf("point %s with %d reps", p.ID, len(p.Reps))
	}
	m := p.Reps[0].Metrics
	want := map[string]float64{MetricLostMedian: 100, MetricLostMax: 200, MetricLossRunsPct: 200.0 / 3,
		MetricLostAgeMaxMs: 20, MetricMedianMsgsPerSec: 6000, MetricMedianAckP99: 1000}
	for k, v := range want {
		if got := m[k]; got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if !IsSection(&run.Sections[0]) || IsSection(&loss) {
		t.Error("IsSection confuses the durability and loss sections")
	}
}

func TestWriteReport(t *testing.T) {
	run := syntheticRun()
	dir := t.TempDir()
	if err := report.Write(dir, run); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(dir, run); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	for _, want := range []string{
		"## durability: loss window versus throughput",
		"| flush\\_policy=never/fault=power       | unbounded |    3 |              2 |       100.0 |    200.0 |",
		"fault=kill: no setting lost an acknowledged record in any run",
		"## durability-loss", // report.Write's own table of the loss section
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report.md lacks %q:\n%s", want, text)
		}
	}
	// The broken run is counted beside its point.
	if !regexp.MustCompile(`flush\\_policy=every-batch/fault=kill +\| nothing +\| +3 \|.*\| +1 \|`).MatchString(text) {
		t.Errorf("the broken run is not counted:\n%s", text)
	}
	links := regexp.MustCompile(`\]\((plots/durability-(acked-lost|lost-age)-vs-throughput-power\.svg)\)`).FindAllStringSubmatch(text, -1)
	if len(links) != 2 {
		t.Fatalf("%d loss plots linked, want 2 (power only: kill lost nothing)", len(links))
	}
	for _, l := range links {
		b, err := os.ReadFile(filepath.Join(dir, l[1]))
		if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "never") {
			t.Errorf("%s: %v, not an SVG naming the policies", l[1], err)
		}
	}
}
