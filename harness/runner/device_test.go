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
	"github.com/weir-broker/weir/harness/durability"
	"github.com/weir-broker/weir/harness/probe"
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
	// The probe's figures over the device time the disk charged, beside the wall clock's.
	if ops := run.Sections[0].Points[0].Reps[0].Metrics[probe.MetricDeviceOpsPerSec]; ops < 50 || ops > 1000 {
		t.Errorf("random 4 KiB reads at %.0f/s of device time: want a spinning disk's", ops)
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

const diskPowerSpec = `
name: diskpower
seed: 3
repetitions: 1
device: {profile: hdd-7200, time: simulated}
workload:
  partitions: 2
  message_size: 100
  rate: 5000
  warmup: 50ms
  duration: 100ms
  linger: 1ms
factors:
  flush_policy: [never]
durability:
  faults: [disk-power]
`

// TestRunDiskPower: a durability spec with the disk-power fault cuts the power of a real broker process on an
// emulated disk of its own (backed beside the run's disk, not on it), checks what survived, and leaves nothing
// mounted or on the data root.
func TestRunDiskPower(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	data := t.TempDir()
	var stderr bytes.Buffer
	run, _, err := Run(context.Background(), Options{Spec: parse(t, diskPowerSpec), Out: filepath.Join(t.TempDir(), "r"), DataDir: data,
		Weir: weirBin, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	if len(run.Sections) == 0 || len(run.Sections[0].Points) != 1 {
		t.Fatalf("sections: %+v", run.Sections)
	}
	rp := run.Sections[0].Points[0].Reps[0]
	if rp.Error != "" {
		t.Fatalf("the repetition failed: %s", rp.Error)
	}
	m := rp.Metrics
	if m[durability.MetricAcked] == 0 || m[durability.MetricCutFiles]+m[durability.MetricCutEntries] == 0 {
		t.Errorf("acknowledged %v, the cut took back %v files and %v entries: want a cut under load",
			m[durability.MetricAcked], m[durability.MetricCutFiles], m[durability.MetricCutEntries])
	}
	entries, _ := os.ReadDir(data)
	if len(entries) != 0 {
		t.Errorf("the data root keeps %d entries after the run", len(entries))
	}
	if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), data) {
		t.Errorf("still mounted under %s after the run", data)
	}
}

// TestRunRandomWriteSpanOnDevice: random_write_span: device spreads the O_DIRECT random writes over the emulated
// array (98% of it), so each costs a read-modify-write with seeks across the stroke in device time, where inside the 4 MiB probe file
// it would cost a short seek's. The spec sets the device's dirty thresholds too, as the hdd preset does.
func TestRunRandomWriteSpanOnDevice(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	perWrite := func(span string) float64 {
		t.Helper()
		spec := `
name: span
repetitions: 1
no_load: true
device: {profile: raid5-6xhdd-7200, time: simulated, dirty_background_bytes: 1GiB, dirty_bytes: 2GiB}
probes:
  disk: {file_size: 4MiB, ops: [write], patterns: [rand], io: [direct], block_sizes: [4KiB], point_duration: 200ms` + span + `}
`
		var stderr bytes.Buffer
		run, _, err := Run(context.Background(), Options{Spec: parse(t, spec), Out: filepath.Join(t.TempDir(), "r"), DataDir: t.TempDir(), Stderr: &stderr})
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, stderr.String())
		}
		r := run.Sections[0].Points[0].Reps[0]
		if r.Error != "" {
			t.Fatalf("%s", r.Error)
		}
		return 1000 / r.Metrics[probe.MetricDeviceOpsPerSec]
	}
	inFile, overArray := perWrite(""), perWrite(", random_write_span: device")
	t.Logf("device ms per 4 KiB O_DIRECT random write: %.1f in the 4 MiB file, %.1f over the array", inFile, overArray)
	if overArray < 14 || overArray < inFile*1.4 {
		t.Errorf("random writes over the array cost %.1f ms each, in the file %.1f ms: want a read-modify-write with seeks across the stroke (> 14 ms)", overArray, inFile)
	}
}
