package model

import (
	"sort"
	"time"
)

// Device is a profile's state: every member disk's head, cache and queue. It is a value: Serve leaves its receiver
// unchanged and returns the state after the request, so a caller can ask "what if" from any state it kept.
type Device struct {
	profile Profile
	g       *geometry // shared, never written after New
	disks   []diskState
	stats   Stats
	// held is the trailing partial stripe of a raid5 write that crossed a stripe boundary, not yet written: like
	// md's stripe cache, the array waits for the next write to continue it into a full stripe. Any other request
	// writes it first (read-modify-write).
	held Request
}

// Stats counts what a Device served since New.
type Stats struct {
	Requests     int64         // requests served
	Commands     int64         // member commands they became (after merging)
	Reads        int64         // member read commands
	Writes       int64         // member write commands
	Flushes      int64         // member flush commands
	BytesRead    int64         // by the members
	BytesWritten int64         // by the members, parity included
	Busy         time.Duration // summed over members: the time each spent on its commands
}

// Result is what one request cost.
type Result struct {
	Done                        time.Duration // when it completes (the same clock as now)
	Reads                       int           // member read commands it needed
	Writes                      int           // member write commands (data and parity)
	Flushes                     int           // member flushes
	Busy                        time.Duration // summed over members
	FullStripes, PartialStripes int           // raid5 writes: stripes written whole, and by read-modify-write or reconstruct
}

// IOs is the number of member read and write commands.
func (r Result) IOs() int { return r.Reads + r.Writes }

// New returns a device of profile p (validated here) in its initial state: heads at cylinder 0, caches empty, at
// time 0.
func New(p Profile) (Device, error) {
	if err := p.Validate(); err != nil {
		return Device{}, err
	}
	return Device{profile: p, g: newGeometry(p.Disk), disks: make([]diskState, p.Disks)}, nil
}

// Profile returns the device's profile.
func (d Device) Profile() Profile { return d.profile }

// Capacity is the device's data space in bytes: requests address [0, Capacity).
func (d Device) Capacity() int64 { return d.profile.DataBytes() }

// Stats returns the counts since New.
func (d Device) Stats() Stats { return d.stats }

// command is one member command.
type command struct {
	disk int
	op   Op
	off  int64
	n    int64
}

// Serve serves r arriving at now (the device's clock, which starts at 0) and returns the state after it and what
// it cost. Offsets wrap around the capacity; a read or write of no bytes costs nothing.
func (d Device) Serve(now time.Duration, r Request) (Device, Result) {
	if r.Op != Flush && r.Len <= 0 {
		return d, Result{Done: now}
	}
	next := d
	next.disks = append([]diskState(nil), d.disks...)
	var reads, writes []command
	var full, partial int
	if d.held.Len > 0 {
		next.held = Request{}
		if r.Op == Write && r.Off == d.held.Off+d.held.Len {
			r = Request{Op: Write, Off: d.held.Off, Len: d.held.Len + r.Len}
		} else {
			reads, writes, full, partial = d.plan(d.held)
		}
	}
	if d.profile.Layout == RAID5 && r.Op == Write {
		stripe := d.profile.StripeUnit * int64(len(d.disks)-1)
		end := r.Off + r.Len
		if tail := end / stripe * stripe; end%stripe != 0 && tail > r.Off && end <= d.Capacity() {
			next.held = Request{Op: Write, Off: tail, Len: end - tail}
			r.Len = tail - r.Off
		}
	}
	rd, wr, f, p := d.plan(r)
	reads, writes, full, partial = append(reads, rd...), append(writes, wr...), full+f, partial+p
	res := Result{Done: now, FullStripes: full, PartialStripes: partial}
	run := func(at time.Duration, cmds []command) time.Duration {
		end := at
		for _, c := range merge(cmds) {
			done, busy := d.g.serve(&next.disks[c.disk], at, c.op, c.off, c.n)
			end = max(end, done)
			res.Busy += busy
			switch c.op {
			case Read:
				res.Reads++
				next.stats.BytesRead += c.n
			case Write:
				res.Writes++
				next.stats.BytesWritten += c.n
			default:
				res.Flushes++
			}
		}
		return end
	}
	res.Done = run(run(now, reads), writes)
	next.stats.Requests++
	next.stats.Commands += int64(res.Reads + res.Writes + res.Flushes)
	next.stats.Reads += int64(res.Reads)
	next.stats.Writes += int64(res.Writes)
	next.stats.Flushes += int64(res.Flushes)
	next.stats.Busy += res.Busy
	return next, res
}

