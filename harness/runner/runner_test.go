package runner

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/internal/weirbin"
	"github.com/weir-broker/weir/harness/load"
	"github.com/weir-broker/weir/harness/report"
	"github.com/weir-broker/weir/harness/result"
	"github.com/weir-broker/weir/harness/spec"
)

// weirBin is cmd/weir built once for the tests: the runner starts its
// `weir broker` as the embedded target, as the CLI does with itself.
var weirBin string

func TestMain(m *testing.M) { os.Exit(weirbin.Main(m, &weirBin)) }

// tinySpec is two points of one repetition, about a second each.
const tinySpec = `
name: tiny
seed: 3
repetitions: 1
workload:
  partitions: 2
  message_size: 512
  payload: json
  keys: {kind: uniform, count: 100}
  producers: 1
  consumers: 1
  warmup: 300ms
  duration: 1s
  linger: 2ms
factors:
  codec: [none, zstd]
`

func parse(t *testing.T, text string) *spec.Spec {
	t.Helper()
	s, err := spec.Parse([]byte(text), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRunEmbedded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	data := t.TempDir()
	var stdout, stderr bytes.Buffer
	run, dir, err := Run(context.Background(), Options{
		Spec: parse(t, tinySpec), Out: out, DataDir: data, Weir: weirBin, Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
	}
	if dir != out {
		t.Errorf("report in %s, want %s", dir, out)
	}
	if run.Interrupted || run.Env.Target != "embedded" || run.Env.DataDir != data || run.Seed != 3 || !strings.Contains(run.Spec, "codec: [none, zstd]") {
		t.Errorf("run: interrupted %v, target %q, data dir %q, seed %d", run.Interrupted, run.Env.Target, run.Env.DataDir, run.Seed)
	}
	if len(run.Sections) != 1 || run.Sections[0].Name != "load" || len(run.Sections[0].Points) != 2 {
		t.Fatalf("sections: %+v", run.Sections)
	}
	for _, p := range run.Sections[0].Points {
		if len(p.Reps) != 1 {
			t.Fatalf("point %s: %d reps", p.ID, len(p.Reps))
		}
		rp := p.Reps[0]
		if rp.Error != "" {
			t.Fatalf("point %s failed: %s", p.ID, rp.Error)
		}
		checkRep(t, p.ID, rp)
	}
	// Without compression, the broker stores exactly the batches sent.
	none, zstd := run.Sections[0].Points[0], run.Sections[0].Points[1]
	if r := none.Reps[0].Metrics[result.CompressionRatio]; math.Abs(r-1) > 0.01 {
		t.Errorf("codec=none compression-ratio %v, want 1", r)
	}
	if r := zstd.Reps[0].Metrics[result.CompressionRatio]; r < 2 {
		t.Errorf("codec=zstd compression-ratio %v on JSON, want > 2", r)
	}
	// The report's files, and the printed tables.
	for _, f := range []string{report.RunFile, report.MarkdownFile, report.BenchFile} {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (size %d)", f, err, sizeOf(fi))
		}
	}
	back, err := result.Read(filepath.Join(out, report.RunFile))
	if err != nil || len(back.Sections) != 1 || len(back.Sections[0].Points) != 2 {
		t.Errorf("run.json read back: %v", err)
	}
	if !strings.Contains(stdout.String(), "codec=zstd") && !strings.Contains(stdout.String(), "zstd") {
		t.Errorf("printed tables do not show the points:\n%s", stdout.String())
	}
	if n := strings.Count(stderr.String(), "] load codec="); n != 2 {
		t.Errorf("progress printed %d point lines, want 2:\n%s", n, stderr.String())
	}
	// Each point's data directory is gone; the data root stays.
	if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
		t.Errorf("data directory left %v (%v)", entries, err)
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// checkRep asserts the internal consistency of one repetition's figures.
func checkRep(t *testing.T, id string, rp result.Rep) {
	t.Helper()
	m := rp.Metrics
	produced, consumed := m[result.MsgsProduced], m[result.MsgsConsumed]
	if produced <= 0 || consumed != produced || m[result.BytesConsumed] != m[result.BytesProduced] {
		t.Errorf("%s: produced %v records / %v bytes, consumed %v / %v", id, produced, m[result.BytesProduced], consumed, m[result.BytesConsumed])
	}
	// Fixed 512-byte values and "key-N" keys of 5 or 6 bytes.
	if b := m[result.BytesProduced]; b < produced*(512+5) || b > produced*(512+6) {
		t.Errorf("%s: %v bytes for %v records of 512 bytes plus a 5-6 byte key", id, b, produced)
	}
	secs := rp.Duration.Seconds()
	if rp.Duration != time.Second {
		t.Errorf("%s: window %v, want 1s", id, rp.Duration)
	}
	if got, want := m[result.ProduceMBPerSec], m[result.BytesProduced]/secs/load.MB; math.Abs(got-want) > 1e-9*want {
		t.Errorf("%s: produce-MB/s %v, want bytes/duration %v", id, got, want)
	}
	if got, want := m[result.ProduceMsgsPerSec], produced/secs; math.Abs(got-want) > 1e-9*want {
		t.Errorf("%s: produce-msgs/s %v, want msgs/duration %v", id, got, want)
	}
	for _, q := range [][]string{
		{result.AckP50, result.AckP95, result.AckP99, result.AckP999, result.AckMax},
		{result.E2EP50, result.E2EP95, result.E2EP99, result.E2EP999, result.E2EMax},
	} {
		for i := 1; i < len(q); i++ {
			if !(m[q[0]] > 0 && m[q[i-1]] <= m[q[i]]) {
				t.Errorf("%s: %s %v, %s %v: want 0 < p50 <= ... <= max", id, q[i-1], m[q[i-1]], q[i], m[q[i]])
			}
		}
	}
	// The broker subprocess's own counters.
	// CPU time comes in 10 ms ticks: a light point can round to 0. It
	// cannot exceed the window on every CPU.
	if cpu, ok := m[result.BrokerCPUSeconds]; !ok || cpu < 0 || cpu > secs*float64(runtime.NumCPU())+0.01 {
		t.Errorf("%s: broker-cpu-s %v (present %v)", id, cpu, ok)
	}
	if _, ok := m[result.Fsyncs]; !ok {
		t.Errorf("%s: no fsync count", id)
	}
	if s := m[result.PartitionSkew]; s < 1 || s > 2 {
		t.Errorf("%s: partition-skew %v outside [1, partitions]", id, s)
	}
}

func TestRunInterrupted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Stop the run the moment the first point reports it finished.
	stderr := &cancelOnWrite{marker: "[1/2]", cancel: cancel}
	run, _, err := Run(ctx, Options{Spec: parse(t, tinySpec), Out: out, Weir: weirBin, Stderr: stderr})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want ErrInterrupted", err)
	}
	if !run.Interrupted {
		t.Error("run not marked interrupted")
	}
	if len(run.Sections) != 1 || len(run.Sections[0].Points) != 1 || run.Sections[0].Points[0].ID != "codec=none" {
		t.Fatalf("kept %+v, want the first point only", run.Sections)
	}
	back, err := result.Read(filepath.Join(out, report.RunFile))
	if err != nil || !back.Interrupted {
		t.Errorf("run.json: %v, interrupted %v", err, back != nil && back.Interrupted)
	}
}

