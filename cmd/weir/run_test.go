package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/presets"
	"github.com/weir-broker/weir/harness/spec"
)

// TestRunGolden compares `weir run`'s help, preset list and a dry run of
// each preset with testdata/run-*.golden, like TestGolden; -update rewrites
// them.
func TestRunCmdGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"run-help", []string{"run", "--help"}},
		{"run-list-presets", []string{"run", "--list-presets"}},
	}
	for _, p := range presets.Names() {
		tests = append(tests, struct {
			name string
			args []string
		}{"run-dry-run-" + p, []string{"run", "--preset", p, "--dry-run"}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, tc.name, tc.args) })
	}
}

// TestRunOverrides checks that --reps and --seed reach the spec, through the
// dry run's first line.
func TestRunCmdOverrides(t *testing.T) {
	var stdout bytes.Buffer
	if err := run([]string{"run", "--preset", "quick", "--dry-run", "--reps", "7", "--seed", "42", "--data-dir", "/mnt/x"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if want := "spec quick: seed 42, 7 repetitions, target embedded broker, data under /mnt/x"; first != want {
		t.Errorf("first line %q, want %q", first, want)
	}
}

func TestRunCmdErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	typo := write("typo.yaml", "name: typo\nworkload:\n  partitons: 3\n")
	badCodec := write("codec.yaml", "name: codec\nfactors:\n  codec: [none, zsdt]\n")
	tests := []struct {
		name string
		args []string
		want string
		is   error
	}{
		{"nothing to run", []string{"run"}, "give a spec file or --preset NAME", nil},
		{"both", []string{"run", typo, "--preset", "quick"}, "not both", nil},
		{"unknown preset", []string{"run", "--preset", "slow"}, `unknown preset "slow" (known: chaos, durability, durability-disk, flush, hdd, kreps2014, plan-profile, probes, quick, replication, scale, scale-quick, security, security-cluster)`, presets.ErrUnknown},
		{"missing file", []string{"run", filepath.Join(dir, "none.yaml")}, "none.yaml", spec.ErrInvalid},
		{"unknown field", []string{"run", typo, "--dry-run"}, `line 3: unknown field "partitons" in workload`, spec.ErrInvalid},
		{"unknown codec", []string{"run", badCodec, "--dry-run"}, `unknown codec "zsdt" (known: gzip, lz4, none, snappy, zstd)`, spec.ErrInvalid},
		{"unknown codec without dry run", []string{"run", badCodec, "--out", filepath.Join(dir, "out")}, `factors.codec[1]:`, spec.ErrInvalid},
		{"zero reps", []string{"run", "--preset", "quick", "--reps", "0", "--dry-run"}, "repetitions: must be in 1..1000, got 0", spec.ErrInvalid},
		{"extra argument", []string{"run", typo, badCodec}, "accepts at most 1 arg", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (strings.Contains(tc.name, "codec") && !strings.Contains(err.Error(), "factors.codec[1]: ")) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			if stdout.Len() != 0 {
				t.Errorf("a failed run printed:\n%s", stdout.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a bad spec created its results directory (%v)", err)
	}
}
