package scale

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// reportRun is three partition counts: 1,000 measured in full (two reps),
// 10,000 failed at step 4 after its first steps, 100,000 failed at step 1
// with no figure at all but the descriptors sampled before.
func reportRun() *result.Run {
	point := func(n string, reps ...result.Rep) result.Point {
		return result.Point{ID: spec.FactorTotalPartitions + "=" + n, Factors: []result.FactorValue{{Name: spec.FactorTotalPartitions, Value: n}}, Reps: reps}
	}
	full := func(scale float64) map[string]float64 {
		return map[string]float64{
			"create-s": 7 * scale, "fds-created": 3013, "rss-created-MiB": 48, "hwm-created-MiB": 49, "goroutines-created": 1039, "threads-created": 9,
			"metadata-p50-ms": 0.9, "metadata-p99-ms": 2.5, "metadata-response-KiB": 26, "produce-all-s": 0.03, "consume-all-s": 0.03, "records-consumed": 1000,
			"clean-stop-s": 3.9, "clean-restart-metadata-s": 2.8, "clean-restart-fetch-s": 2.7, "fds-clean-restart": 3011, "rss-clean-restart-MiB": 44,
			"unclean-restart-metadata-s": 2.6, "unclean-restart-fetch-s": 2.6, "fds-unclean-restart": 3011, "rss-unclean-restart-MiB": 44,
			"session-partitions": 1000, "sessions-granted": 0, "fetch-req-B-sessions": 28412, "fetch-resp-B-sessions": 42251, "fetches-sessions": 201,
			"broker-cpu-s-sessions": 0.34, "fetch-req-B-no-sessions": 28412, "fetch-resp-B-no-sessions": 42251, "fetches-no-sessions": 201,
			"broker-cpu-s-no-sessions": 0.28, "session-req-ratio": 1, "session-resp-ratio": 1,
			"hot-idle-produce-msgs/s": 396000, "hot-alone-produce-msgs/s": 375000, "hot-ratio": 1.056, "hot-round-ratio-min": 0.8, "hot-round-ratio-max": 1.3,
			"hot-idle-consume-msgs/s": 385000, "hot-alone-consume-msgs/s": 383000, "hot-consume-ratio": 1.007,
			MetricFDsMax: 3031, MetricHWMMax: 82 * scale, MetricOpenFilesLimit: 20000,
		}
	}
	partial := map[string]float64{"create-s": 75, "fds-created": 30013, "rss-created-MiB": 300, "hwm-created-MiB": 310, "goroutines-created": 10039,
		"metadata-p50-ms": 9, "metadata-p99-ms": 250, "produce-all-s": 0.5, "consume-all-s": 0.4, "records-consumed": 10000,
		MetricFDsMax: 30020, MetricHWMMax: 2500, MetricOpenFilesLimit: 40000, MetricFDBudget: 20000}
	return &result.Run{Version: result.SchemaVersion, Name: "scale", Env: result.Env{WeirCommit: "abc1234", BrokerOpenFiles: "soft 40000, hard 40000"},
		Sections: []result.Section{{Name: spec.SectionScale, Factors: []string{spec.FactorTotalPartitions}, OwnReport: true, Points: []result.Point{
			point("100000", result.Rep{Metrics: map[string]float64{MetricFDsMax: 19990, MetricOpenFilesLimit: 20000},
				Error: "step 1 (create the partitions): CreateTopics for topics 660..669: context deadline exceeded (the broker is running, holding 19990 open descriptors)"}),
			point("1000", result.Rep{Metrics: full(1)}, result.Rep{Metrics: full(1.2)}),
			point("10000", result.Rep{Metrics: partial, Error: "step 4 (clean restart (SIGTERM)): restart 1 of 2: the broker did not come back"}),
		}}}}
}

func TestReportGolden(t *testing.T) {
	var md bytes.Buffer
	if err := WriteMarkdown(&md, reportRun(), []string{"scale-fds.svg"}); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := Print(&text, reportRun()); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"report.md.golden": md.Bytes(), "print.golden": text.Bytes()} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
		}
	}
}