// cancelOnWrite cancels once marker has been written to it.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel func()
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

func TestRunBadSpecFailsBeforeLoad(t *testing.T) {
	tests := []struct {
		name, spec string
		want       []string
	}{
		{"unknown codec", strings.Replace(tinySpec, "[none, zstd]", "[none, zsdt]", 1), []string{`factors.codec[1]:`, `"zsdt"`}},
		{"negative rate", tinySpec + "  rate: -1\n", nil},
		{"missing plugin", strings.Replace(tinySpec, "[none, zstd]", "[none, ./no/such/codec]", 1), []string{"factors.codec[1]:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := spec.Parse([]byte(tc.spec), "")
			if err != nil {
				// Some mistakes are caught by the parser already.
				return
			}
			out := filepath.Join(t.TempDir(), "results")
			_, dir, err := Run(context.Background(), Options{Spec: s, Out: out, Weir: "/nonexistent/weir"})
			if !errors.Is(err, spec.ErrInvalid) {
				t.Fatalf("Run = %v, want spec.ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q: %v", w, err)
				}
			}
			if dir != "" {
				t.Errorf("report dir %q for a spec that never ran", dir)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("results directory created for a bad spec: %v", err)
			}
		})
	}
}

func TestRunUnreachableBootstrap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := parse(t, strings.Replace(tinySpec, "seed: 3", "seed: 3\ntarget: {bootstrap: \""+addr+"\"}", 1))
	_, _, err = Run(context.Background(), Options{Spec: s, Out: filepath.Join(t.TempDir(), "r")})
	if !errors.Is(err, spec.ErrUnreachable) || !strings.Contains(err.Error(), "target.bootstrap: cannot connect to "+addr) {
		t.Errorf("Run = %v, want target.bootstrap unreachable", err)
	}
}

// A bootstrap target: the runner starts no broker, and measures what the
// client sees (no broker CPU or fsyncs).
func TestRunBootstrap(t *testing.T) {
	b, err := startBroker(context.Background(), weirBin, t.TempDir(), nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.stop(); err != nil {
			t.Error(err)
		}
	}()
	s := parse(t, strings.Replace(tinySpec, "seed: 3", "seed: 3\ntarget: {bootstrap: \""+b.Addr+"\"}", 1))
	s.Factors.Codec = []string{"lz4"}
	run, _, err := Run(context.Background(), Options{Spec: s, Out: filepath.Join(t.TempDir(), "r")})
	if err != nil {
		t.Fatal(err)
	}
	if run.Env.Target != b.Addr || len(run.Sections[0].Points) != 1 {
		t.Fatalf("target %q, %d points", run.Env.Target, len(run.Sections[0].Points))
	}
	rp := run.Sections[0].Points[0].Reps[0]
	if rp.Error != "" {
		t.Fatal(rp.Error)
	}
	checkRepClientOnly(t, rp)
}

