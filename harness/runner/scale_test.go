package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/scale"
)

// scaleSpec is two partition counts under a 1,000-descriptor limit, with
// no descriptor budget (three descriptors a partition): the broker holds
// 200 and not 600. scaleBudgetSpec is the same at 600 with a budget of 700:
// it holds them.
var (
	scaleSpec       = smallScaleSpec("scale-small", "--max-open-files=-1", "200, 600")
	scaleBudgetSpec = smallScaleSpec("scale-budget", "--max-open-files=700", "600")
)

func smallScaleSpec(name, budgetFlag, partitions string) string {
	return fmt.Sprintf(`
name: %s
repetitions: 1
target:
  embedded: {open_files_limit: 1000, broker_flags: [%s]}
workload:
  partitions: 2
  message_size: 256
  rate: 2000
  warmup: 100ms
  duration: 300ms
  linger: 1ms
scale:
  partitions: [%s]
  partitions_per_topic: 50
  create_batch: 4
  metadata_requests: 3
  restarts: 1
  request_timeout: 5s
  session_window: 500ms
  session_rate: 200
  hot_rounds: 1
`, name, budgetFlag, partitions)
}

// A spec with a scale block runs the scale experiment through the runner:
// a point per partition count, the broker under the spec's open-file
// limit, a count the broker cannot hold reported as the step it failed at
// (no figure of it or after), and the report's own section and plots.
func TestRunScale(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	var stdout, stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{Spec: parse(t, scaleSpec), Out: out, DataDir: t.TempDir(), Weir: weirBin,
		Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if run.Env.BrokerOpenFiles != "soft 1000, hard 1000" {
		t.Errorf("broker open files %q", run.Env.BrokerOpenFiles)
	}
	sec := scale.Section(run)
	if sec == nil || !sec.OwnReport || len(sec.Points) != 2 {
		t.Fatalf("scale section: %+v", sec)
	}
	small, big := sec.Points[0].Reps[0], sec.Points[1].Reps[0]
	if small.Error != "" || small.Metrics["records-consumed"] != 200 || !(small.Metrics["hot-ratio"] > 0) || !(small.Metrics["clean-restart-fetch-s"] > 0) {
		t.Errorf("200 partitions: error %q, metrics %v", small.Error, small.Metrics)
	}
	if scale.ParseStep(big.Error) != scale.StepCreate {
		t.Errorf("600 partitions under 1,000 descriptors: error %q, want step 1's", big.Error)
	}
	if _, ok := big.Metrics["create-s"]; ok {
		t.Errorf("600 partitions: a creation time despite the failure: %v", big.Metrics)
	}
	md, err := os.ReadFile(filepath.Join(out, report.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Partition scale", "### Against the issue's goals", "soft 1000, hard 1000", "failed at step 1",
		"### What failed", "too many open files", "![scale-fds](plots/scale-fds.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{"scale-fds.svg", "scale-memory.svg", "scale-times.svg", "scale-metadata.svg"} {
		if b, err := os.ReadFile(filepath.Join(out, report.PlotsDir, f)); err != nil || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	for _, want := range []string{"partition scale: against the issue's goals", "step 1 (create the partitions)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "step 7: round 1 of 1, alone") {
		t.Errorf("progress lacks step 7:\n%s", stderr.String())
	}
}

// With a descriptor budget the broker holds what it could not without
// one, within the budget: every step runs, and the descriptors it held
// (sockets and the rest included) stayed near the budget, far below the
// three a partition would take.
func TestRunScaleWithinBudget(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	var stdout, stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{Spec: parse(t, scaleBudgetSpec), Out: out, DataDir: t.TempDir(), Weir: weirBin,
		Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	rep := scale.Section(run).Points[0].Reps[0]
	if rep.Error != "" || rep.Metrics["records-consumed"] != 600 || !(rep.Metrics["clean-restart-fetch-s"] > 0) {
		t.Fatalf("600 partitions with a budget of 700: error %q, metrics %v", rep.Error, rep.Metrics)
	}
	if m := rep.Metrics[scale.MetricFDsMax]; !(m > 0 && m <= 700+100) || rep.Metrics[scale.MetricFDBudget] != 700 {
		t.Fatalf("600 partitions: %v descriptors at most, budget %v; want within the budget of 700 (and the broker's own ~100)",
			m, rep.Metrics[scale.MetricFDBudget])
	}
}
