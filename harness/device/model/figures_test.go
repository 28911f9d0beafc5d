package model

import (
	"fmt"
	"strings"
	"testing"
)

// TestFigures prints the model's figures beside the published ones they are built from (the README's table:
// `go test -run TestFigures -v ./harness/device/model`). Queue depth 1, random offsets over the whole device,
// write passes ending with a flush. The bounds asserted are loose; the other tests hold the exact claims.
func TestFigures(t *testing.T) {
	var b strings.Builder
	row := func(what, got, published string) { fmt.Fprintf(&b, "| %s | %s | %s |\n", what, got, published) }
	iops := func(profile string, op Op, size int64) float64 {
		d := mustDevice(t, profile)
		const n = 2000
		_, took := qd1(d, randomReqs(op, n, size, d.Capacity(), 7))
		return n / took.Seconds()
	}
	seq := func(profile string, op Op, from, size int64) float64 {
		d := mustDevice(t, profile)
		const total = 1 << 30
		_, took := qd1(d, seqReqs(op, from, total, size))
		return total / took.Seconds() / 1e6
	}
	r := iops("hdd-7200", Read, 4096)
	row("hdd-7200 random 4 KiB reads", fmt.Sprintf("%.0f IOPS", r), "≈ 79 IOPS (8.5 + 4.17 + 0.03 ms); 80-120")
	row("hdd-7200-nocache random 4 KiB writes", fmt.Sprintf("%.0f IOPS", iops("hdd-7200-nocache", Write, 4096)), "96 (Ultrastar 7K6000, fio sync)")
	row("hdd-7200 sequential read, outer / inner zone", fmt.Sprintf("%.0f / %.0f MB/s", seq("hdd-7200", Read, 0, 1<<20),
		seq("hdd-7200", Read, mustDevice(t, "hdd-7200").Capacity()-1<<30-1<<20, 1<<20)), "138 / 66 MB/s (data sheet; OD/ID 2.1)")
	c := mustDevice(t, "hdd-7200-nocache")
	const commits = 1000
	var reqs []Request
	for i := range int64(commits) {
		reqs = append(reqs, Request{Op: Write, Off: i * 4096, Len: 4096})
	}
	_, took := qd1(c, reqs)
	row("hdd-7200-nocache 4 KiB appends, each synchronous", fmt.Sprintf("%.0f /s", commits/took.Seconds()), "≤ 120 /s at 7200 rpm (one per turn)")
	s5 := seq("raid5-6xhdd-7200", Write, 0, 4<<20)
	row("raid5-6xhdd-7200 sequential write", fmt.Sprintf("%.0f MB/s", s5), "≈ 600 MB/s (Kafka design doc)")
	// Where a file lands matters: diskfs puts a directory's region at a golden-ratio point of the device (the first
	// directory at 61.8%, where the disk probe's files go), towards the slower inner zones.
	r5 := mustDevice(t, "raid5-6xhdd-7200").Capacity()
	at := func(frac float64) int64 { return int64(float64(r5)*frac) / (1 << 30) * (1 << 30) }
	row("raid5-6xhdd-7200 sequential write at 61.8% / the inner end of the device", fmt.Sprintf("%.0f / %.0f MB/s",
		seq("raid5-6xhdd-7200", Write, at(0.618), 4<<20), seq("raid5-6xhdd-7200", Write, at(0.99), 4<<20)), "-")
	for _, size := range []int64{4096, 1024} {
		w := iops("raid5-6xhdd-7200", Write, size)
		row(fmt.Sprintf("raid5-6xhdd-7200 random %d B writes", size), fmt.Sprintf("%.0f /s, %.0f KB/s, ratio %.0fx", w, w*float64(size)/1e3, s5*1e6/(w*float64(size))),
			"≈ 100 KB/s, \"over 6000X\"")
	}
	// The same array with the disks' write caches off: each member command waits for the media, so at queue
	// depth 1 a sequential stream loses most of a turn between commands, and a small write's write half waits a
	// turn after its read half.
	s5n := seq("raid5-6xhdd-7200-nocache", Write, 0, 4<<20)
	row("raid5-6xhdd-7200-nocache sequential write", fmt.Sprintf("%.0f MB/s", s5n), "(write caches off; queue depth 1)")
	wn := iops("raid5-6xhdd-7200-nocache", Write, 4096)
	row("raid5-6xhdd-7200-nocache random 4096 B writes", fmt.Sprintf("%.0f /s, %.0f KB/s, ratio %.0fx", wn, wn*4096/1e3, s5n*1e6/(wn*4096)), "(write caches off)")
	row("ssd random 4 KiB reads", fmt.Sprintf("%.0f IOPS", iops("ssd", Read, 4096)), "10,000 IOPS QD1 (860 EVO)")
	row("ssd sequential read", fmt.Sprintf("%.0f MB/s", seq("ssd", Read, 0, 1<<20)), "550 MB/s")
	t.Logf("\n| figure | model | published |\n|---|---|---|\n%s", b.String())
	if r < 70 || s5 < 500 {
		t.Errorf("figures out of range:\n%s", b.String())
	}
}
