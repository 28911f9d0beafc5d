package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden runs the program on testdata/*.txt and compares its stdout with
// testdata/NAME.golden. Run `go test ./scripts/benchratio -update` to rewrite
// the files after a deliberate change, and review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		// Three interleaved runs of transport/bench: weir against kfake.
		// Lines without the metric (latency lines for MB/s), headers and
		// PASS/ok lines are ignored.
		{"kafka-mbs", []string{"-key", "impl", "-base", "kfake", "testdata/kafka.txt"}, ""},
		{"kafka-mbs-goal", []string{"-key", "impl", "-base", "kfake", "-goal", "1", "-check", "testdata/kafka.txt"},
			"1 of 3 rows fail: Produce/size=100B/partitions=1/acks=all: 0.990"},
		{"kafka-records", []string{"-key", "impl", "-base", "kfake", "-metric", "records/s", "-match", "^Consume/", "testdata/kafka.txt"}, ""},
		// Less is better: weir's p99 1795 against kfake's 1400.
		{"kafka-p99", []string{"-key", "impl", "-base", "kfake", "-metric", "p99-us", "-lower", "-goal", "1", "testdata/kafka.txt"}, ""},
		// The key need not be impl, nor the base a name; two runs each,
		// so medians are means of two.
		{"durable", []string{"-key", "durable", "-base", "false", "-goal", "0.5", "-check", "testdata/durable.txt"}, ""},
		{"fetch-cpu", []string{"-key", "path", "-base", "copy", "-metric", "cpu-s/GB", "-lower", "testdata/durable.txt"}, ""},
		// Two values against the base get a key column; a value not
		// measured for a row is left out; a row without the base fails;
		// a name without the -GOMAXPROCS suffix parses; a line without
		// the key is ignored.
		{"multi", []string{"-key", "impl", "-base", "raw", "-goal", "0.8", "-check", "testdata/multi.txt"},
			"2 of 4 rows fail: Read/size=1MiB weir: 0.700; Read/size=16KiB weir: no impl=raw results"},
		// the storage append table (weir against a raw write loop).
		{"append", []string{"-key", "impl", "-base", "raw", "-goal", "0.8", "testdata/append.txt"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("run(%q): %v", tc.args, err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("run(%q) = %v, want error %q", tc.args, err, tc.wantErr)
			}
			if stderr.Len() != 0 {
				t.Errorf("run(%q) wrote to stderr:\n%s", tc.args, stderr.String())
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got := stdout.String(); got != string(want) {
				t.Errorf("run(%q) output differs from %s (run with -update to accept)\n--- got ---\n%s--- want ---\n%s", tc.args, golden, got, want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\nok  \tgithub.com/weir-broker/weir/transport/bench\t0.1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-key", "impl", "-base", "kfake", empty}, "no benchmark results with impl= and MB/s"},
		{[]string{"-key", "impl", "-base", "kfake", "-metric", "furlongs/s", "testdata/kafka.txt"}, "no benchmark results"},
		{[]string{"-key", "impl", "-base", "kfake", "-match", "^Nothing", "testdata/kafka.txt"}, "no benchmark results"},
		{[]string{"-key", "impl", "-base", "kfake", "testdata/does-not-exist.txt"}, "no such file"},
		{[]string{"-base", "kfake", "testdata/kafka.txt"}, "-key is required"},
		{[]string{"-key", "impl", "testdata/kafka.txt"}, "-base is required"},
		{[]string{"-key", "impl", "-base", "kfake", "-metric", "", "testdata/kafka.txt"}, "-metric is empty"},
		{[]string{"-key", "impl", "-base", "kfake", "-goal", "-1", "testdata/kafka.txt"}, "negative"},
		{[]string{"-key", "impl", "-base", "kfake", "-match", "(", "testdata/kafka.txt"}, "-match"},
		{[]string{"-nosuchflag"}, "not defined"},
	}
	for _, tc := range tests {
		var stdout bytes.Buffer
		err := run(tc.args, &stdout, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) printed a table on error:\n%s", tc.args, stdout.String())
		}
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-h"}, &stdout, &stderr); err != nil {
		t.Fatalf("run(-h): %v", err)
	}
	if !strings.Contains(stderr.String(), "usage: benchratio") || stdout.Len() != 0 {
		t.Errorf("run(-h): usage on stderr expected, got stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line, key, metric string
		name, value       string
		v                 float64
		ok                bool
	}{
		{"BenchmarkX/a=1/impl=weir/b=2-8  10  5 ns/op  3.5 MB/s", "impl", "MB/s", "X/a=1/b=2", "weir", 3.5, true},
		{"BenchmarkX/impl=weir  10  5 ns/op", "impl", "ns/op", "X", "weir", 5, true},
		{"BenchmarkX/a=1-2  10  5 ns/op", "impl", "ns/op", "", "", 0, false},        // no key
		{"BenchmarkX/impl=weir-2  10  5 ns/op", "impl", "MB/s", "", "", 0, false},   // no metric
		{"BenchmarkX/impl=weir-2  ten  5 ns/op", "impl", "ns/op", "", "", 0, false}, // not a count
		{"BenchmarkX/impl=weir-2  10  x ns/op", "impl", "ns/op", "", "", 0, false},  // not a number
		{"--- FAIL: BenchmarkX/impl=weir", "impl", "ns/op", "", "", 0, false},
		{"BenchmarkX/impl=-2  10  5 ns/op", "impl", "ns/op", "", "", 0, false}, // empty value
	}
	for _, tc := range tests {
		name, value, v, ok := parseLine(tc.line, tc.key, tc.metric)
		if name != tc.name || value != tc.value || v != tc.v || ok != tc.ok {
			t.Errorf("parseLine(%q, %q, %q) = %q, %q, %g, %v; want %q, %q, %g, %v",
				tc.line, tc.key, tc.metric, name, value, v, ok, tc.name, tc.value, tc.v, tc.ok)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 100, 5}, 5},
	}
	for _, tc := range tests {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %g, want %g", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median reordered its input: %v", tc.in)
			}
		}
	}
}
