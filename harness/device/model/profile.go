package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrProfile is wrapped by every error about a profile: an unknown name, a bad YAML, a number out of range.
var ErrProfile = errors.New("model: bad device profile")

// Layout is how a profile arranges its disks.
type Layout string

// The layouts.
const (
	Single Layout = "single" // one disk
	JBOD   Layout = "jbod"   // members concatenated
	RAID0  Layout = "raid0"  // striped, no parity
	RAID5  Layout = "raid5"  // striped with rotating parity
)

// Kind is the technology of one disk.
type Kind string

// The disk kinds.
const (
	HDD Kind = "hdd"
	SSD Kind = "ssd"
)

// Profile is a device: a layout of identical disks. Times are in milliseconds, rates in MB/s (10^6 bytes per
// second), as data sheets print them. The zero value of a field means its default (the hdd-7200 or ssd figures of
// the package doc) once validated.
type Profile struct {
	Name   string `yaml:"name"`
	Layout Layout `yaml:"layout"`
	// Disks is the number of member disks (1 for single; at least 2 for jbod and raid0, 3 for raid5).
	Disks int `yaml:"disks"`
	// StripeUnit is the chunk size in bytes of raid0 and raid5 (default 64 KiB); a multiple of 4096.
	StripeUnit int64 `yaml:"stripe_unit"`
	Disk       Disk  `yaml:"disk"`
}

// Disk is one member disk. HDD fields apply to kind hdd, SSD fields to kind ssd.
type Disk struct {
	Kind Kind `yaml:"kind"`
	// CapacityBytes is the disk's size (default 2 TB for hdd, 500 GB for ssd).
	CapacityBytes int64 `yaml:"capacity_bytes"`
	// WriteCache is the volatile on-disk write-back cache (default on, as drives ship). Use write_cache: false
	// for a disk whose cache is off (hdparm -W 0).
	WriteCache *bool `yaml:"write_cache,omitempty"`
	// CacheBytes is the write cache's size (default 64 MB).
	CacheBytes int64 `yaml:"cache_bytes"`
	// OverheadMs is the controller's time per command (default 0.1).
	OverheadMs float64 `yaml:"overhead_ms"`

	RPM         float64 `yaml:"rpm"`           // default 7200
	SeekTrackMs float64 `yaml:"seek_track_ms"` // track-to-track seek, default 0.8
	SeekAvgMs   float64 `yaml:"seek_avg_ms"`   // average over uniform random endpoints, default 8.5
	SeekFullMs  float64 `yaml:"seek_full_ms"`  // full stroke, default 16
	OuterMBps   float64 `yaml:"outer_mbps"`    // sustained rate at the outer diameter, default 138
	InnerMBps   float64 `yaml:"inner_mbps"`    // at the inner diameter, default 66
	Zones       int     `yaml:"zones"`         // default 16
	Surfaces    int     `yaml:"surfaces"`      // recording surfaces (heads), default 4

	ReadLatencyMs  float64 `yaml:"read_latency_ms"`  // ssd: per read command, default 0.1
	WriteLatencyMs float64 `yaml:"write_latency_ms"` // ssd: per write command, default 0.024
	ReadMBps       float64 `yaml:"read_mbps"`        // ssd: default 550
	WriteMBps      float64 `yaml:"write_mbps"`       // ssd: default 520
	FlushMs        float64 `yaml:"flush_ms"`         // ssd: cache flush, default 0.5
}

// WriteCacheOn reports whether the disk has its write cache on.
func (d Disk) WriteCacheOn() bool { return d.WriteCache == nil || *d.WriteCache }

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func hdd7200() Disk {
	return Disk{Kind: HDD, CapacityBytes: 2_000_000_000_000, CacheBytes: 64_000_000, OverheadMs: 0.1, RPM: 7200,
		SeekTrackMs: 0.8, SeekAvgMs: 8.5, SeekFullMs: 16, OuterMBps: 138, InnerMBps: 66, Zones: 16, Surfaces: 4}
}

func ssdDisk() Disk {
	return Disk{Kind: SSD, CapacityBytes: 500_000_000_000, CacheBytes: 512_000_000, ReadLatencyMs: 0.1,
		WriteLatencyMs: 0.024, ReadMBps: 550, WriteMBps: 520, FlushMs: 0.5}
}

func off() *bool { f := false; return &f }

// Profiles returns the named profiles, sorted by name. The array names here are examples: any LAYOUT-NxDISK works
// with ParseProfile.
func Profiles() []Profile {
	nocache := hdd7200()
	nocache.WriteCache = off()
	ps := []Profile{
		{Name: "hdd-7200", Layout: Single, Disks: 1, Disk: hdd7200()},
		{Name: "hdd-7200-nocache", Layout: Single, Disks: 1, Disk: nocache},
		{Name: "ssd", Layout: Single, Disks: 1, Disk: ssdDisk()},
	}
	for _, a := range []string{"raid5-6xhdd-7200", "raid5-6xhdd-7200-nocache", "raid0-6xhdd-7200", "jbod-6xhdd-7200", "raid5-4xssd"} {
		p, err := arrayProfile(a)
		if err != nil {
			panic(err)
		}
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			panic(err)
		}
	}
	return ps
}

