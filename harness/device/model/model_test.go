package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func mustDevice(t *testing.T, name string) Device {
	t.Helper()
	p, err := ParseProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSeekAverage: the seek curve reproduces the data sheet's track-to-track, full-stroke and average seek times,
// the average taken as vendors define it (uniform random start and end cylinders).
func TestSeekAverage(t *testing.T) {
	d := mustDevice(t, "hdd-7200")
	g := d.g
	if got := g.seek(1); math.Abs(got.Seconds()*1e3-0.8) > 0.05 {
		t.Errorf("seek(1 cylinder) = %v, want ≈ 0.8 ms (track-to-track)", got)
	}
	if got := g.seek(g.cyls); math.Abs(got.Seconds()*1e3-16) > 0.01 {
		t.Errorf("seek(full stroke) = %v, want 16 ms", got)
	}
	// Average over a grid of endpoint pairs.
	const steps = 400
	var sum time.Duration
	for i := range steps {
		for j := range steps {
			a := g.cyls * int64(2*i+1) / (2 * steps)
			b := g.cyls * int64(2*j+1) / (2 * steps)
			sum += g.seek(a - b)
		}
	}
	avg := sum / (steps * steps)
	if math.Abs(avg.Seconds()*1e3-8.5) > 0.15 {
		t.Errorf("average seek over uniform endpoints = %v, want 8.5 ms ± 0.15", avg)
	}
	// √-shaped: a tenth of the stroke costs more than a tenth of the full-stroke time above track-to-track.
	if tenth := g.seek(g.cyls / 10); tenth.Seconds()*1e3 < 0.8+0.1*15.2*2 {
		t.Errorf("seek(10%% stroke) = %v: the curve is not √-shaped", tenth)
	}
}

// qd1 serves requests one at a time, each arriving when the previous completed, and returns the elapsed time.
func qd1(d Device, reqs []Request) (Device, time.Duration) {
	var now time.Duration
	for _, r := range reqs {
		var res Result
		d, res = d.Serve(now, r)
		now = res.Done
	}
	return d, now
}

func randomReqs(op Op, n int, size, span int64, seed uint64) []Request {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]Request, n)
	for i := range out {
		out[i] = Request{Op: op, Off: rng.Int64N(span/size) * size, Len: size}
	}
	return out
}

// seqReqs is a sequential pass; a write pass ends with a flush, so its time is the media's.
func seqReqs(op Op, from, total, size int64) []Request {
	var out []Request
	for at := from; at < from+total; at += size {
		out = append(out, Request{Op: op, Off: at, Len: size})
	}
	if op == Write {
		out = append(out, Request{Op: Flush})
	}
	return out
}

// TestRandomIOPS: one 7200 rpm disk does about 80-120 random 4 KiB operations per second at queue depth 1 over
// the whole disk (devices.md §1: 8.5 + 4.17 + 0.03 ms ≈ 79 IOPS).
func TestRandomIOPS(t *testing.T) {
	for _, tc := range []struct {
		profile string
		op      Op
	}{{"hdd-7200", Read}, {"hdd-7200-nocache", Write}} {
		d := mustDevice(t, tc.profile)
		const n = 2000
		_, took := qd1(d, randomReqs(tc.op, n, 4096, d.Capacity(), 1))
		iops := n / took.Seconds()
		if iops < 70 || iops > 125 {
			t.Errorf("%s random 4 KiB %s: %.0f IOPS, want 70..125", tc.profile, tc.op, iops)
		}
	}
}

// TestSequentialRate: sequential transfers run at the zone's sustained rate: 138 MB/s at the outer edge, 66 at the
// inner one, about 102 on average over the disk.
func TestSequentialRate(t *testing.T) {
	d := mustDevice(t, "hdd-7200")
	const total = 256 << 20
	for _, tc := range []struct {
		op   Op
		from int64
		want float64
	}{
		{Write, 0, 138}, {Read, 0, 138}, {Read, d.Capacity() - total - 1<<20, 66},
	} {
		_, took := qd1(d, seqReqs(tc.op, tc.from, total, 1<<20))
		rate := total / took.Seconds() / 1e6
		if math.Abs(rate-tc.want)/tc.want > 0.05 {
			t.Errorf("sequential %s from %d: %.1f MB/s, want %.0f ± 5%%", tc.op, tc.from, rate, tc.want)
		}
	}
}

