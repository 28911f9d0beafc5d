package scale

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/internal/weirbin"
	"github.com/weir-broker/weir/harness/spec"
)

// weirBin is cmd/weir, built once: the experiment runs real `weir broker`
// processes.
var weirBin string

func TestMain(m *testing.M) { os.Exit(weirbin.Main(m, &weirBin)) }

// smallConfig is every step at 200 partitions, in seconds.
func smallConfig(t *testing.T) Config {
	sc := spec.DefaultScale()
	sc.PartitionsPerTopic = 50
	sc.CreateBatch = 2
	sc.MetadataRequests = 5
	sc.Restarts = 1
	sc.RestartTimeout = time.Minute
	sc.StepTimeout = time.Minute
	sc.SessionWindow = time.Second
	sc.SessionRate = 200
	sc.HotRounds = 2
	w := spec.Defaults().Workload
	w.Partitions = 2
	w.MessageSize = spec.MessageSize{Distribution: spec.Fixed, Size: 256}
	w.Rate = 2000
	w.Warmup = 100 * time.Millisecond
	w.Duration = 400 * time.Millisecond
	w.Linger = time.Millisecond
	return Config{Scale: sc, Partitions: 200, Workload: w, Weir: weirBin, DataDir: t.TempDir(), TopicPrefix: "scale-test", Seed: 1}
}

// The whole experiment at 200 partitions against the real broker: every
// step's figures present and sane.
func TestRunSmall(t *testing.T) {
	cfg := smallConfig(t)
	var mu sync.Mutex
	var notes []string
	cfg.Progress = func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, strings.Join(notes, "\n"))
	}
	m := out.Metrics
	positive := []string{"create-s", "fds-created", "rss-created-MiB", "hwm-created-MiB", "goroutines-created", "threads-created",
		"metadata-p50-ms", "metadata-p99-ms", "metadata-response-KiB", "produce-all-s", "consume-all-s",
		"clean-stop-s", "clean-restart-metadata-s", "clean-restart-fetch-s", "fds-clean-restart", "rss-clean-restart-MiB",
		"unclean-restart-metadata-s", "unclean-restart-fetch-s", "fds-unclean-restart", "rss-unclean-restart-MiB",
		"fetch-req-B-sessions", "fetch-resp-B-sessions", "wire-B-sessions", "fetches-sessions",
		"fetch-req-B-no-sessions", "fetch-resp-B-no-sessions", "fetches-no-sessions", "session-req-ratio", "session-resp-ratio",
		"hot-idle-produce-msgs/s", "hot-alone-produce-msgs/s", "hot-idle-consume-msgs/s", "hot-alone-consume-msgs/s", "hot-ratio", "hot-round-ratio-min", "hot-round-ratio-max",
		MetricFDsMax, MetricHWMMax, MetricOpenFilesLimit}
	for _, k := range positive {
		if v, ok := m[k]; !ok || !(v > 0) {
			t.Errorf("%s = %v (present %t), want > 0", k, v, ok)
		}
	}
	if m["hot-round-ratio-min"] > m["hot-ratio"] || m["hot-ratio"] > m["hot-round-ratio-max"] {
		t.Errorf("hot ratio %v outside its rounds' range %v..%v", m["hot-ratio"], m["hot-round-ratio-min"], m["hot-round-ratio-max"])
	}
	if m["records-consumed"] != 200 || m["session-partitions"] != 200 {
		t.Errorf("records-consumed %v, session-partitions %v; want 200 each", m["records-consumed"], m["session-partitions"])
	}
	if g := m["sessions-granted"]; g != 0 && g != 1 {
		t.Errorf("sessions-granted = %v", g)
	}
	if m["metadata-p99-ms"] < m["metadata-p50-ms"] || m[MetricFDsMax] < m["fds-created"] || m[MetricHWMMax] < m["rss-created-MiB"] {
		t.Errorf("p50 %v p99 %v; fds created %v max %v; rss %v hwm max %v", m["metadata-p50-ms"], m["metadata-p99-ms"],
			m["fds-created"], m[MetricFDsMax], m["rss-created-MiB"], m[MetricHWMMax])
	}
	// A fetch needs the broker serving: it cannot come before the exec.
	if m["clean-restart-fetch-s"] <= 0 || m["fetch-resp-B-no-sessions"] < m["fetch-req-B-no-sessions"]/10 {
		t.Errorf("restart fetch %v s; no-session fetch bytes req %v resp %v", m["clean-restart-fetch-s"], m["fetch-req-B-no-sessions"], m["fetch-resp-B-no-sessions"])
	}
	if _, ok := m[MetricFDBudget]; out.Limit.Soft <= 0 || out.Budget != 0 || ok {
		t.Errorf("limit %+v, budget %d (%v): want the limit and no budget without --max-open-files", out.Limit, out.Budget, m[MetricFDBudget])
	}
	if !strings.Contains(strings.Join(notes, "\n"), "step 7: round 2 of 2") {
		t.Errorf("progress lacks step 7's rounds:\n%s", strings.Join(notes, "\n"))
	}
}

// A broker that runs out of descriptors (one without a budget: three a
// partition) fails a step, and the error names the step and what
// happened; the figures before it stay, none after.
func TestRunOutOfDescriptors(t *testing.T) {
	cfg := smallConfig(t)
	cfg.Partitions = 600
	cfg.Scale.PartitionsPerTopic = 100
	cfg.OpenFilesLimit = 256
	cfg.BrokerFlags = append(cfg.BrokerFlags, "--max-open-files=-1")
	cfg.Scale.RequestTimeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Run(ctx, cfg)
	var se *StepError
	if !errors.As(err, &se) || !errors.Is(err, ErrStep) {
		t.Fatalf("Run at 600 partitions under 256 descriptors = %v, want a StepError", err)
	}
	t.Logf("failed as expected: %v", err)
	if ParseStep(err.Error()) != se.Step {
		t.Errorf("ParseStep(%q) = %d, want %d", err, ParseStep(err.Error()), se.Step)
	}
	if out == nil || out.Metrics[MetricOpenFilesLimit] != 256 {
		t.Fatalf("outcome %+v", out)
	}
	if _, ok := out.Metrics["hot-ratio"]; ok {
		t.Errorf("a figure of step 7 after step %d failed", se.Step)
	}
}
