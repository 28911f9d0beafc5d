package probe

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-broker/weir/harness/result"
)

// tinyDisk is a configuration small enough for a unit test: a 1 MiB file,
// two block sizes, 30 ms per point, 20 syncs.
func tinyDisk(dir string) DiskOptions {
	return DiskOptions{
		Dir:           dir,
		FileSize:      1 << 20,
		BlockSizes:    []int{4 << 10, 64 << 10},
		PointDuration: 30 * time.Millisecond,
		FsyncOps:      20,
		Reps:          2,
		Seed:          7,
	}
}

// wantDiskIDs lists the point IDs tinyDisk produces.
func wantDiskIDs(blocks []string, bufferedRandomReads bool) []string {
	var ids []string
	for _, op := range []string{OpWrite, OpRead} {
		for _, pat := range []string{PatternSeq, PatternRand} {
			for _, io := range []string{IOBuffered, IODirect} {
				if op == OpRead && pat == PatternRand && io == IOBuffered && !bufferedRandomReads {
					continue
				}
				for _, b := range blocks {
					ids = append(ids, "op="+op+"/pattern="+pat+"/io="+io+"/block="+b)
				}
			}
		}
	}
	return append(ids, "op=append+fdatasync/pattern=seq/io=buffered/block=4K",
		"op=append+fsync/pattern=seq/io=buffered/block=4K")
}

func pointIDs(sec result.Section) []string {
	var ids []string
	for _, p := range sec.Points {
		ids = append(ids, p.ID)
	}
	return ids
}

func isMemoryFS(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Type) == unix.TMPFS_MAGIC || uint32(st.Type) == unix.RAMFS_MAGIC
}

// checkRep asserts a measured disk Rep's metrics are present, positive and
// consistent with each other.
func checkRep(t *testing.T, id string, block int, r result.Rep) {
	t.Helper()
	m := r.Metrics
	for _, k := range []string{result.MBPerSec, result.OpsPerSec, result.LatP50, result.LatP99, result.LatP999, result.LatMax} {
		if !(m[k] > 0) || math.IsInf(m[k], 0) {
			t.Errorf("%s: %s = %v, want > 0", id, k, m[k])
		}
	}
	if r.Duration <= 0 || r.Started.IsZero() {
		t.Errorf("%s: Duration %v, Started %v", id, r.Duration, r.Started)
	}
	if want := m[result.OpsPerSec] * float64(block) / 1e6; math.Abs(m[result.MBPerSec]-want) > 1e-9*want {
		t.Errorf("%s: MB/s %v != ops/s %v × %d B", id, m[result.MBPerSec], m[result.OpsPerSec], block)
	}
	if !(m[result.LatP50] <= m[result.LatP99] && m[result.LatP99] <= m[result.LatP999] && m[result.LatP999] <= m[result.LatMax]) {
		t.Errorf("%s: latencies not ordered: p50 %v p99 %v p99.9 %v max %v", id,
			m[result.LatP50], m[result.LatP99], m[result.LatP999], m[result.LatMax])
	}
	// Every operation ran inside the window.
	if m[result.LatP50] > float64(r.Duration.Microseconds())+1 {
		t.Errorf("%s: p50 %v us longer than the window %v", id, m[result.LatP50], r.Duration)
	}
}

