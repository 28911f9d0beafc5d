package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMain lets a test run the real main in a child process (see
// TestMainExitStatus).
func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestGolden runs the CLI and compares its stdout with testdata/NAME.golden.
// Run `go test ./cmd/weir -update` to rewrite the files after a deliberate
// change, and review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"help", []string{"--help"}},
		{"help-command", []string{"help"}},
		{"flush-policies", []string{"flush-policies"}},
		{"flush-policies-help", []string{"flush-policies", "--help"}},
		{"broker-help", []string{"broker", "--help"}},
		{"plugins", []string{"plugins"}},
		{"plugins-help", []string{"plugins", "--help"}},
		{"cluster-help", []string{"cluster", "--help"}},
		{"cluster-up-help", []string{"cluster", "up", "--help"}},
		{"cluster-down-help", []string{"cluster", "down", "--help"}},
		{"cluster-status-help", []string{"cluster", "status", "--help"}},
		{"mirror-help", []string{"mirror", "--help"}},
		{"mirror-status-help", []string{"mirror", "status", "--help"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc.name, tc.args) })
	}
}

// checkGolden runs the CLI with args and compares its stdout with
// testdata/NAME.golden (rewritten instead under -update); the command must
// succeed and write nothing to stderr.
func checkGolden(t *testing.T, name string, args []string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q): %v", args, err)
	}
	if stderr.Len() != 0 {
		t.Errorf("run(%q) wrote to stderr:\n%s", args, stderr.String())
	}
	golden := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
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
		t.Errorf("run(%q) output differs from %s (run with -update to accept)\n--- got ---\n%s--- want ---\n%s", args, golden, got, want)
	}
}

func TestFlushPoliciesListsEveryRegisteredPolicy(t *testing.T) {
	var stdout bytes.Buffer
	if err := run([]string{"flush-policies"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	want := []string{"adaptive", "bytes", "every-batch", "interval", "messages", "never"}
	if len(lines) != 1+len(want) {
		t.Fatalf("got %d lines, want a header and %d policies:\n%s", len(lines), len(want), stdout.String())
	}
	for i, name := range want {
		if f := strings.Fields(lines[i+1]); len(f) < 3 || f[0] != name {
			t.Errorf("line %d = %q, want policy %q with spec and description", i+1, lines[i+1], name)
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run([]string{"version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "weir ") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("version printed %q, want one line starting with \"weir \"", out)
	}
}

func TestVersionLine(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "weir devel"},
		{"source tree, no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			"weir devel go1.26.8"},
		{"empty version", &debug.BuildInfo{Main: debug.Module{}}, true, "weir devel"},
		{"clean commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs", "git", "vcs.revision", "0123456789abcdef", "vcs.modified", "false")}, true,
			"weir devel commit 0123456789abcdef go1.26.8"},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "0123456789abcdef", "vcs.modified", "true")}, true,
			"weir devel commit 0123456789abcdef (modified) go1.26.8"},
		{"released module", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}}, true,
			"weir v0.3.1 go1.26.8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionLine(tc.bi, tc.ok); got != tc.want {
				t.Errorf("versionLine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"no-such-command"}, `unknown command "no-such-command" for "weir"`},
		{[]string{"version", "extra"}, `unknown command "extra" for "weir version"`},
		{[]string{"flush-policies", "extra"}, `unknown command "extra" for "weir flush-policies"`},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("run(%q) printed stdout %q, stderr %q; want main to print the error once", tc.args, stdout.String(), stderr.String())
			}
		})
	}
}

// TestMainExitStatus runs main in a child process: an error exits 1 with
// "weir: ERROR" on stderr; success exits 0.
func TestMainExitStatus(t *testing.T) {
	runMain := func(args ...string) (stdout, stderr string, err error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_MAIN=1")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}

	_, stderr, err := runMain("no-such-command")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("weir no-such-command: err = %v, want exit status 1", err)
	}
	if want := "weir: unknown command \"no-such-command\" for \"weir\"\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}

	stdout, stderr, err := runMain("flush-policies")
	if err != nil || !strings.Contains(stdout, "every-batch") || stderr != "" {
		t.Errorf("weir flush-policies: err %v, stdout %q, stderr %q; want success", err, stdout, stderr)
	}
}