// TestSyncWritesPerRevolution: with the write cache off, back-to-back small sequential writes miss their sector by
// the command overhead and wait a turn each, so a single appender commits at most about 120 times a second.
func TestSyncWritesPerRevolution(t *testing.T) {
	d := mustDevice(t, "hdd-7200-nocache")
	const n = 500
	_, took := qd1(d, seqReqs(Write, 0, n*4096, 4096))
	if rate := n / took.Seconds(); rate < 100 || rate > 125 {
		t.Errorf("sequential 4 KiB writes, cache off: %.0f/s, want 100..125 (one per revolution)", rate)
	}
	// With the cache on they are acknowledged at once, and the flush pays for them.
	c := mustDevice(t, "hdd-7200")
	reqs := seqReqs(Write, 0, n*4096, 4096)
	c, took = qd1(c, reqs[:len(reqs)-1])
	if rate := n / took.Seconds(); rate < 5000 {
		t.Errorf("sequential 4 KiB writes, cache on: %.0f/s, want > 5000 (acknowledged from the cache)", rate)
	}
	_, res := c.Serve(took, Request{Op: Flush})
	if res.Done <= took {
		t.Errorf("flush after cached writes completed at %v, not after %v", res.Done, took)
	}
}

// TestRAID5SmallWrite: a write within one chunk costs 4 I/Os (read old data and parity, write both); a full-stripe
// write costs N writes and no reads.
func TestRAID5SmallWrite(t *testing.T) {
	d := mustDevice(t, "raid5-6xhdd-7200")
	_, res := d.Serve(0, Request{Op: Write, Off: 3 * 4096, Len: 4096})
	if res.Reads != 2 || res.Writes != 2 || res.PartialStripes != 1 {
		t.Errorf("small write: %d reads, %d writes, %d partial stripes; want 2, 2, 1", res.Reads, res.Writes, res.PartialStripes)
	}
	stripe := 5 * d.Profile().StripeUnit
	_, res = d.Serve(0, Request{Op: Write, Off: 7 * stripe, Len: stripe})
	if res.Reads != 0 || res.Writes != 6 || res.FullStripes != 1 {
		t.Errorf("full-stripe write: %d reads, %d writes, %d full stripes; want 0, 6, 1", res.Reads, res.Writes, res.FullStripes)
	}
	// Four of five chunks: reconstruct-write reads the one untouched chunk instead of four chunks and parity.
	_, res = d.Serve(0, Request{Op: Write, Off: 0, Len: 4 * d.Profile().StripeUnit})
	if res.Reads != 1 || res.Writes != 5 {
		t.Errorf("4-chunk write: %d reads, %d writes; want 1 (reconstruct), 5", res.Reads, res.Writes)
	}
	// Many stripes in one request: one merged command per member.
	_, res = d.Serve(0, Request{Op: Write, Off: 0, Len: 100 * stripe})
	if res.Reads != 0 || res.Writes != 6 || res.FullStripes != 100 {
		t.Errorf("100-stripe write: %d reads, %d writes (merged), %d full; want 0, 6, 100", res.Reads, res.Writes, res.FullStripes)
	}
}

// TestArraySequential: sequential throughput is (N−1)·S for raid5, N·S for raid0, S for jbod; reads of a raid5
// stripe skip the parity.
func TestArraySequential(t *testing.T) {
	const total = 1 << 30
	for _, tc := range []struct {
		profile string
		want    float64
	}{{"raid5-6xhdd-7200", 5 * 138}, {"raid0-6xhdd-7200", 6 * 138}, {"jbod-6xhdd-7200", 138}} {
		d := mustDevice(t, tc.profile)
		_, took := qd1(d, seqReqs(Write, 0, total, 4<<20))
		rate := total / took.Seconds() / 1e6
		if math.Abs(rate-tc.want)/tc.want > 0.1 {
			t.Errorf("%s sequential write: %.0f MB/s, want %.0f ± 10%%", tc.profile, rate, tc.want)
		}
	}
}

