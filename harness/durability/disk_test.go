package durability

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/device/model"
)

// needFUSE skips a test that mounts emulated disks where this machine
// cannot (no /dev/fuse, not root), and fails it instead under CI=true.
func needFUSE(t *testing.T) {
	t.Helper()
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the emulated disk cannot be mounted: %v", err)
		}
		t.Skipf("emulated disks cannot be mounted here: %v", err)
	}
}

// diskLoad is killLoad on an emulated disk in simulated time, cut by
// DiskPower.
func diskLoad(t *testing.T, policy string, durable bool, acks string) Config {
	c := killLoad(policy, durable, acks)
	p, err := model.ParseProfile("hdd-7200")
	if err != nil {
		t.Fatal(err)
	}
	c.Fault, c.Device = DiskPower, &Device{Profile: p}
	c.DataDir = filepath.Join(t.TempDir(), "data")
	return c
}

// A real power cut of a real `weir broker` process: SIGKILL, the
// emulated disk under its data directory loses every write no fsync
// covered, the disk is mounted again, and a new process starts on what
// survived. What acknowledgements promised is then held against what
// the broker serves: nothing acknowledged may be lost with durable acks
// or an fsync per batch (acks=all); with no fsync at all and acks=1 the
// loss is measured and reported, and must be no worse than lost (nothing
// corrupt, duplicated or at another offset).
func TestDiskPowerCut(t *testing.T) {
	needFUSE(t)
	t.Parallel()
	var cfgs []Config
	for i, c := range []Config{
		diskLoad(t, "every-batch", true, "all"),
		diskLoad(t, "every-batch", false, "all"),
		diskLoad(t, "never", false, "1"),
	} {
		c.Seed = int64(500 + i)
		c.Workload.Duration = 200 * time.Millisecond
		cfgs = append(cfgs, c)
	}
	runs := runAll(t, cfgs, 3)
	for _, c := range runs {
		if c.err != nil {
			t.Fatalf("%s: %v", c.name, c.err)
		}
		b, err := ExpectedBound(DiskPower, c.cfg.Workload.DurableAcks, c.cfg.Workload.FlushPolicy)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.out.Verify(b, DefaultAgeSlack); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.out.Acked == 0 {
			t.Errorf("%s: nothing acknowledged before the cut", c.name)
		}
		if c.out.DiskCut == nil {
			t.Fatalf("%s: no report of what the cut took back", c.name)
		}
		t.Logf("%s: %d acknowledged, %d lost (bound %v), %d unacknowledged survived; disk: %d fsyncs before the cut (longest %v), the cut took back %d files, %d entries, %d dirty pages; recovery %v",
			c.name, c.out.Acked, c.out.AckedLost, b, c.out.UnackedSurvived, c.out.Fsyncs, c.out.MaxSync,
			c.out.DiskCut.Files, c.out.DiskCut.Removed+c.out.DiskCut.Restored, c.out.DiskCut.DirtyPages, c.out.Recovery)
	}
	// The cut must have taken something back, or it cut nothing: the
	// never run fsyncs nothing, so all its appends were unsynced.
	if never := runs[2].out; never.DiskCut.Files+never.DiskCut.Removed == 0 {
		t.Errorf("the cut of the never run took nothing back: %+v", *never.DiskCut)
	}
}
