package model

import (
	"math"
	"time"
)

// Op is what a request asks of the device.
type Op uint8

// The operations.
const (
	Read  Op = iota // read Len bytes at Off
	Write           // write Len bytes at Off
	Flush           // write the volatile caches to the media (fsync's FLUSH CACHE); Off and Len unused
)

func (o Op) String() string {
	switch o {
	case Read:
		return "read"
	case Write:
		return "write"
	case Flush:
		return "flush"
	}
	return "op?"
}

// Request is one command to the device: Off and Len are bytes of the device's data space ([Device.Capacity]).
type Request struct {
	Op       Op
	Off, Len int64
}

// geometry is one disk's fixed numbers, derived from its Disk once.
type geometry struct {
	kind     Kind
	overhead time.Duration
	cacheOn  bool
	cache    int64
	capacity int64

	// hdd
	rev        time.Duration
	zoneStart  []int64   // first byte of each zone; len zones+1, the last is the capacity
	zoneRate   []float64 // bytes per second
	trackBytes []float64 // bytes per track (rate × revolution)
	cylPerZone int64
	cyls       int64
	seekTrack  float64 // ms
	seekA      float64
	seekB      float64

	// ssd
	readLat, writeLat, flushLat time.Duration
	readRate, writeRate         float64 // bytes per second
}

func newGeometry(d Disk) *geometry {
	g := &geometry{kind: d.Kind, overhead: ms(d.OverheadMs), cacheOn: d.WriteCacheOn(), cache: d.CacheBytes,
		capacity: d.CapacityBytes}
	if d.Kind == SSD {
		g.readLat, g.writeLat, g.flushLat = ms(d.ReadLatencyMs), ms(d.WriteLatencyMs), ms(d.FlushMs)
		g.readRate, g.writeRate = d.ReadMBps*1e6, d.WriteMBps*1e6
		return g
	}
	g.rev = time.Duration(float64(time.Minute) / d.RPM)
	z := d.Zones
	var perCyl float64 // bytes in one cylinder of every zone, summed
	for i := 0; i < z; i++ {
		rate := d.OuterMBps * 1e6
		if z > 1 {
			rate -= (d.OuterMBps - d.InnerMBps) * 1e6 * float64(i) / float64(z-1)
		}
		track := rate * g.rev.Seconds()
		g.zoneRate = append(g.zoneRate, rate)
		g.trackBytes = append(g.trackBytes, track)
		perCyl += track * float64(d.Surfaces)
	}
	g.cylPerZone = int64(math.Ceil(float64(d.CapacityBytes) / perCyl))
	g.cyls = g.cylPerZone * int64(z)
	var at int64
	for i := 0; i < z; i++ {
		g.zoneStart = append(g.zoneStart, at)
		at += int64(g.trackBytes[i] * float64(d.Surfaces) * float64(g.cylPerZone))
	}
	g.zoneStart = append(g.zoneStart, max(at, d.CapacityBytes))
	g.seekTrack = d.SeekTrackMs
	g.seekA, g.seekB = seekFit(d)
	return g
}

// locate returns the zone, cylinder and angle (a fraction of a turn) of byte off.
func (g *geometry) locate(off int64) (zone int, cyl int64, angle float64) {
	for zone = 0; zone < len(g.zoneRate)-1 && off >= g.zoneStart[zone+1]; zone++ {
	}
	in := float64(off - g.zoneStart[zone])
	tracks := in / g.trackBytes[zone]
	surfaces := float64(g.zoneStart[zone+1]-g.zoneStart[zone]) / (g.trackBytes[zone] * float64(g.cylPerZone))
	cyl = int64(zone)*g.cylPerZone + min(int64(tracks/surfaces), g.cylPerZone-1)
	return zone, cyl, tracks - math.Floor(tracks)
}

// seek is the time to move the head d cylinders.
func (g *geometry) seek(d int64) time.Duration {
	if d < 0 {
		d = -d
	}
	if d == 0 {
		return 0
	}
	x := float64(d) / float64(g.cyls)
	return ms(g.seekTrack + g.seekA*x + g.seekB*math.Sqrt(x))
}

// diskState is one disk's moving parts.
type diskState struct {
	cyl      int64         // where the head is
	free     time.Duration // when the media (head, or flash) has done all it was given
	lastEnd  int64         // the byte after the last media transfer
	lastRead bool          // the last media transfer was a read
	pending  []pending     // writes in the volatile cache not yet on the media, oldest first
}

type pending struct {
	done  time.Duration // when it is on the media
	bytes int64
}

// media runs one transfer on the media starting at start (the head free, the command decoded) and returns when it
// ends.
func (g *geometry) media(s *diskState, start time.Duration, op Op, off, n int64) time.Duration {
	zone, cyl, angle := g.locate(off)
	transfer := time.Duration(float64(n) / g.zoneRate[zone] * float64(time.Second))
	var end time.Duration
	switch {
	case off == s.lastEnd && op == Read && s.lastRead:
		end = start + transfer // read-ahead kept reading
	case off == s.lastEnd && op == Write && !s.lastRead && start == s.free && s.free > 0:
		end = start + transfer // continues the previous write back to back
	default:
		arrive := start + g.seek(cyl-s.cyl)
		head := float64(arrive%g.rev) / float64(g.rev)
		wait := angle - head
		if wait < 0 {
			wait++
		}
		end = arrive + time.Duration(wait*float64(g.rev)) + transfer
	}
	_, s.cyl, _ = g.locate(min(off+n, g.capacity-1))
	s.lastEnd, s.lastRead, s.free = off+n, op == Read, end
	return end
}

// serve runs one command arriving at now on a disk and returns when it completes and how long the disk was busy
// with it. s must not share its pending slice with another state (serve only appends through a full slice).
func (g *geometry) serve(s *diskState, now time.Duration, op Op, off, n int64) (done, busy time.Duration) {
	if g.kind == SSD {
		start := max(now, s.free)
		switch op {
		case Read:
			done = start + g.readLat + time.Duration(float64(n)/g.readRate*float64(time.Second))
		case Write:
			done = start + g.writeLat + time.Duration(float64(n)/g.writeRate*float64(time.Second))
		default:
			done = start + g.flushLat
		}
		s.free = done
		return done, done - start
	}
	for len(s.pending) > 0 && s.pending[0].done <= now {
		s.pending = s.pending[1:]
	}
	before := max(now, s.free)
	switch {
	case op == Flush:
		done = max(now, s.free) + g.overhead
		s.pending = nil
		s.free = done
		return done, done - before
	case op == Read || !g.cacheOn || n > g.cache:
		done = g.media(s, max(now, s.free)+g.overhead, op, off, n)
		return done, done - before
	}
	// A write into the cache: acknowledged once there is room, on the media later.
	ack := now
	var cached int64
	for _, p := range s.pending {
		cached += p.bytes
	}
	for i := 0; cached+n > g.cache && i < len(s.pending); i++ {
		cached -= s.pending[i].bytes
		ack = s.pending[i].done
	}
	end := g.media(s, max(now+g.overhead, s.free), op, off, n)
	s.pending = append(s.pending[:len(s.pending):len(s.pending)], pending{done: end, bytes: n})
	return ack + g.overhead, end - before
}