// merge sorts commands by disk and offset and joins contiguous ones of the same kind on one disk.
func merge(cmds []command) []command {
	sort.SliceStable(cmds, func(i, j int) bool {
		if cmds[i].disk != cmds[j].disk {
			return cmds[i].disk < cmds[j].disk
		}
		if fi, fj := cmds[i].op == Flush, cmds[j].op == Flush; fi != fj {
			return fj // a flush after the writes it must cover
		}
		return cmds[i].off < cmds[j].off
	})
	var out []command
	for _, c := range cmds {
		if k := len(out) - 1; k >= 0 && c.op != Flush && out[k].disk == c.disk && out[k].op == c.op && out[k].off+out[k].n == c.off {
			out[k].n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// plan splits r into member commands: reads (run first, in parallel) and writes (run when every read is done).
func (d Device) plan(r Request) (reads, writes []command, full, partial int) {
	p := d.profile
	n := len(d.disks)
	if r.Op == Flush {
		for i := range n {
			writes = append(writes, command{disk: i, op: Flush})
		}
		return nil, writes, 0, 0
	}
	capa := d.Capacity()
	off := r.Off % capa
	if off < 0 {
		off += capa
	}
	end := min(off+r.Len, capa)
	out := &writes
	if r.Op == Read {
		out = &reads
	}
	k := p.StripeUnit
	switch p.Layout {
	case Single:
		*out = append(*out, command{0, r.Op, off, end - off})
	case JBOD:
		c := p.Disk.CapacityBytes
		for at := off; at < end; {
			m := at / c
			stop := min(end, (m+1)*c)
			*out = append(*out, command{int(m), r.Op, at - m*c, stop - at})
			at = stop
		}
	case RAID0:
		for at := off; at < end; {
			chunk := at / k
			stop := min(end, (chunk+1)*k)
			*out = append(*out, command{int(chunk % int64(n)), r.Op, chunk/int64(n)*k + at%k, stop - at})
			at = stop
		}
	case RAID5:
		data := int64(n - 1)
		stripe := k * data
		for at := off; at < end; {
			s := at / stripe
			stop := min(end, (s+1)*stripe)
			parity := n - 1 - int(s%int64(n))
			member := func(i int64) int { return (parity + 1 + int(i)) % n }
			lo, hi := at-s*stripe, stop-s*stripe // within the stripe's data
			base := s * k                        // the stripe's offset on every member
			if r.Op == Read {
				for a := lo; a < hi; {
					i := a / k
					b := min(hi, (i+1)*k)
					reads = append(reads, command{member(i), Read, base + a%k, b - a})
					a = b
				}
				at = stop
				continue
			}
			if lo == 0 && hi == stripe {
				full++
				for i := range data {
					writes = append(writes, command{member(i), Write, base, k})
				}
				writes = append(writes, command{parity, Write, base, k})
				at = stop
				continue
			}
			partial++
			// The parity range covers every touched byte offset within a chunk.
			first, last := lo/k, (hi-1)/k
			plo, phi := k, int64(0)
			touched := map[int64]bool{}
			for i := first; i <= last; i++ {
				a, b := max(lo, i*k), min(hi, (i+1)*k)
				touched[i] = true
				plo, phi = min(plo, a-i*k), max(phi, b-i*k)
				writes = append(writes, command{member(i), Write, base + a - i*k, b - a})
			}
			writes = append(writes, command{parity, Write, base + plo, phi - plo})
			t := int64(len(touched))
			if t+1 <= data-t { // read-modify-write: old data and old parity
				for i := first; i <= last; i++ {
					a, b := max(lo, i*k), min(hi, (i+1)*k)
					reads = append(reads, command{member(i), Read, base + a - i*k, b - a})
				}
				reads = append(reads, command{parity, Read, base + plo, phi - plo})
			} else { // reconstruct-write: the untouched data chunks
				for i := range data {
					if !touched[i] {
						reads = append(reads, command{member(i), Read, base + plo, phi - plo})
					}
				}
			}
			at = stop
		}
	}
	return reads, writes, full, partial
}