// The report's reading of the figures: medians over the reps that got
// past a metric's step, the step a failure stopped at in place of a
// figure, verdicts against the goals, and the failures listed.
func TestReportCells(t *testing.T) {
	run := reportRun()
	ps := points(Section(run))
	if nOf(ps[0]) != 1000 || nOf(ps[1]) != 10000 || nOf(ps[2]) != 100000 {
		t.Fatalf("points not in increasing N: %d %d %d", nOf(ps[0]), nOf(ps[1]), nOf(ps[2]))
	}
	tests := []struct {
		p      *result.Point
		metric string
		format func(float64) string
		want   string
	}{
		{ps[0], "create-s", secs, "7.700 s"},       // the median of 7 and 8.4
		{ps[1], "create-s", secs, "75.00 s"},       // before the failed step: kept
		{ps[1], "metadata-p99-ms", ms, "250.0 ms"}, // likewise
		{ps[1], "clean-restart-metadata-s", secs, "failed at step 4"},
		{ps[1], "hot-ratio", ratio, "failed at step 4"}, // after it: never a number
		{ps[2], "create-s", secs, "failed at step 1"},
		{ps[2], MetricFDsMax, count, "19990"}, // sampled before the failure
		{ps[0], "no-such-metric", count, "-"},
	}
	for _, tc := range tests {
		if got := figure(tc.p, tc.metric).text(tc.format); got != tc.want {
			t.Errorf("%d partitions, %s = %q, want %q", nOf(tc.p), tc.metric, got, tc.want)
		}
	}
	goals := table(ps, goalColumns())
	row := func(i int) string { return strings.Join(goals.Rows[i], " | ") }
	if want := "1000 | 3031 (no budget; limit 20000) | 90.20 MiB (met) | 2.800 s (met) | 2.500 ms (met) | 1.000× / 1.000× (sessions declined) | 1.056× (met)"; row(0) != want {
		t.Errorf("1,000 partitions' goals:\n%s\nwant\n%s", row(0), want)
	}
	if !strings.Contains(row(1), "30020 (20000) (MISSED)") || !strings.Contains(row(1), "2500 MiB (MISSED)") ||
		!strings.Contains(row(1), "250.0 ms (MISSED)") || !strings.Contains(row(1), "failed at step 4") {
		t.Errorf("10,000 partitions' goals: %s", row(1))
	}
	if f := failures(ps); len(f.Rows) != 2 || f.Rows[0][2] != "step 4 (clean restart (SIGTERM))" || f.Rows[1][2] != "step 1 (create the partitions)" {
		t.Errorf("failures: %v", f.Rows)
	}
}

func TestParseStepAndStepOf(t *testing.T) {
	for msg, want := range map[string]int{
		"step 3 (x): y": 3, "step 7 (hot): z": 7, "step 9 (x): y": 0, "steps 3": 0, "scale: step failed": 0, "": 0,
		(&StepError{Step: StepSessions, Err: ErrConfig}).Error(): StepSessions,
	} {
		if got := ParseStep(msg); got != want {
			t.Errorf("ParseStep(%q) = %d, want %d", msg, got, want)
		}
	}
	for m, want := range map[string]int{
		"create-s": 1, "fds-created": 1, "goroutines-empty": 1, "metadata-p99-ms": 2, "records-consumed": 3, "clean-stop-s": 4,
		"fds-clean-restart": 4, "rss-unclean-restart-MiB": 5, "unclean-restart-fetch-s": 5, "fetch-req-B-sessions": 6,
		"wire-B-no-sessions": 6, "sessions-granted": 6, "session-partitions": 6, "broker-cpu-s-sessions": 6, "hot-ratio": 7,
		MetricFDsMax: 0, MetricHWMMax: 0,
	} {
		if got := stepOf(m); got != want {
			t.Errorf("stepOf(%q) = %d, want %d", m, got, want)
		}
	}
}

func TestFlagBudgetAndGoroutines(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  int
	}{
		{nil, 0}, {[]string{"--max-open-files=5000"}, 5000}, {[]string{"--log-level", "warn", "--max-open-files", "700"}, 700},
		{[]string{"--max-open-files"}, 0}, {[]string{"--max-open-files=x"}, 0}, {[]string{"--max-open-filesx=3"}, 0},
	} {
		if got := flagBudget(tc.flags); got != tc.want {
			t.Errorf("flagBudget(%q) = %d, want %d", tc.flags, got, tc.want)
		}
	}
	if n, err := parseGoroutines("goroutine profile: total 1234\n"); err != nil || n != 1234 {
		t.Errorf("parseGoroutines = %d, %v", n, err)
	}
	if _, err := parseGoroutines("heap profile: 1\n"); err == nil {
		t.Error("parseGoroutines of another profile: no error")
	}
}
