package probe

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/weir-broker/weir/harness/result"
)

// The benchmarks are the probes themselves, with their default sizes, one
// sub-benchmark per point, so `go test -bench` prints this machine's figures
// in the Go benchmark format:
//
//	go test -run '^$' -bench . -benchtime 1x ./harness/probe/
//
// Each iteration is one repetition of the point (a bounded window, not one
// operation), so ns/op is the window; the figures are the custom metrics.
// The files go in $WEIR_PROBE_DIR, default os.TempDir().

func benchDir() string {
	if d := os.Getenv("WEIR_PROBE_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// reportRep averages a rep's metrics over the iterations into b's output.
func reportReps(b *testing.B, reps []result.Rep) {
	sums := map[string]float64{}
	n := 0
	for _, r := range reps {
		if reason, ok := Skipped(r); ok {
			b.Skip(reason)
		}
		if r.Error != "" {
			b.Fatal(r.Error)
		}
		for k, v := range r.Metrics {
			sums[k] += v
		}
		n++
	}
	for k, v := range sums {
		b.ReportMetric(v/float64(n), strings.ReplaceAll(k, " ", "_"))
	}
}

func BenchmarkDisk(b *testing.B) {
	o, err := DiskOptions{Dir: benchDir()}.validate()
	if err != nil {
		b.Fatal(err)
	}
	d := &diskRun{o: o, rng: rand.New(rand.NewPCG(1, 2))}
	defer d.close()
	if err := d.prepare(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, p := range diskPoints(o) {
		b.Run(p.result().ID, func(b *testing.B) {
			var reps []result.Rep
			for b.Loop() {
				r, err := d.run(b.Context(), p)
				if err != nil {
					b.Fatal(err)
				}
				reps = append(reps, r)
			}
			reportReps(b, reps)
		})
	}
}

func BenchmarkMemory(b *testing.B) {
	o, err := MemoryOptions{Dir: benchDir()}.validate()
	if err != nil {
		b.Fatal(err)
	}
	m := &memRun{o: o, rng: rand.New(rand.NewPCG(1, 2))}
	defer m.close()
	m.arr = make([]int64, o.Bytes/valueSize)
	for i := range m.arr {
		m.arr[i] = int64(i)
	}
	if err := m.prepareDisk(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, pt := range []struct {
		id  string
		run func() result.Rep
	}{
		{PointMemorySeq, func() result.Rep { return m.memorySeq(b.Context()) }},
		{PointMemoryRand, func() result.Rep { return m.memoryRand(b.Context()) }},
		{PointDiskValueSeq, func() result.Rep { return m.diskSeq(b.Context()) }},
		{PointDiskValueRand, func() result.Rep { return m.diskRand(b.Context()) }},
	} {
		b.Run(pt.id, func(b *testing.B) {
			var reps []result.Rep
			for b.Loop() {
				reps = append(reps, pt.run())
			}
			reportReps(b, reps)
		})
	}
}

// BenchmarkDefaultProbes runs the two probes end to end with their defaults,
// as the runner will, and logs every point beside its description.
func BenchmarkDefaultProbes(b *testing.B) {
	for b.Loop() {
		disk, err := Disk(b.Context(), DiskOptions{Dir: benchDir()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		mem, err := Memory(b.Context(), MemoryOptions{Dir: benchDir()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, sec := range []result.Section{disk, mem} {
			for _, p := range sec.Points {
				b.Log(formatPoint(sec.Name, p))
			}
		}
	}
}

func formatPoint(section string, p result.Point) string {
	var parts []string
	for _, k := range []string{result.MBPerSec, result.OpsPerSec, result.ValuesPerSec, result.LatP50, result.LatP99, result.LatP999, result.LatMax} {
		if vs := p.Values(k); len(vs) > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.4g", k, vs[0]))
		}
	}
	if len(parts) == 0 && len(p.Reps) > 0 {
		parts = append(parts, p.Reps[0].Error)
	}
	return fmt.Sprintf("%-50s %s\n    (%s)", p.ID, strings.Join(parts, " "), Describe(section, p))
}
