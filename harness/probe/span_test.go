package probe

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/device/diskfs"
	"github.com/weir-broker/weir/harness/device/model"
	"github.com/weir-broker/weir/harness/result"
)

// TestDiskRandomWriteSpan: on an emulated RAID-5 array (simulated time), 4 KiB O_DIRECT random writes over a span
// preallocated across most of the array are charged more device time each than the same writes inside the 64 MiB
// probe file (seeks across the stroke against short ones); the random read points still use the probe file, and the
// span file is gone afterwards.
func TestDiskRandomWriteSpan(t *testing.T) {
	if err := diskfs.CanMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skipf("skipped: %v", err)
	}
	p, err := model.ParseProfile("raid5-6xhdd-7200")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m, err := diskfs.New(filepath.Join(dir, "mnt"), diskfs.Options{Profile: p, Backing: filepath.Join(dir, "backing")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	}()
	perWrite := func(span int64) (write, read float64) {
		t.Helper()
		sec, err := Disk(t.Context(), DiskOptions{
			Dir: m.Dir(), FileSize: 64 << 20, BlockSizes: []int{4 << 10}, Ops: []string{OpWrite, OpRead},
			Patterns: []string{PatternRand}, IO: []string{IODirect}, PointDuration: 200 * time.Millisecond,
			Seed: 3, RandomWriteSpan: span, DeviceTime: func() time.Duration { return m.Status().Waited },
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms := func(id string) float64 {
			for _, pt := range sec.Points {
				if pt.ID == id {
					r := pt.Reps[0]
					if r.Error != "" {
						t.Fatalf("%s: %s", id, r.Error)
					}
					return r.Metrics[MetricDeviceMs] / (r.Metrics[result.OpsPerSec] * r.Duration.Seconds())
				}
			}
			t.Fatalf("no point %s in %v", id, pointIDs(sec))
			return 0
		}
		return ms("op=write/pattern=rand/io=direct/block=4K"), ms("op=read/pattern=rand/io=direct/block=4K")
	}
	shortW, shortR := perWrite(0)
	spanBytes := p.DataBytes() / 10 * 8 / 4096 * 4096
	longW, longR := perWrite(spanBytes)
	t.Logf("device ms per 4 KiB O_DIRECT random write: %.2f in the 64 MiB file, %.2f over %d GB; reads %.2f and %.2f",
		shortW, longW, spanBytes/1e9, shortR, longR)
	if longW < shortW*1.4 {
		t.Errorf("writes over the span cost %.2f ms each, in the file %.2f ms: want the span's seeks longer", longW, shortW)
	}
	if longR > shortR*1.2 || longR < shortR*0.8 {
		t.Errorf("random reads cost %.2f ms with the span set, %.2f without: want them in the probe file both times", longR, shortR)
	}
	left, err := filepath.Glob(filepath.Join(m.Dir(), "weir-probe-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("probe files left behind: %v %v", left, err)
	}
}

// TestDiskRandomWriteSpanPlain: on an ordinary directory the span is a preallocated file too; the random write
// points write over it and the rest of the matrix is unchanged.
func TestDiskRandomWriteSpanPlain(t *testing.T) {
	o := tinyDisk(t.TempDir())
	o.RandomWriteSpan = 8 << 20
	sec, err := Disk(t.Context(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range sec.Points {
		for _, r := range pt.Reps {
			if _, skipped := Skipped(r); r.Error != "" && !skipped {
				t.Errorf("%s: %s", pt.ID, r.Error)
			}
		}
	}
	if len(sec.Points) != len(wantDiskIDs([]string{"4K", "64K"}, false)) {
		t.Errorf("%d points, want the matrix's %d", len(sec.Points), len(wantDiskIDs([]string{"4K", "64K"}, false)))
	}
	for _, bad := range []int64{-4096, 1 << 19, 8<<20 + 1} {
		o.RandomWriteSpan = bad
		if _, err := Disk(t.Context(), o, nil); err == nil {
			t.Errorf("RandomWriteSpan %d accepted", bad)
		}
	}
}