func TestDiskTiny(t *testing.T) {
	dir := t.TempDir()
	var calls []int
	sec, err := Disk(t.Context(), tinyDisk(dir), func(done, total int, label string) {
		if total != 2*16 || done < 0 || done > total || (done < total && label == "") {
			t.Errorf("progress(%d, %d, %q)", done, total, label)
		}
		calls = append(calls, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != SectionDisk || !slices.Equal(sec.Factors, []string{FactorOp, FactorPattern, FactorIO, FactorBlock}) {
		t.Errorf("section %q factors %v", sec.Name, sec.Factors)
	}
	if got, want := pointIDs(sec), wantDiskIDs([]string{"4K", "64K"}, false); !slices.Equal(got, want) {
		t.Fatalf("points\n got %v\nwant %v", got, want)
	}
	if len(calls) == 0 || calls[len(calls)-1] != 32 || !slices.IsSorted(calls) {
		t.Errorf("progress done values %v: want non-decreasing, ending at 32", calls)
	}
	memFS := isMemoryFS(t, dir)
	for _, p := range sec.Points {
		if len(p.Reps) != 2 {
			t.Errorf("%s: %d reps, want 2", p.ID, len(p.Reps))
			continue
		}
		if Describe(SectionDisk, p) == "" {
			t.Errorf("%s: Describe is empty", p.ID)
		}
		block, _ := p.Factor(FactorBlock)
		io, _ := p.Factor(FactorIO)
		op, _ := p.Factor(FactorOp)
		for _, r := range p.Reps {
			if io == IODirect && memFS {
				if _, ok := Skipped(r); !ok {
					t.Errorf("%s on a memory file system: rep not skipped: %+v", p.ID, r)
				}
				continue
			}
			if r.Error != "" {
				t.Errorf("%s: %s", p.ID, r.Error)
				continue
			}
			bs := map[string]int{"4K": 4 << 10, "64K": 64 << 10}[block]
			checkRep(t, p.ID, bs, r)
			// A point moves at most the file's size: one pass.
			if op != OpAppendFdatasync && op != OpAppendFsync {
				ops := r.Metrics[result.OpsPerSec] * r.Duration.Seconds()
				if limit := float64((1 << 20) / bs); ops > limit+0.5 {
					t.Errorf("%s: %v ops, more than one pass (%v blocks)", p.ID, ops, limit)
				}
			} else if ops := r.Metrics[result.OpsPerSec] * r.Duration.Seconds(); math.Abs(ops-20) > 0.5 {
				t.Errorf("%s: %v appends, want FsyncOps = 20", p.ID, ops)
			}
		}
	}
	assertEmpty(t, dir)
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("probe left files in %s: %v", dir, ents)
	}
}

func TestDiskOptionsSelectPoints(t *testing.T) {
	dir := t.TempDir()
	o := tinyDisk(dir)
	o.Reps = 1
	o.BlockSizes = []int{8 << 10}
	o.Ops = []string{OpRead}
	o.Patterns = []string{PatternRand}
	o.IO = []string{IOBuffered}
	o.BufferedRandomReads = true
	sec, err := Disk(t.Context(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pointIDs(sec); !slices.Equal(got, []string{"op=read/pattern=rand/io=buffered/block=8K"}) {
		t.Fatalf("points %v", got)
	}
	checkRep(t, sec.Points[0].ID, 8<<10, sec.Points[0].Reps[0])

	// Append points only: no probe file is written.
	o = tinyDisk(dir)
	o.Reps, o.Ops, o.FsyncBlock = 1, []string{OpAppendFsync}, 512
	var labels []string
	sec, err = Disk(t.Context(), o, func(_, _ int, label string) { labels = append(labels, label) })
	if err != nil {
		t.Fatal(err)
	}
	if got := pointIDs(sec); !slices.Equal(got, []string{"op=append+fsync/pattern=seq/io=buffered/block=512"}) {
		t.Fatalf("points %v", got)
	}
	checkRep(t, sec.Points[0].ID, 512, sec.Points[0].Reps[0])
	if len(labels) != 2 || strings.Contains(labels[0], "probe file") {
		t.Errorf("progress labels %q: want the append point, then the end", labels)
	}
	assertEmpty(t, dir)
}

// TestDiskCancel cancels from the progress callback as the fourth point is
// about to start: Disk returns the three finished points and an error
// wrapping context.Canceled, and removes its files.
func TestDiskCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := tinyDisk(dir)
	o.Reps = 1
	sec, err := Disk(ctx, o, func(done, _ int, _ string) {
		if done == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got, want := pointIDs(sec), wantDiskIDs([]string{"4K", "64K"}, false)[:3]; !slices.Equal(got, want) {
		t.Errorf("points after cancel %v, want %v", got, want)
	}
	for _, p := range sec.Points {
		if len(p.Reps) != 1 || p.Reps[0].Error != "" {
			t.Errorf("%s: reps %+v", p.ID, p.Reps)
		}
	}
	assertEmpty(t, dir)

	// Cancelled before it starts: no points, the same error.
	sec, err = Disk(ctx, o, nil)
	if !errors.Is(err, context.Canceled) || len(sec.Points) != 0 {
		t.Errorf("pre-cancelled: %d points, err %v", len(sec.Points), err)
	}
	assertEmpty(t, dir)
}

func TestDiskValidate(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/plain"
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		edit  func(o *DiskOptions)
	}{
		{"Dir", func(o *DiskOptions) { o.Dir = "" }},
		{"Dir", func(o *DiskOptions) { o.Dir = dir + "/missing" }},
		{"Dir", func(o *DiskOptions) { o.Dir = file }},
		{"FileSize", func(o *DiskOptions) { o.FileSize = -4096 }},
		{"FileSize", func(o *DiskOptions) { o.FileSize = 5000 }},
		{"FileSize", func(o *DiskOptions) { o.FileSize = 4096 }}, // smaller than 64K blocks
		{"BlockSizes", func(o *DiskOptions) { o.BlockSizes = []int{} }},
		{"BlockSizes[1]", func(o *DiskOptions) { o.BlockSizes = []int{4096, 1000} }},
		{"BlockSizes[0]", func(o *DiskOptions) { o.BlockSizes = []int{512} }}, // direct needs 4096
		{"BlockSizes[0]", func(o *DiskOptions) { o.BlockSizes = []int{128 << 20} }},
		{"BlockSizes[0]", func(o *DiskOptions) { o.BlockSizes = []int{-4096} }},
		{"Ops[0]", func(o *DiskOptions) { o.Ops = []string{"erase"} }},
		{"Ops", func(o *DiskOptions) { o.Ops = []string{} }},
		{"Ops[1]", func(o *DiskOptions) { o.Ops = []string{OpRead, OpRead} }},
		{"Patterns[0]", func(o *DiskOptions) { o.Patterns = []string{"zigzag"} }},
		{"IO[0]", func(o *DiskOptions) { o.IO = []string{"mmap"} }},
		{"PointDuration", func(o *DiskOptions) { o.PointDuration = -time.Second }},
		{"FsyncOps", func(o *DiskOptions) { o.FsyncOps = -1 }},
		{"FsyncBlock", func(o *DiskOptions) { o.FsyncBlock = -1 }},
		{"FsyncTimeout", func(o *DiskOptions) { o.FsyncTimeout = -1 }},
		{"Reps", func(o *DiskOptions) { o.Reps = -2 }},
	}
	for _, tt := range tests {
		o := tinyDisk(dir)
		tt.edit(&o)
		sec, err := Disk(t.Context(), o, nil)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "DiskOptions."+tt.field) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions naming DiskOptions.%s", tt.field, err, tt.field)
		}
		if len(sec.Points) != 0 {
			t.Errorf("%s: %d points from invalid options", tt.field, len(sec.Points))
		}
	}
	// 512-byte blocks are fine without direct I/O.
	o := DiskOptions{Dir: dir, BlockSizes: []int{512}, IO: []string{IOBuffered}}
	if _, err := o.validate(); err != nil {
		t.Errorf("512-byte buffered blocks: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("invalid options left files: %v", ents)
	}
}

// TestDiskDirectOnTmpfs: on tmpfs the direct points are skipped with a
// reason, the buffered ones measured, and the run succeeds.
func TestDiskDirectOnTmpfs(t *testing.T) {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err != nil || !fi.IsDir() || !isMemoryFS(t, shm) {
		t.Skipf("%s is not a tmpfs directory here", shm)
	}
	dir, err := os.MkdirTemp(shm, "weir-probe-test-")
	if err != nil {
		t.Skipf("cannot write to %s: %v", shm, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := tinyDisk(dir)
	o.Reps, o.Ops, o.BlockSizes, o.Patterns = 1, []string{OpWrite, OpRead}, []int{4 << 10}, []string{PatternSeq}
	sec, err := Disk(t.Context(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.Points) != 4 {
		t.Fatalf("points %v", pointIDs(sec))
	}
	for _, p := range sec.Points {
		io, _ := p.Factor(FactorIO)
		r := p.Reps[0]
		reason, skipped := Skipped(r)
		switch {
		case io == IODirect && (!skipped || !strings.Contains(reason, "memory")):
			t.Errorf("%s: want skipped because tmpfs is memory, got %+v", p.ID, r)
		case io == IOBuffered && r.Error != "":
			t.Errorf("%s: %s", p.ID, r.Error)
		case io == IOBuffered:
			checkRep(t, p.ID, 4<<10, r)
		}
	}
	assertEmpty(t, dir)
}

func TestLatencyPercentiles(t *testing.T) {
	var l latencies
	for i := 1000; i >= 1; i-- { // 1..1000 µs, unsorted
		l = append(l, time.Duration(i)*time.Microsecond)
	}
	m := map[string]float64{}
	l.add(m)
	want := map[string]float64{result.LatP50: 500, result.LatP99: 990, result.LatP999: 999, result.LatMax: 1000}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	m = map[string]float64{}
	latencies{3 * time.Microsecond}.add(m)
	if m[result.LatP50] != 3 || m[result.LatMax] != 3 {
		t.Errorf("one sample: %v", m)
	}
	m = map[string]float64{}
	latencies(nil).add(m)
	if len(m) != 0 {
		t.Errorf("no samples: %v", m)
	}
}

func TestSizeLabels(t *testing.T) {
	for n, want := range map[int]string{4096: "4K", 65536: "64K", 1 << 20: "1M", 1536: "1536", 3 << 20: "3M", 1024 + 512<<10: "513K"} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %q, want %q", n, got, want)
		}
		if got := blockWords(sizeLabel(n)); got != sizeWords(n) {
			t.Errorf("blockWords(%q) = %q, want %q", sizeLabel(n), got, sizeWords(n))
		}
	}
}

// TestReferencesMatchDefaultPoints: every reference names a point the default
// probes produce, and a metric those points carry.
func TestReferencesMatchDefaultPoints(t *testing.T) {
	o, err := DiskOptions{Dir: t.TempDir()}.validate()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range diskPoints(o) {
		ids[SectionDisk+" "+p.result().ID] = true
	}
	for _, id := range []string{PointMemorySeq, PointMemoryRand, PointDiskValueSeq, PointDiskValueRand} {
		ids[SectionMemory+" "+id] = true
	}
	refs := References()
	if len(refs) < 7 {
		t.Fatalf("%d references", len(refs))
	}
	for _, r := range refs {
		if !ids[r.Section+" "+r.PointID] {
			t.Errorf("reference %q: no default point %s in section %s", r.Label, r.PointID, r.Section)
		}
		if r.Metric != result.MBPerSec && r.Metric != result.ValuesPerSec {
			t.Errorf("reference %q: metric %q", r.Label, r.Metric)
		}
		if r.Value <= 0 || r.Label == "" || r.Source == "" {
			t.Errorf("reference %+v incomplete", r)
		}
	}
	// Kafka's "over 6000X": 600 MB/s against 100 KB/s.
	if refs[0].Value/refs[1].Value != 6000 {
		t.Errorf("Kafka ratio %v", refs[0].Value/refs[1].Value)
	}
}