// TestRAID5SeqRandomRatio: the design doc's gap, in the order of magnitude: sequential writes on six disks in
// RAID-5 are thousands of times faster in bytes per second than random 4 KiB writes at queue depth 1.
func TestRAID5SeqRandomRatio(t *testing.T) {
	d := mustDevice(t, "raid5-6xhdd-7200-nocache")
	const total = 1 << 30
	_, seq := qd1(d, seqReqs(Write, 0, total, 4<<20))
	const n = 500
	_, rnd := qd1(d, randomReqs(Write, n, 4096, d.Capacity(), 2))
	ratio := (total / seq.Seconds()) / (n * 4096 / rnd.Seconds())
	if ratio < 1000 || ratio > 20000 {
		t.Errorf("raid5 sequential/random 4 KiB write ratio %.0f, want 1000..20000", ratio)
	}
}

// TestSSD: random and sequential differ little.
func TestSSD(t *testing.T) {
	d := mustDevice(t, "ssd")
	const n = 2000
	_, took := qd1(d, randomReqs(Read, n, 4096, d.Capacity(), 3))
	if iops := n / took.Seconds(); iops < 8000 || iops > 11000 {
		t.Errorf("ssd random 4 KiB reads: %.0f IOPS, want 8000..11000", iops)
	}
	_, seq := qd1(d, seqReqs(Read, 0, 256<<20, 1<<20))
	if rate := 256 << 20 / seq.Seconds() / 1e6; rate < 500 || rate > 560 {
		t.Errorf("ssd sequential read %.0f MB/s, want 500..560", rate)
	}
}

// TestServeIsAValue: Serve leaves its receiver as it was, so the same request from the same state costs the same.
func TestServeIsAValue(t *testing.T) {
	d := mustDevice(t, "raid5-6xhdd-7200")
	d, _ = qd1(d, randomReqs(Write, 50, 4096, d.Capacity(), 4))
	r := Request{Op: Write, Off: 12345 * 4096, Len: 8192}
	_, a := d.Serve(time.Second, r)
	_, b := d.Serve(time.Second, r)
	if a != b {
		t.Errorf("the same request from the same state: %+v then %+v", a, b)
	}
	if d.Stats().Requests != 50 {
		t.Errorf("the state counted %d requests after Serve on copies, want 50", d.Stats().Requests)
	}
}

