package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/device/diskfs"
)

const deviceSpec = `
name: device
repetitions: 1
no_load: true
device: {profile: raid5-6xhdd-7200}
probes:
  disk: {file_size: 4MiB, ops: [read], patterns: [rand], io: [direct], block_sizes: [4KiB], point_duration: 100ms}
`

// TestRunOnEmulatedDevice: a spec with device: runs its probes on the emulated disk, unmounts it after, records it
// in the environment, and the probe's random 4 KiB reads are judged a spinning disk's even though this machine's
// disk is flash.
func TestRunOnEmulatedDevice(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	data := t.TempDir()
	var stderr bytes.Buffer
	run, out, err := Run(context.Background(), Options{Spec: parse(t, deviceSpec), Out: filepath.Join(t.TempDir(), "r"), DataDir: data, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(run.Env.EmulatedDevice, "raid5-6xhdd-7200: raid5 of 6") || !strings.HasSuffix(run.Env.EmulatedDevice, "real time") {
		t.Errorf("environment's emulated device %q", run.Env.EmulatedDevice)
	}
	if run.Env.ProbeRandom4KUs < 2000 || !strings.Contains(run.Env.DiskVerdict, "a spinning disk's latency; emulated (weir disk raid5-6xhdd-7200)") {
		t.Errorf("random 4 KiB reads %.0f µs, verdict %q: want a spinning disk's, emulated", run.Env.ProbeRandom4KUs, run.Env.DiskVerdict)
	}
	entries, _ := os.ReadDir(data)
	if len(entries) != 0 {
		t.Errorf("the data root keeps %d entries after the run (the device's directory not removed?)", len(entries))
	}
	if b, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || !strings.Contains(string(b), "| emulated disk") {
		t.Errorf("report.md does not name the emulated disk (%v)", err)
	}
	if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), data) {
		t.Errorf("still mounted under %s after the run", data)
	}
}

// TestRunDeviceSkipped: where FUSE cannot be mounted the run is skipped, with the reason in its report, and no
// error.
func TestRunDeviceSkipped(t *testing.T) {
	canMount = func() error { return fmt.Errorf("%w: /dev/fuse is missing (test)", diskfs.ErrNoFUSE) }
	t.Cleanup(func() { canMount = diskfs.CanMount })
	var stderr bytes.Buffer
	run, out, err := Run(context.Background(), Options{Spec: parse(t, deviceSpec), Out: filepath.Join(t.TempDir(), "r"), DataDir: t.TempDir(), Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(run.Skipped, "/dev/fuse is missing") || len(run.Sections) != 0 {
		t.Errorf("skipped %q with %d sections", run.Skipped, len(run.Sections))
	}
	b, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(b), "**Skipped.** the spec runs on an emulated disk") {
		t.Errorf("report.md of a skipped run:\n%s (%v)", b, err)
	}
	if !strings.Contains(stderr.String(), "skipped: ") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
