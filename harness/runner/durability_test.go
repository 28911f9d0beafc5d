package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/durability"
	"github.com/weir-broker/weir/harness/report"
)

// durabilitySpec is two policies under both faults, one run each: a
// second or two in all.
const durabilitySpec = `
name: dur
seed: 5
repetitions: 1
workload:
  partitions: 2
  message_size: 100
  rate: 5000
  warmup: 50ms
  duration: 100ms
  linger: 1ms
factors:
  flush_policy: [every-batch, never]
durability:
  torn: 0
`

// A spec with a durability block runs the durability experiment: a broker
// per repetition, killed (weir broker subprocesses) or powered off (in
// process), checked against what each setting promises, reported with a
// loss section and the loss-versus-throughput plots.
func TestRunDurability(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	data := t.TempDir()
	var stdout, stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{
		Spec: parse(t, durabilitySpec), Out: out, DataDir: data, Weir: weirBin, Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if len(run.Sections) != 2 || run.Sections[0].Name != "durability" || run.Sections[1].Name != "durability-loss" {
		t.Fatalf("sections: %+v", run.Sections)
	}
	sec := run.Sections[0]
	if strings.Join(sec.Factors, ",") != "flush_policy,fault" || len(sec.Points) != 4 {
		t.Fatalf("durability section: factors %v, %d points", sec.Factors, len(sec.Points))
	}
	for _, p := range sec.Points {
		if len(p.Reps) != 1 || p.Reps[0].Error != "" {
			t.Fatalf("point %s: %+v", p.ID, p.Reps)
		}
		m := p.Reps[0].Metrics
		if m[durability.MetricAcked] == 0 || m[durability.MetricCorrupt] != 0 || m[durability.MetricOffsetGaps] != 0 {
			t.Errorf("point %s: %v", p.ID, m)
		}
		lost := m[durability.MetricAckedLost]
		switch p.ID {
		case "flush_policy=never/fault=power":
			// Strict clones (torn: 0) keep nothing never did not fsync.
			if lost == 0 || lost != m[durability.MetricAcked] {
				t.Errorf("never under a power cut lost nothing: %v", m)
			}
		default:
			if lost != 0 {
				t.Errorf("point %s lost %v acknowledged records", p.ID, lost)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## durability-loss", "## durability: loss window versus throughput",
		"plots/durability-acked-lost-vs-throughput-power.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, report.PlotsDir, "durability-lost-age-vs-throughput-power.svg")); err != nil {
		t.Error(err)
	}
	if n := strings.Count(stderr.String(), "] durability flush_policy="); n != 4 {
		t.Errorf("progress printed %d point lines, want 4:\n%s", n, stderr.String())
	}
	if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
		t.Errorf("data directory left %v (%v)", entries, err)
	}
}