var arrayName = regexp.MustCompile(`^(jbod|raid0|raid5)-([0-9]+)x(.+)$`)

func arrayProfile(name string) (Profile, error) {
	m := arrayName.FindStringSubmatch(name)
	if m == nil {
		return Profile{}, fmt.Errorf("%w: unknown profile %q (see weir disk profiles)", ErrProfile, name)
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %q: disk count: %v", ErrProfile, name, err)
	}
	var d Disk
	switch m[3] {
	case "hdd-7200":
		d = hdd7200()
	case "hdd-7200-nocache":
		d = hdd7200()
		d.WriteCache = off()
	case "ssd":
		d = ssdDisk()
	default:
		return Profile{}, fmt.Errorf("%w: %q: unknown member disk %q (hdd-7200, hdd-7200-nocache or ssd)", ErrProfile, name, m[3])
	}
	return Profile{Name: name, Layout: Layout(m[1]), Disks: n, StripeUnit: 64 << 10, Disk: d}, nil
}

// ParseProfile returns the profile named by s (a name of Profiles, an array LAYOUT-NxDISK such as raid5-4xhdd-7200,
// or the path of a YAML file of numbers, recognised by its .yaml or .yml suffix), validated.
func ParseProfile(s string) (Profile, error) {
	if strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml") {
		b, err := os.ReadFile(s)
		if err != nil {
			return Profile{}, fmt.Errorf("%w: %v", ErrProfile, err)
		}
		return ParseProfileYAML(b)
	}
	for _, p := range Profiles() {
		if p.Name == s {
			return p, nil
		}
	}
	p, err := arrayProfile(s)
	if err != nil {
		return Profile{}, err
	}
	return p, p.Validate()
}

// ParseProfileYAML reads a profile from YAML; unknown fields are errors, and missing numbers take the defaults of
// the disk's kind.
func ParseProfileYAML(b []byte) (Profile, error) {
	var p Profile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrProfile, err)
	}
	if p.Name == "" {
		p.Name = "custom"
	}
	return p, p.Validate()
}

// Validate fills defaults and rejects numbers no device has.
func (p *Profile) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrProfile, p.Name, fmt.Sprintf(format, a...))
	}
	if p.Layout == "" {
		p.Layout = Single
	}
	if p.Disks == 0 {
		p.Disks = 1
	}
	switch p.Layout {
	case Single:
		if p.Disks != 1 {
			return bad("layout single has 1 disk, not %d", p.Disks)
		}
	case JBOD, RAID0:
		if p.Disks < 2 {
			return bad("layout %s needs at least 2 disks, not %d", p.Layout, p.Disks)
		}
	case RAID5:
		if p.Disks < 3 {
			return bad("layout raid5 needs at least 3 disks, not %d", p.Disks)
		}
	default:
		return bad("unknown layout %q (single, jbod, raid0, raid5)", p.Layout)
	}
	if p.Disks > 64 {
		return bad("%d disks: at most 64", p.Disks)
	}
	if p.StripeUnit == 0 {
		p.StripeUnit = 64 << 10
	}
	if p.StripeUnit < 4096 || p.StripeUnit%4096 != 0 {
		return bad("stripe_unit %d: a positive multiple of 4096", p.StripeUnit)
	}
	d := &p.Disk
	var def Disk
	switch d.Kind {
	case HDD, "":
		d.Kind = HDD
		def = hdd7200()
	case SSD:
		def = ssdDisk()
	default:
		return bad("unknown disk kind %q (hdd, ssd)", d.Kind)
	}
	fill := func(v *float64, dv float64) {
		if *v == 0 {
			*v = dv
		}
	}
	if d.CapacityBytes == 0 {
		d.CapacityBytes = def.CapacityBytes
	}
	if d.CacheBytes == 0 {
		d.CacheBytes = def.CacheBytes
	}
	fill(&d.OverheadMs, def.OverheadMs)
	if d.Kind == HDD {
		fill(&d.RPM, def.RPM)
		fill(&d.SeekTrackMs, def.SeekTrackMs)
		fill(&d.SeekAvgMs, def.SeekAvgMs)
		fill(&d.SeekFullMs, def.SeekFullMs)
		fill(&d.OuterMBps, def.OuterMBps)
		fill(&d.InnerMBps, def.InnerMBps)
		if d.Zones == 0 {
			d.Zones = def.Zones
		}
		if d.Surfaces == 0 {
			d.Surfaces = def.Surfaces
		}
		switch {
		case d.RPM < 1000 || d.RPM > 20000:
			return bad("rpm %g: 1000..20000", d.RPM)
		case !(d.SeekTrackMs > 0 && d.SeekTrackMs <= d.SeekAvgMs && d.SeekAvgMs <= d.SeekFullMs):
			return bad("seek times %g / %g / %g ms: need 0 < track <= average <= full", d.SeekTrackMs, d.SeekAvgMs, d.SeekFullMs)
		case !(d.InnerMBps > 0 && d.InnerMBps <= d.OuterMBps):
			return bad("transfer %g → %g MB/s: need 0 < inner <= outer", d.OuterMBps, d.InnerMBps)
		case d.Zones < 1 || d.Zones > 1000:
			return bad("zones %d: 1..1000", d.Zones)
		case d.Surfaces < 1 || d.Surfaces > 64:
			return bad("surfaces %d: 1..64", d.Surfaces)
		}
		// The seek fit must be increasing: A >= 0 (B >= 0 follows from average >= track... checked too).
		a, b := seekFit(*d)
		if a < 0 || b < 0 {
			return bad("seek times %g / %g / %g ms do not fit track + A·x + B·√x with A, B >= 0 (average too close to track or full)",
				d.SeekTrackMs, d.SeekAvgMs, d.SeekFullMs)
		}
	} else {
		fill(&d.ReadLatencyMs, def.ReadLatencyMs)
		fill(&d.WriteLatencyMs, def.WriteLatencyMs)
		fill(&d.ReadMBps, def.ReadMBps)
		fill(&d.WriteMBps, def.WriteMBps)
		fill(&d.FlushMs, def.FlushMs)
		if d.ReadMBps <= 0 || d.WriteMBps <= 0 || d.ReadLatencyMs < 0 || d.WriteLatencyMs < 0 || d.FlushMs < 0 {
			return bad("ssd rates must be positive and latencies non-negative")
		}
	}
	if d.CapacityBytes < 1<<30 || d.CapacityBytes > 1<<50 {
		return bad("capacity_bytes %d: 1 GiB..1 PiB", d.CapacityBytes)
	}
	if d.CacheBytes < 0 || d.OverheadMs < 0 || math.IsNaN(d.OverheadMs) {
		return bad("cache_bytes and overhead_ms must not be negative")
	}
	return nil
}

