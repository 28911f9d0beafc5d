package spec

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMatrixGolden expands each testdata/*.yaml spec and compares the dry
// run's listing with testdata/NAME.golden. Run `go test ./harness/spec
// -update` after a deliberate change and review the diff.
func TestMatrixGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata specs: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(nil); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var out bytes.Buffer
			if err := s.WriteMatrix(&out); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if out.String() != string(want) {
				t.Errorf("matrix of %s differs from %s (run with -update to accept)\n--- got ---\n%s--- want ---\n%s", file, golden, out.String(), want)
			}
		})
	}
}

func TestMatrixOrder(t *testing.T) {
	s := mustParse(t, `
name: order
workload: {partitions: 4}
factors:
  producers: [1, 2]
  codec: [zstd, none]
  acks: ["1", all]
`)
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].Name != "load" {
		t.Fatalf("sections = %+v, want one named load", secs)
	}
	// Matrix order is codec, acks, producers whatever the file's order;
	// levels keep the file's order; the last factor varies fastest.
	want := []string{
		"codec=zstd/acks=1/producers=1", "codec=zstd/acks=1/producers=2",
		"codec=zstd/acks=all/producers=1", "codec=zstd/acks=all/producers=2",
		"codec=none/acks=1/producers=1", "codec=none/acks=1/producers=2",
		"codec=none/acks=all/producers=1", "codec=none/acks=all/producers=2",
	}
	if got := strings.Join(secs[0].Factors, ","); got != "codec,acks,producers" {
		t.Errorf("factors = %s", got)
	}
	if len(secs[0].Points) != len(want) {
		t.Fatalf("%d points, want %d", len(secs[0].Points), len(want))
	}
	for i, p := range secs[0].Points {
		if p.ID != want[i] {
			t.Errorf("point %d = %s, want %s", i, p.ID, want[i])
		}
		codec, _ := factor(p, "codec")
		if p.Workload.Codec != codec || p.Workload.Partitions != 4 {
			t.Errorf("point %s: workload codec %q partitions %d", p.ID, p.Workload.Codec, p.Workload.Partitions)
		}
	}
}

func factor(p Point, name string) (string, bool) {
	for _, f := range p.Factors {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

func TestExperimentOverridesDoNotLeak(t *testing.T) {
	s, err := Load("testdata/experiments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := s.Sections()
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 3 {
		t.Fatalf("%d sections, want 3", len(secs))
	}
	prod, cons := secs[0].Points[0].Workload, secs[1].Points[0].Workload
	if prod.Consumers != 0 || prod.Consume != "live" || prod.TopicConfig["retention.ms"] != "" {
		t.Errorf("first experiment got the second's overrides: %s", prod.Summary())
	}
	if cons.Consume != "backlog" || cons.TopicConfig["retention.ms"] != "-1" || cons.TopicConfig["segment.bytes"] != "268435456" {
		t.Errorf("second experiment: %s", cons.Summary())
	}
	if s.Workload.TopicConfig["retention.ms"] != "" {
		t.Errorf("the base workload was changed: %v", s.Workload.TopicConfig)
	}
}

func TestOMB(t *testing.T) {
	s, err := Load("testdata/omb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := s.Workload
	if w.Partitions != 16 || w.Producers != 2 || w.Consumers != 2 || w.Rate != 50000 ||
		w.Duration != 15*time.Minute || w.Warmup != time.Minute || w.Keys.Kind != "sequential" ||
		w.MessageSize.Size != 1024 || w.PayloadFile != "payload/payload-1Kb.data" {
		t.Errorf("OMB workload read as %s", w.Summary())
	}
	if s.Name != "1-topic-16-partitions-1Kb" {
		t.Errorf("name = %q", s.Name)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "useRandomizedPayloads") {
		t.Errorf("warnings = %q, want one naming useRandomizedPayloads", s.Warnings)
	}
	if got := s.PayloadPath(w); got != filepath.Join("testdata", "payload", "payload-1Kb.data") {
		t.Errorf("payload path = %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"unknown top field", "name: x\nworkloads: {}\n", []string{`line 2: unknown field "workloads" in the spec`}},
		{"unknown workload field", "name: x\nworkload:\n  partitons: 3\n", []string{`line 3: unknown field "partitons" in workload`}},
		{"unknown factor", "name: x\nfactors:\n  codecs: [none]\n", []string{`line 3: unknown field "codecs" in factors`}},
		{"unknown key field", "workload:\n  keys: {knd: zipf}\n", []string{`unknown field "knd" in workload.keys`}},
		{"bad size", "workload:\n  message_size: 1kb\n", []string{"line 2", `"1kb" is not a byte size`}},
		{"size map field", "workload:\n  message_size: {distribution: uniform, minimum: 3}\n", []string{`unknown field "minimum" in message_size`}},
		{"size map without distribution", "workload:\n  message_size: {min: 3}\n", []string{"needs distribution"}},
		{"bad duration", "workload:\n  duration: 10 s\n", []string{"line 2"}},
		{"OMB bad number", "partitionsPerTopic: many\n", []string{"partitionsPerTopic", `"many" is not a number`}},
		{"OMB bad distributor", "partitionsPerTopic: 3\nkeyDistributor: ZIPF\n", []string{"keyDistributor", "unknown distributor"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// fakePlugins knows codecs none and zstd and one partitioner, the way the
// plugin host answers.
type fakePlugins struct{}

func (fakePlugins) CheckSpec(kind, s string) error {
	known := map[string][]string{KindCodec: {"none", "zstd"}, KindPartitioner: {"murmur2"}, KindFlushPolicy: {"never", "every-batch"}}
	for _, k := range known[kind] {
		if s == k {
			return nil
		}
	}
	return errors.New(kind + ": unknown " + kind + ` "` + s + `" (known: ` + strings.Join(known[kind], ", ") + ")")
}

func TestValidateErrors(t *testing.T) {
	base := "name: v\n"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"negative rate", "workload: {rate: -1}", []string{"workload.rate: must be >= 0"}},
		{"unknown codec level", "factors: {codec: [none, zstd, zsdt]}", []string{`factors.codec[2]: codec: unknown codec "zsdt" (known: none, zstd)`}},
		{"unknown workload codec", "workload: {codec: brotli}", []string{`workload.codec: codec: unknown codec "brotli"`}},
		{"unknown partitioner", "factors: {partitioner: [default, murmur3]}", []string{`factors.partitioner[1]: partitioner: unknown partitioner "murmur3"`}},
		{"flush policy on bootstrap", "target: {bootstrap: 127.0.0.1:9092}\nfactors: {flush_policy: [never]}", []string{"factors.flush_policy[0]: only for targets the runner starts"}},
		{"durable acks on bootstrap", "target: {bootstrap: 127.0.0.1:9092}\nfactors: {durable_acks: [true, false]}", []string{"factors.durable_acks[0]: only for targets the runner starts"}},
		{"workload flush policy on bootstrap", "target: {bootstrap: 127.0.0.1:9092}\nworkload: {flush_policy: never, durable_acks: true}", []string{"workload.flush_policy: only for targets the runner starts", "workload.durable_acks: only for targets the runner starts"}},
		{"both targets", "target: {bootstrap: a:1, embedded: {}}", []string{"target: give one of embedded, bootstrap and cluster"}},
		{"bad bootstrap", "target: {bootstrap: nowhere}", []string{`target.bootstrap: "nowhere": want host:port`}},
		{"reserved broker flag", "target: {embedded: {broker_flags: [--listen=1.2.3.4:1, -v]}}", []string{"broker_flags[0]: --listen is set by the runner", `broker_flags[1]: "-v"`}},
		{"zero reps", "repetitions: 0", []string{"repetitions: must be in 1..1000, got 0"}},
		{"no name", "name: ''", []string{"name: required"}},
		{"bad name", "name: a/b", []string{`name: "a/b"`}},
		{"zero partitions", "workload: {partitions: 0}", []string{"workload.partitions: must be in 1..10000, got 0"}},
		{"zero duration", "workload: {duration: 0s}", []string{"workload.duration: must be > 0"}},
		{"small message", "workload: {message_size: 4}", []string{"workload.message_size: must be >= 8 bytes"}},
		{"message over batch", "workload: {message_size: 2MiB}", []string{"workload.message_size: up to 2097152 bytes does not fit in batch_max_bytes 1000012"}},
		{"size min over max", "workload: {message_size: {distribution: uniform, min: 100, max: 10}}", []string{"max 10 is below min 100"}},
		{"normal mean outside", "workload: {message_size: {distribution: normal, mean: 10KiB, stddev: 1, min: 10, max: 100}}", []string{"mean 10240 is outside"}},
		{"unknown distribution", "workload: {message_size: {distribution: pareto, min: 10, max: 100}}", []string{`unknown distribution "pareto"`}},
		{"unknown payload", "workload: {payload: xml}", []string{`workload.payload: unknown payload "xml"`}},
		{"missing payload file", "workload: {payload_file: nope.data}", []string{"workload.payload_file:", "nope.data"}},
		{"zipf exponent", "workload: {keys: {kind: zipf, zipf_s: 1}}", []string{"workload.keys.zipf_s: must be > 1"}},
		{"unknown key kind", "workload: {keys: {kind: hashed}}", []string{`workload.keys.kind: unknown kind "hashed"`}},
		{"too many consumers", "workload: {partitions: 2, consumers: 3}", []string{"workload.consumers: 3 consumers for 2 partitions"}},
		{"consumers factor over partitions", "workload: {partitions: 2}\nfactors: {consumers: [1, 4]}", []string{"load point consumers=4: workload.consumers: 4 consumers for 2 partitions"}},
		{"backlog without consumers", "workload: {consumers: 0, consume: backlog}", []string{"workload.consume: backlog needs consumers >= 1"}},
		{"bad acks", "factors: {acks: [\"1\", two]}", []string{`factors.acks[1]: unknown acks "two"`}},
		{"repeated level", "factors: {linger: [5ms, 5ms]}", []string{"factors.linger[1]: repeats level 0"}},
		{"negative linger", "factors: {linger: [-1ms]}", []string{"factors.linger[0]: must be in 0..1m"}},
		{"small batches", "factors: {batch_max_bytes: [100]}", []string{"factors.batch_max_bytes[0]: must be in 512..1GiB"}},
		{"experiments and factors", "factors: {codec: [none]}\nexperiments: [{name: a}]", []string{"factors: a spec with experiments gives factors or points per experiment"}},
		{"experiment names", "experiments: [{name: a}, {name: a}, {}]", []string{`experiments[1].name: "a" given twice`, "experiments[2].name: required"}},
		{"experiment factor", "experiments: [{name: a, factors: {codec: [zsdt]}}]", []string{`experiments[0].factors.codec[0]: codec: unknown codec "zsdt"`}},
		{"disk probe on bootstrap", "target: {bootstrap: a:1}\nprobes: {disk: {}}", []string{"probes.disk: only for targets the runner starts"}},
		{"device span without a device", "probes: {disk: {random_write_span: device}}", []string{`probes.disk.random_write_span: "device" needs an emulated disk`}},
		{"span under the file", "probes: {disk: {file_size: 64MiB, random_write_span: 1MiB}}", []string{"probes.disk.random_write_span: must be a multiple of 4KiB of at least file_size"}},
		{"reference without source", "references: [{metric: produce-MB/s, value: 1}]", []string{"references[0].source: required"}},
		{"device on bootstrap", "target: {bootstrap: a:1}\ndevice: {profile: hdd-7200}", []string{"device: an emulated disk holds the brokers the runner starts"}},
		{"device without profile", "device: {time: real}", []string{"device.profile: required"}},
		{"device profile and time", "device: {profile: hdd-5400, time: fast}", []string{`device.profile: model: bad device profile: unknown profile "hdd-5400"`, `device.time: "fast": real or simulated`}},
		{"several at once", "workload: {rate: -5, producers: 0}", []string{"workload.rate: must be >= 0", "workload.producers: must be in 1..256, got 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := base + tc.yaml + "\n"
			if strings.HasPrefix(tc.yaml, "name:") {
				text = tc.yaml + "\n"
			}
			s, err := Parse([]byte(text), "")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = s.Validate(fakePlugins{})
			if err == nil {
				t.Fatal("Validate succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestWriteSpan: random_write_span reads `device` or a byte size, writes them back, and refuses other words.
func TestWriteSpan(t *testing.T) {
	for _, tc := range []struct {
		text string
		want WriteSpan
	}{{"device", WriteSpan{Device: true}}, {"1GiB", WriteSpan{Bytes: 1 << 30}}} {
		s := mustParse(t, "name: s\ndevice: {profile: hdd-7200}\nprobes: {disk: {random_write_span: "+tc.text+"}}\n")
		if got := s.Probes.Disk.RandomWriteSpan; got != tc.want {
			t.Errorf("%s: parsed %+v, want %+v", tc.text, got, tc.want)
		}
		if err := s.Validate(fakePlugins{}); err != nil {
			t.Errorf("%s: %v", tc.text, err)
		}
		if out, err := yaml.Marshal(s.Probes.Disk.RandomWriteSpan); err != nil || strings.TrimSpace(string(out)) != tc.text {
			t.Errorf("%s: marshalled %q, %v", tc.text, out, err)
		}
	}
	if _, err := Parse([]byte("name: s\nprobes: {disk: {random_write_span: all}}\n"), ""); err == nil || !strings.Contains(err.Error(), `or "device"`) {
		t.Errorf("random_write_span: all: %v", err)
	}
}

func TestValidateBuiltins(t *testing.T) {
	ok := mustParse(t, "name: b\nworkload: {codec: zstd, partitioner: murmur2, flush_policy: \"messages:n=10\"}\nfactors: {codec: [\"gzip:level=9\", snappy, lz4]}\n")
	if err := ok.Validate(nil); err != nil {
		t.Errorf("built-in specs rejected: %v", err)
	}
	bad := mustParse(t, "name: b\nfactors: {codec: [\"zstd:level=99\"], flush_policy: [sometimes], partitioner: [./no/such/plugin]}\n")
	err := bad.Validate(nil)
	for _, w := range []string{"factors.codec[0]:", "level", "factors.flush_policy[0]:", `"sometimes"`, "factors.partitioner[0]:", "no such file"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate(builtins) = %v, want it to mention %q", err, w)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	// A port nobody listens on: bind one, note it, close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	s := mustParse(t, "name: t\ntarget: {bootstrap: \""+closed+"\"}\n")
	err = s.CheckTarget(context.Background(), 2*time.Second)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "target.bootstrap: cannot connect to "+closed) {
		t.Errorf("CheckTarget(%s) = %v, want target.bootstrap unreachable", closed, err)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s = mustParse(t, "name: t\ntarget: {bootstrap: \""+ln.Addr().String()+"\"}\n")
	if err := s.CheckTarget(context.Background(), 2*time.Second); err != nil {
		t.Errorf("CheckTarget(listening) = %v", err)
	}
	if err := mustParse(t, "name: t\n").CheckTarget(context.Background(), time.Second); err != nil {
		t.Errorf("CheckTarget(embedded) = %v", err)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		str  string
	}{
		{"100", 100, "100"}, {"100B", 100, "100"}, {"4KiB", 4096, "4KiB"}, {"1 MiB", 1 << 20, "1MiB"},
		{"10KB", 10000, "10KB"}, {"2GB", 2e9, "2GB"}, {"1000012", 1000012, "1000012"}, {"1000", 1000, "1KB"}, {"1GiB", 1 << 30, "1GiB"}, {"0", 0, "0"},
	}
	for _, tc := range tests {
		got, err := ParseByteSize(tc.in)
		if err != nil || got != tc.want || got.String() != tc.str {
			t.Errorf("ParseByteSize(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
		}
	}
	for _, bad := range []string{"", "KiB", "1.5MiB", "ten", "9999999999999GiB"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) succeeded", bad)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	s := Defaults()
	s.Name = "defaults"
	if err := s.Validate(nil); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func mustParse(t *testing.T, text string) *Spec {
	t.Helper()
	s, err := Parse([]byte(text), "")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}
