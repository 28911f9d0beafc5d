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
// testdata/NAME.golden. Run `go test ./scripts/appendratio -update` to rewrite
// the files after a deliberate change, and review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		// Three runs each; the odd run of 1KiB/never (weir 100 MB/s) must
		// not move the median. Lines without the keys, with another impl,
		// or of other benchmarks are ignored.
		{"append", []string{"testdata/append.txt"}, ""},
		{"append-check", []string{"-check", "testdata/append.txt"}, "1 of 3 rows miss the goal weir/raw >= 0.8: 1KiB every-batch: 0.536"},
		{"append-goal", []string{"-check", "-goal", "0.5", "testdata/append.txt"}, ""},
		// Two runs each: the median is the mean of both.
		{"pass", []string{"-check", "testdata/pass.txt"}, ""},
		// A row without weir results fails the check; a name without the
		// -GOMAXPROCS suffix still parses.
		{"missing", []string{"-check", "testdata/missing.txt"}, "1 of 2 rows miss the goal weir/raw >= 0.8: 1MiB every-batch: no weir results"},
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
	if err := os.WriteFile(empty, []byte("PASS\nok  \tgithub.com/weir-broker/weir/core/partlog\t0.1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{empty}, "no benchmark results"},
		{[]string{"testdata/does-not-exist.txt"}, "no such file"},
		{[]string{"-goal", "0", "testdata/pass.txt"}, "not positive"},
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
	if !strings.Contains(stderr.String(), "usage: appendratio") || stdout.Len() != 0 {
		t.Errorf("run(-h): usage on stderr expected, got stdout %q stderr %q", stdout.String(), stderr.String())
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