// seekFit returns A and B of seek(x) = track + A·x + B·√x (milliseconds, x the fraction of the stroke).
func seekFit(d Disk) (a, b float64) {
	f := d.SeekFullMs - d.SeekTrackMs
	v := d.SeekAvgMs - d.SeekTrackMs
	b = 5*v - 5*f/3
	return f - b, b
}

// DataBytes is what the profile stores: every disk for single, jbod and raid0, N−1 for raid5. Its size is rounded
// down to whole stripes.
func (p Profile) DataBytes() int64 {
	switch p.Layout {
	case RAID0:
		return p.Disk.CapacityBytes / p.StripeUnit * p.StripeUnit * int64(p.Disks)
	case RAID5:
		return p.Disk.CapacityBytes / p.StripeUnit * p.StripeUnit * int64(p.Disks-1)
	default:
		return p.Disk.CapacityBytes * int64(p.Disks)
	}
}

// Summary is one line of the profile's numbers, for `weir disk profiles` and reports.
func (p Profile) Summary() string {
	d := p.Disk
	var disk string
	if d.Kind == HDD {
		cache := "cache on"
		if !d.WriteCacheOn() {
			cache = "cache off"
		}
		disk = fmt.Sprintf("hdd %.0f rpm, seek %g/%g/%g ms, %g→%g MB/s, %s, %s", d.RPM, d.SeekTrackMs, d.SeekAvgMs,
			d.SeekFullMs, d.OuterMBps, d.InnerMBps, humanBytes(d.CapacityBytes), cache)
	} else {
		disk = fmt.Sprintf("ssd %g/%g ms r/w, %g/%g MB/s, flush %g ms, %s", d.ReadLatencyMs, d.WriteLatencyMs,
			d.ReadMBps, d.WriteMBps, d.FlushMs, humanBytes(d.CapacityBytes))
	}
	switch p.Layout {
	case Single:
		return disk
	case JBOD:
		return fmt.Sprintf("jbod of %d × (%s)", p.Disks, disk)
	default:
		return fmt.Sprintf("%s of %d × (%s), stripe unit %s", p.Layout, p.Disks, disk, humanBytes(p.StripeUnit))
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e12 && n%1e11 == 0:
		return fmt.Sprintf("%g TB", float64(n)/1e12)
	case n >= 1e9 && n%1e8 == 0:
		return fmt.Sprintf("%g GB", float64(n)/1e9)
	case n >= 1e6 && n%1e5 == 0:
		return fmt.Sprintf("%g MB", float64(n)/1e6)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
