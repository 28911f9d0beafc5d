package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/harness/result"
)

func tinyMemory(dir string) MemoryOptions {
	return MemoryOptions{
		Bytes:         1 << 20,
		Dir:           dir,
		DiskBytes:     256 << 10,
		PointDuration: 20 * time.Millisecond,
		Reps:          2,
		Seed:          3,
	}
}

var allMemoryIDs = []string{PointMemorySeq, PointMemoryRand, PointDiskValueSeq, PointDiskValueRand}

func checkValuesRep(t *testing.T, id string, r result.Rep) {
	t.Helper()
	v, mb := r.Metrics[result.ValuesPerSec], r.Metrics[result.MBPerSec]
	if !(v > 0) || math.IsInf(v, 0) || r.Duration <= 0 {
		t.Errorf("%s: values/s %v, duration %v", id, v, r.Duration)
	}
	if math.Abs(mb-v*8/1e6) > 1e-9*mb {
		t.Errorf("%s: MB/s %v != values/s %v × 8 B", id, mb, v)
	}
}

func TestMemoryTiny(t *testing.T) {
	dir := t.TempDir()
	var last [2]int
	sec, err := Memory(t.Context(), tinyMemory(dir), func(done, total int, _ string) { last = [2]int{done, total} })
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != SectionMemory || !slices.Equal(sec.Factors, []string{FactorMedium, FactorAccess}) {
		t.Errorf("section %q factors %v", sec.Name, sec.Factors)
	}
	if got := pointIDs(sec); !slices.Equal(got, allMemoryIDs) {
		t.Fatalf("points %v, want %v", got, allMemoryIDs)
	}
	if last != [2]int{8, 8} {
		t.Errorf("last progress call (done, total) = %v, want (8, 8)", last)
	}
	memFS := isMemoryFS(t, dir)
	for _, p := range sec.Points {
		if len(p.Reps) != 2 || Describe(SectionMemory, p) == "" {
			t.Errorf("%s: %d reps, description %q", p.ID, len(p.Reps), Describe(SectionMemory, p))
		}
		medium, _ := p.Factor(FactorMedium)
		for _, r := range p.Reps {
			if _, ok := Skipped(r); ok && medium == MediumDisk && memFS {
				continue
			}
			if r.Error != "" {
				t.Errorf("%s: %s", p.ID, r.Error)
				continue
			}
			checkValuesRep(t, p.ID, r)
		}
	}
	// One pass at most over the 32768 values of the file.
	for _, r := range sec.Points[2].Reps {
		if n := r.Metrics[result.ValuesPerSec] * r.Duration.Seconds(); n > 32768.5 {
			t.Errorf("sequential disk point read %v values from a 32768-value file", n)
		}
	}
	assertEmpty(t, dir)

	// Without Dir, memory points only.
	o := tinyMemory("")
	o.Reps = 1
	sec, err = Memory(t.Context(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pointIDs(sec); !slices.Equal(got, allMemoryIDs[:2]) {
		t.Errorf("without Dir: points %v", got)
	}
}

func TestMemoryCancel(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	o := tinyMemory(dir)
	o.Reps = 1
	sec, err := Memory(ctx, o, func(done, _ int, _ string) {
		if done == 1 {
			cancel() // as the second point starts
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := pointIDs(sec); !slices.Equal(got, allMemoryIDs[:1]) {
		t.Errorf("points after cancel %v, want only %s", got, allMemoryIDs[0])
	}
	assertEmpty(t, dir)
}

func TestMemoryValidate(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		field string
		edit  func(o *MemoryOptions)
	}{
		{"Bytes", func(o *MemoryOptions) { o.Bytes = 1000 }},
		{"Bytes", func(o *MemoryOptions) { o.Bytes = 1<<20 + 4 }},
		{"Bytes", func(o *MemoryOptions) { o.Bytes = 1 << 40 }},
		{"Bytes", func(o *MemoryOptions) { o.Bytes = -8 }},
		{"Dir", func(o *MemoryOptions) { o.Dir = dir + "/missing" }},
		{"DiskBytes", func(o *MemoryOptions) { o.DiskBytes = 1 << 10 }},
		{"DiskBytes", func(o *MemoryOptions) { o.DiskBytes = 1<<20 + 8 }},
		{"PointDuration", func(o *MemoryOptions) { o.PointDuration = -1 }},
		{"Reps", func(o *MemoryOptions) { o.Reps = -1 }},
	} {
		o := tinyMemory(dir)
		tt.edit(&o)
		_, err := Memory(t.Context(), o, nil)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "MemoryOptions."+tt.field) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions naming MemoryOptions.%s", tt.field, err, tt.field)
		}
	}
	if o, err := (MemoryOptions{}).validate(); err != nil || o.Bytes != DefaultMemoryBytes || o.Dir != "" {
		t.Errorf("zero options: %+v, %v", o, err)
	}
}

// TestMemoryDetectsWrongData: a probe that reads the wrong bytes fails its
// rep instead of reporting a figure.
func TestMemoryDetectsWrongData(t *testing.T) {
	dir := t.TempDir()
	o, err := tinyMemory(dir).validate()
	if err != nil {
		t.Fatal(err)
	}
	m := &memRun{o: o, rng: rand.New(rand.NewPCG(1, 2))}
	defer m.close()
	m.arr = make([]int64, o.Bytes/8)
	for i := range m.arr {
		m.arr[i] = int64(i)
	}
	if err := m.prepareDisk(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.file == nil {
		t.Skipf("no direct I/O here: %s", m.skip)
	}
	ctx := t.Context()
	for name, r := range map[string]result.Rep{"memory seq": m.memorySeq(ctx), "memory rand": m.memoryRand(ctx),
		"disk seq": m.diskSeq(ctx), "disk rand": m.diskRand(ctx)} {
		if r.Error != "" {
			t.Fatalf("%s on good data: %s", name, r.Error)
		}
	}
	// Corrupt every value in memory and one in the file.
	for i := range m.arr {
		m.arr[i]++
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 12345)
	f, err := os.OpenFile(m.name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b[:], 8*100); err != nil {
		t.Fatal(err)
	}
	if err := dropCache(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for name, r := range map[string]result.Rep{"memory seq": m.memorySeq(ctx), "memory rand": m.memoryRand(ctx),
		"disk seq": m.diskSeq(ctx)} {
		if !strings.Contains(r.Error, ErrMismatch.Error()) {
			t.Errorf("%s on corrupt data: rep %+v, want a mismatch error", name, r)
		}
	}
}

// TestMemoryDiskOnTmpfs: the disk points on tmpfs are skipped (it is
// memory), not failed, and the memory points still run.
func TestMemoryDiskOnTmpfs(t *testing.T) {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err != nil || !fi.IsDir() || !isMemoryFS(t, shm) {
		t.Skipf("%s is not a tmpfs directory here", shm)
	}
	dir, err := os.MkdirTemp(shm, "weir-probe-test-")
	if err != nil {
		t.Skipf("cannot write to %s: %v", shm, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := tinyMemory(dir)
	o.Reps = 1
	sec, err := Memory(t.Context(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pointIDs(sec); !slices.Equal(got, allMemoryIDs) {
		t.Fatalf("points %v", got)
	}
	for _, p := range sec.Points {
		medium, _ := p.Factor(FactorMedium)
		reason, skipped := Skipped(p.Reps[0])
		if medium == MediumDisk && (!skipped || !strings.Contains(reason, "memory")) {
			t.Errorf("%s: want skipped because tmpfs is memory, got %+v", p.ID, p.Reps[0])
		}
		if medium == MediumMemory {
			checkValuesRep(t, p.ID, p.Reps[0])
		}
	}
	assertEmpty(t, dir)
}
