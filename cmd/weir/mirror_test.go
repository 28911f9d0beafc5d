package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// TestMirrorCLI runs `weir mirror` in-process from a config file until
// the target caught up, then checks `weir mirror status` and `weir mirror
// translate --commit` against the two brokers.
func TestMirrorCLI(t *testing.T) {
	src, dst := startTestBroker(t), startTestBroker(t)
	produceNumbered(t, src, "clicks", 2, 30)
	cfgPath := filepath.Join(t.TempDir(), "mirror.yaml")
	cfg := "source: " + src + "\ntarget: [" + dst + "]\ntopics: clicks\ncommit-interval: 50ms\nrefresh-interval: 100ms\noffset-sync-interval: 10\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "consume", "-b", src, "-t", "clicks", "-G", "reporting", "-c", "25")

	stderr := runMirrorUntil(t, []string{"mirror", "--config", cfgPath, "--source-alias", "east", "--progress", "always"},
		dst, "east.clicks", 2, 30)
	if !strings.Contains(stderr.String(), "mirrored ") {
		t.Errorf("no progress line with --progress always:\n%s", stderr.String())
	}

	out, _ := mustCLI(t, "", "mirror", "status", "--config", cfgPath, "--source-alias", "east")
	for _, want := range []string{"clicks  0  east.clicks  30  30  0  0.0", "clicks  1  east.clicks  30  30  0  0.0", "total  2"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("mirror status lacks %q:\n%s", want, out)
		}
	}
	out, _ = mustCLI(t, "", "mirror", "translate", "--config", cfgPath, "--source-alias", "east", "--group", "reporting", "--commit")
	if !strings.Contains(out, "committed") {
		t.Errorf("translate --commit did not say what it committed:\n%s", out)
	}
	got := brokertest.CommittedOffsets(t, dst, "reporting", "east.clicks", 2)
	src0 := brokertest.CommittedOffsets(t, src, "reporting", "clicks", 2)
	for p := range 2 {
		// Same offsets on both sides here; translation is conservative,
		// at most the sync interval (10) behind, never ahead.
		if got[p] > src0[p] || got[p] < src0[p]-10 {
			t.Errorf("partition %d: translated %d for source offset %d, want within 10 at or below it", p, got[p], src0[p])
		}
	}
}

func TestMirrorProgressLine(t *testing.T) {
	prev := mirrorTotals{records: 1000, bytes: 1e6}
	cur := mirrorTotals{partitions: 4, records: 3000, bytes: 3e6, lag: 12, lagSeconds: 0.25, failing: 1, errors: 7}
	got := progressLine(cur, prev, 2*time.Second)
	want := "mirrored 3000 records (3.0 MB) in 4 partitions, 1000 rec/s 1.0 MB/s, lag 12 records 0.2s, 1 partitions retrying (7 records refused)"
	if got != want {
		t.Errorf("progressLine =\n%q, want\n%q", got, want)
	}
}

func TestMirrorBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"mirror", "--target", "x:1", "--topics", "a"},
		{"mirror", "--source", "x:1", "--target", "y:1", "--topics", "("},
		{"mirror", "--source", "x:1", "--target", "y:1", "--topics", "a", "--compression", "brotli"},
		{"mirror", "--source", "x:1", "--target", "y:1", "--topics", "a", "--source-alias", "a.b"},
	} {
		if _, _, err := cli(t, "", args...); err == nil || !strings.Contains(err.Error(), "bad flag") {
			t.Errorf("weir %s: error %v, want a bad flag", strings.Join(args, " "), err)
		}
	}
}

// runMirrorUntil runs `weir <args>` until the mirror's positions in every
// partition of target topic on dst reach n, then stops it (as Ctrl-C
// would) and returns its stderr; it fails the test if that takes longer
// than brokertest.Timeout or the command fails.
func runMirrorUntil(t *testing.T, args []string, dst, topic string, parts int32, n int64) *bytes.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() { done <- runContext(ctx, args, &bytes.Buffer{}, &stderr) }()
	deadline := time.Now().Add(brokertest.Timeout)
	for caughtUp := false; !caughtUp; {
		caughtUp = true
		for _, pos := range brokertest.CommittedOffsets(t, dst, "weir-mirror", topic, parts) {
			caughtUp = caughtUp && pos == n
		}
		if !caughtUp && time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("mirror did not catch up:\n%s", stderr.String())
		}
		if !caughtUp {
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("weir mirror: %v\n%s", err, stderr.String())
	}
	return &stderr
}