func TestParseProfile(t *testing.T) {
	for _, name := range []string{"hdd-7200", "raid5-6xhdd-7200", "raid5-4xhdd-7200", "raid0-2xssd", "jbod-3xhdd-7200-nocache", "ssd"} {
		p, err := ParseProfile(name)
		if err != nil {
			t.Errorf("ParseProfile(%q): %v", name, err)
			continue
		}
		if p.Name != name || p.Summary() == "" {
			t.Errorf("ParseProfile(%q) = %+v", name, p)
		}
	}
	for _, name := range []string{"hdd-5400", "raid5-2xhdd-7200", "raid6-6xhdd-7200", "raid0-1xssd"} {
		if _, err := ParseProfile(name); !errors.Is(err, ErrProfile) {
			t.Errorf("ParseProfile(%q) = %v, want ErrProfile", name, err)
		}
	}
	p, err := ParseProfileYAML([]byte("name: slow\nlayout: raid5\ndisks: 4\ndisk:\n  rpm: 5400\n  write_cache: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Disk.RPM != 5400 || p.Disk.WriteCacheOn() || p.Disk.SeekAvgMs != 8.5 || p.StripeUnit != 64<<10 {
		t.Errorf("YAML profile with defaults = %+v", p)
	}
	if got := p.DataBytes(); got != 3*p.Disk.CapacityBytes/p.StripeUnit*p.StripeUnit {
		t.Errorf("raid5 of 4 stores %d bytes", got)
	}
	for _, y := range []string{"disk:\n  seek_avg_ms: 20\n", "disk:\n  rpmm: 1\n", "layout: raid5\ndisks: 2\n", "stripe_unit: 1000\nlayout: raid0\ndisks: 2\n"} {
		if _, err := ParseProfileYAML([]byte(y)); !errors.Is(err, ErrProfile) {
			t.Errorf("ParseProfileYAML(%q) = %v, want ErrProfile", y, err)
		}
	}
}

func TestClockSimulated(t *testing.T) {
	c := NewClock(mustDevice(t, "hdd-7200-nocache"), false)
	res, waited := c.Do(Request{Op: Write, Off: 1 << 40, Len: 4096})
	if waited != res.Done || c.Now() != res.Done || waited < time.Millisecond {
		t.Errorf("simulated Do: waited %v, done %v, now %v", waited, res.Done, c.Now())
	}
	bg := c.Submit(Request{Op: Write, Off: 0, Len: 4096})
	if c.Now() != res.Done || bg.Done <= res.Done {
		t.Errorf("Submit moved the clock to %v or completed at %v", c.Now(), bg.Done)
	}
	// Waited sums the waits callers were made to make: the background
	// write's own time counts once someone waits for it, from then.
	if c.Waited() != waited {
		t.Errorf("Waited %v after one wait of %v", c.Waited(), waited)
	}
	w2 := c.WaitUntil(bg.Done)
	if c.Waited() != waited+w2 || w2 != bg.Done-res.Done {
		t.Errorf("Waited %v after waits of %v and %v (background write done at %v)", c.Waited(), waited, w2, bg.Done)
	}
}

// TestClockDoSince: a flush served after its caller submitted writeback earlier counts the wait from then (in real
// time the device worked while the caller queued the rest); in simulated time the clock is moved by hand here.
func TestClockDoSince(t *testing.T) {
	c := NewClock(mustDevice(t, "hdd-7200-nocache"), false)
	since := c.Now()
	wb := c.Submit(Request{Op: Write, Off: 1 << 40, Len: 1 << 20})
	mid := wb.Done / 2
	c.WaitUntil(mid) // the caller's own work, as real time would pass it
	before := c.Waited()
	res, w := c.DoSince(Request{Op: Flush}, since)
	if res.Done < wb.Done || w != res.Done-since || c.Waited()-before != mid+(res.Done-mid) {
		t.Errorf("DoSince: done %v (writeback %v), returned %v, counted %v; want both %v", res.Done, wb.Done, w, c.Waited()-before, res.Done-since)
	}
	// A caller that started after the device finished waits only for the flush.
	since = c.Now()
	_, w = c.DoSince(Request{Op: Flush}, since)
	if w <= 0 || w > time.Millisecond {
		t.Errorf("an idle flush waited %v", w)
	}
}

// TestRAID5HeldTailFlushed: the held trailing partial stripe is written before a flush completes.
func TestRAID5HeldTailFlushed(t *testing.T) {
	d := mustDevice(t, "raid5-6xhdd-7200")
	stripe := 5 * d.Profile().StripeUnit
	d, res := d.Serve(0, Request{Op: Write, Off: 0, Len: stripe + 4096})
	if res.Writes != 6 || res.Reads != 0 {
		t.Fatalf("stripe + 4 KiB: %d writes, %d reads; want the full stripe only (6, 0)", res.Writes, res.Reads)
	}
	_, res = d.Serve(res.Done, Request{Op: Flush})
	if res.Reads != 2 || res.Writes != 2 || res.Flushes != 6 {
		t.Errorf("flush after a held tail: %d reads, %d writes, %d flushes; want 2, 2, 6", res.Reads, res.Writes, res.Flushes)
	}
}
