package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/compare"
)

// TestCompareGolden runs `weir compare` on the runs in testdata/ (A a
// results directory, B a run.json file) and compares its output with
// testdata/compare-*.golden, like TestGolden; -update rewrites them.
func TestCompareGolden(t *testing.T) {
	a, b := filepath.Join("testdata", "compare-a"), filepath.Join("testdata", "compare-b.json")
	tests := []struct {
		name string
		args []string
	}{
		{"compare-help", []string{"compare", "--help"}},
		{"compare-text", []string{"compare", a, b}},
		{"compare-md", []string{"compare", "--format", "md", a, b}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc.name, tc.args) })
	}
}

// TestCompareOutput checks what the golden files must show, so an -update
// cannot bless a wrong comparison: the significant changes with their
// direction, "~" for the unchanged metrics, the rep warning, the one-sided
// points and sections, and the environment differences.
func TestCompareOutput(t *testing.T) {
	var stdout bytes.Buffer
	if err := run([]string{"compare", filepath.Join("testdata", "compare-a"), filepath.Join("testdata", "compare-b.json")},
		&stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	row := func(metric string, cells ...string) {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, " "+metric+" ") {
				continue
			}
			ok := true
			for _, c := range cells {
				ok = ok && strings.Contains(l, c)
			}
			if ok {
				return
			}
		}
		t.Errorf("no %s row with %q in:\n%s", metric, cells, out)
	}
	row("produce-MB/s", "100.9", "120.8", "+19.7%", "p=0.008 n=5+5", "better") // none: every B rep above every A rep
	row("ack-p99-us", "2935", "2920", " ~ ", "p=0.690 n=5+5")                  // none: same distribution
	row("ack-p99-us", "3870", "3310", "-14.5%", "better")                      // zstd: latency down
	row("produce-MB/s", "90.10", "99.00", " ~ ", "n=3+3", "need >= 4 reps")    // lz4: too few reps
	row("fsyncs", "only in B")
	for _, want := range []string{
		"weir commit │ 5d46309", "7e8f9a0",
		"Only in A\n  disk (whole section)\n  load codec=gzip/flush=never\n",
		"Only in B\n  load codec=snappy/flush=never\n  replication (whole section)\n",
		`"~": no significant difference (p > 0.05)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	var help bytes.Buffer
	if err := run([]string{"compare", "--help"}, &help, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"~" in the delta column means no significant difference`, "Mann-Whitney U", "median"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestCompareErrors(t *testing.T) {
	b := filepath.Join("testdata", "compare-b.json")
	tests := []struct {
		args []string
		is   error
		want string
	}{
		{[]string{"compare", b}, nil, "accepts 2 arg(s), received 1"},
		{[]string{"compare", "--format", "html", b, b}, compare.ErrFormat, `unknown format "html"`},
		{[]string{"compare", filepath.Join("testdata", "no-such-run"), b}, compare.ErrInput, "no-such-run"},
		{[]string{"compare", "testdata", b}, compare.ErrInput, "not a results directory"},
		{[]string{"compare", b, filepath.Join("testdata", "help.golden")}, compare.ErrInput, "unsupported results file"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("run(%q) = %v, want an error containing %q (is %v)", tc.args, err, tc.want, tc.is)
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) printed %q before failing", tc.args, stdout.String())
			}
		})
	}
}

// TestCompareSameRun compares a run with itself: every compared metric is
// "~" and the exit status is 0.
func TestCompareSameRun(t *testing.T) {
	a := filepath.Join("testdata", "compare-a")
	var stdout bytes.Buffer
	if err := run([]string{"compare", a, a}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("comparing a run with itself: %v", err)
	}
	out := stdout.String()
	if strings.Contains(out, "%") && (strings.Contains(out, "better") || strings.Contains(out, "worse")) {
		t.Errorf("a run compared with itself shows a significant change:\n%s", out)
	}
	if strings.Contains(out, "Only in") || strings.Contains(out, "Environment differences") {
		t.Errorf("a run compared with itself lists differences:\n%s", out)
	}
}

// TestCompareExitStatus runs the real main in a child process (see
// TestMain): a comparison that finds significant changes still exits 0; an
// unreadable run exits 1 with the error on stderr.
func TestCompareExitStatus(t *testing.T) {
	runMain := func(args ...string) (string, string, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_MAIN=1")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	stdout, stderr, err := runMain("compare", filepath.Join("testdata", "compare-a"), filepath.Join("testdata", "compare-b.json"))
	if err != nil || !strings.Contains(stdout, "+19.7%") || stderr != "" {
		t.Errorf("weir compare A B: err %v, stderr %q; want exit 0 with the table", err, stderr)
	}
	_, stderr, err = runMain("compare", "no-such-dir", filepath.Join("testdata", "compare-b.json"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.HasPrefix(stderr, "weir: compare: cannot read run") {
		t.Errorf("weir compare no-such-dir B: err %v, stderr %q; want exit 1 and the error", err, stderr)
	}
}