func checkRepClientOnly(t *testing.T, rp result.Rep) {
	t.Helper()
	m := rp.Metrics
	if m[result.MsgsProduced] <= 0 || m[result.MsgsConsumed] != m[result.MsgsProduced] {
		t.Errorf("produced %v, consumed %v", m[result.MsgsProduced], m[result.MsgsConsumed])
	}
	for _, k := range []string{result.BrokerCPUSeconds, result.Fsyncs, result.DiskWriteBytes} {
		if _, ok := m[k]; ok {
			t.Errorf("bootstrap target reports %s", k)
		}
	}
	if m[result.CompressionRatio] < 2 {
		t.Errorf("lz4 on JSON: ratio %v", m[result.CompressionRatio])
	}
}

func TestBrokerStartFails(t *testing.T) {
	_, err := startBroker(context.Background(), weirBin, t.TempDir(), []string{"--no-such-flag"}, nil, 0)
	if !errors.Is(err, ErrBroker) || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("startBroker(bad flag) = %v, want ErrBroker quoting the broker's complaint", err)
	}
}

func TestParseProc(t *testing.T) {
	stat := "1234 (weir broker) S 1 1234 1234 0 -1 4194560 2000 0 0 0 250 130 0 0 20 0 12 0 100 0 0\n"
	if cpu, err := parseStatCPU(stat); err != nil || cpu != 3.8 {
		t.Errorf("parseStatCPU = %v, %v; want 3.8 s (380 ticks)", cpu, err)
	}
	for _, bad := range []string{"", "1 (x) S 1", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 12"} {
		if _, err := parseStatCPU(bad); !errors.Is(err, ErrBroker) {
			t.Errorf("parseStatCPU(%q) = %v", bad, err)
		}
	}
	io := "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n"
	if n := parseIOWriteBytes(io); n != 81920 {
		t.Errorf("parseIOWriteBytes = %d", n)
	}
	if n := parseIOWriteBytes("rchar: 1\n"); n != -1 {
		t.Errorf("parseIOWriteBytes without the field = %d, want -1", n)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP weir_partition_size_bytes Bytes of the partition's segments.
# TYPE weir_partition_size_bytes gauge
weir_partition_size_bytes{partition="0",topic="a"} 1024
weir_partition_size_bytes{partition="1",topic="a \"quoted\""} 2e3
weir_partition_fsyncs_total{partition="0",topic="a"} 7
weir_requests_total{api="Produce"} 99
`
	ms, err := parseMetrics(strings.NewReader(text), "weir_partition_")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].value != 1024 || ms[0].labels["topic"] != "a" || ms[1].labels["topic"] != `a "quoted"` || ms[1].value != 2000 || ms[2].name != "weir_partition_fsyncs_total" {
		t.Errorf("parsed %+v", ms)
	}
	for _, bad := range []string{"weir_partition_x{topic=\"a\" 1\n", "weir_partition_x{topic=a} 1\n", "weir_partition_x abc\n"} {
		if _, err := parseMetrics(strings.NewReader(bad), "weir_partition_"); !errors.Is(err, ErrBroker) {
			t.Errorf("parseMetrics(%q) = %v", bad, err)
		}
	}
}

// A probes-only spec with the probes' defaults where it says nothing (the
// block sizes here), kept small.
func TestRunProbesOnly(t *testing.T) {
	s := parse(t, `
name: probes-tiny
no_load: true
probes:
  disk: {file_size: 4MiB, ops: [write], patterns: [seq], io: [buffered], point_duration: 50ms}
  memory: {bytes: 64KiB, no_disk: true, point_duration: 50ms}
`)
	var stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{Spec: s, Out: filepath.Join(t.TempDir(), "r"), DataDir: t.TempDir(), Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	if len(run.Sections) != 2 || run.Sections[0].Name != "disk" || run.Sections[1].Name != "memory" {
		t.Fatalf("sections %+v, want disk and memory", run.Sections)
	}
	if n := len(run.Sections[0].Points); n != 3 {
		t.Errorf("disk probe: %d points, want one per default block size (3)", n)
	}
	for _, sec := range run.Sections {
		for _, p := range sec.Points {
			for _, rp := range p.Reps {
				if rp.Error != "" {
					t.Errorf("%s %s: %s", sec.Name, p.ID, rp.Error)
				}
			}
		}
	}
	if len(run.References) == 0 {
		t.Error("no published figures beside the probes")
	}
}
