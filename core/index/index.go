package index

import (
	"encoding/binary"
	"sort"

	"github.com/weir-broker/weir/core/vfs"
)

// Entry sizes on disk.
const (
	OffsetEntrySize = 8
	TimeEntrySize   = 12
)

// OffsetEntry says the batch with base offset segmentBase+RelOffset starts at
// byte Position of the log file.
type OffsetEntry struct {
	RelOffset uint32
	Position  uint32
}

// TimeEntry says every record below offset segmentBase+RelOffset has a
// timestamp of at most Timestamp.
type TimeEntry struct {
	Timestamp int64
	RelOffset uint32
}

type offsetCodec struct{}

func (offsetCodec) size() int { return OffsetEntrySize }
func (offsetCodec) put(b []byte, e OffsetEntry) {
	binary.BigEndian.PutUint32(b[0:], e.RelOffset)
	binary.BigEndian.PutUint32(b[4:], e.Position)
}
func (offsetCodec) get(b []byte) OffsetEntry {
	return OffsetEntry{RelOffset: binary.BigEndian.Uint32(b[0:]), Position: binary.BigEndian.Uint32(b[4:])}
}
func (offsetCodec) ordered(p, n OffsetEntry) bool {
	return n.RelOffset > p.RelOffset && n.Position > p.Position
}

type timeCodec struct{}

func (timeCodec) size() int { return TimeEntrySize }
func (timeCodec) put(b []byte, e TimeEntry) {
	binary.BigEndian.PutUint64(b[0:], uint64(e.Timestamp))
	binary.BigEndian.PutUint32(b[8:], e.RelOffset)
}
func (timeCodec) get(b []byte) TimeEntry {
	return TimeEntry{Timestamp: int64(binary.BigEndian.Uint64(b[0:])), RelOffset: binary.BigEndian.Uint32(b[8:])}
}
func (timeCodec) ordered(p, n TimeEntry) bool {
	return n.Timestamp > p.Timestamp && n.RelOffset >= p.RelOffset
}

// Offsets is a segment's offset index.
type Offsets struct {
	t table[OffsetEntry, offsetCodec]
}

// NewOffsets returns an empty index.
func NewOffsets() *Offsets {
	x := &Offsets{}
	x.t.init(nil, 0)
	return x
}

// LoadOffsets reads the offset index in f (it does not keep f). It returns ErrCorrupt (wrapped) for a
// damaged file; the caller then rebuilds the index from the log.
func LoadOffsets(f vfs.File) (*Offsets, error) {
	x := &Offsets{}
	if err := x.t.load(f); err != nil {
		return nil, err
	}
	return x, nil
}

// Append adds an entry; it must be ordered after the last one (Check enforces that
// for loaded files; the segment only appends in order).
func (x *Offsets) Append(e OffsetEntry) { x.t.append(e) }

// Lookup returns the entry with the greatest RelOffset <= rel, or false when rel
// lies before the first entry (scan from position 0).
func (x *Offsets) Lookup(rel uint32) (OffsetEntry, bool) {
	es := x.t.snapshot()
	i := sort.Search(len(es), func(i int) bool { return es[i].RelOffset > rel })
	if i == 0 {
		return OffsetEntry{}, false
	}
	return es[i-1], true
}

// LookupPosition returns the entry with the greatest Position <= pos.
func (x *Offsets) LookupPosition(pos uint32) (OffsetEntry, bool) {
	es := x.t.snapshot()
	i := sort.Search(len(es), func(i int) bool { return es[i].Position > pos })
	if i == 0 {
		return OffsetEntry{}, false
	}
	return es[i-1], true
}

// Entries returns the entries visible now; the caller must not modify them.
func (x *Offsets) Entries() []OffsetEntry { return x.t.snapshot() }

// Last returns the last entry.
func (x *Offsets) Last() (OffsetEntry, bool) {
	es := x.t.snapshot()
	if len(es) == 0 {
		return OffsetEntry{}, false
	}
	return es[len(es)-1], true
}

// TruncateFrom drops every entry with RelOffset >= rel, in memory and in f.
func (x *Offsets) TruncateFrom(rel uint32, f vfs.File) error {
	es := x.t.snapshot()
	return x.t.truncate(sort.Search(len(es), func(i int) bool { return es[i].RelOffset >= rel }), f)
}

// Write appends the entries not yet written to f, the index file, without fsync.
// The index remembers how many entries f holds; pass the same file every time.
func (x *Offsets) Write(f vfs.File) error { return x.t.write(f) }

// Sync writes pending entries to f and fsyncs it.
func (x *Offsets) Sync(f vfs.File) error { return x.t.sync(f) }

// Pending reports whether some entries are not in the file yet.
func (x *Offsets) Pending() bool { return x.t.pending() }

// Reset drops every entry; the caller truncates the file to zero.
func (x *Offsets) Reset() { x.t.reset() }

// MemBytes is the heap held by the entries.
func (x *Offsets) MemBytes() int { return x.t.memBytes() }

// Times is a segment's time index.
type Times struct{ t table[TimeEntry, timeCodec] }

// NewTimes returns an empty index.
func NewTimes() *Times {
	x := &Times{}
	x.t.init(nil, 0)
	return x
}

// LoadTimes reads the time index in f (it does not keep f); ErrCorrupt for a damaged file.
func LoadTimes(f vfs.File) (*Times, error) {
	x := &Times{}
	if err := x.t.load(f); err != nil {
		return nil, err
	}
	return x, nil
}

// MaybeAppend adds e if its timestamp is greater than the last entry's (the time
// index only records growth); it reports whether it did.
func (x *Times) MaybeAppend(e TimeEntry) bool {
	if last, ok := x.Last(); ok && (e.Timestamp <= last.Timestamp || e.RelOffset < last.RelOffset) {
		return false
	}
	x.t.append(e)
	return true
}

// Lookup returns the entry with the greatest Timestamp < ts, or false when there
// is none (scan from the start of the segment).
func (x *Times) Lookup(ts int64) (TimeEntry, bool) {
	es := x.t.snapshot()
	i := sort.Search(len(es), func(i int) bool { return es[i].Timestamp >= ts })
	if i == 0 {
		return TimeEntry{}, false
	}
	return es[i-1], true
}

// Last returns the last entry.
func (x *Times) Last() (TimeEntry, bool) {
	es := x.t.snapshot()
	if len(es) == 0 {
		return TimeEntry{}, false
	}
	return es[len(es)-1], true
}

// Entries returns the entries visible now; the caller must not modify them.
func (x *Times) Entries() []TimeEntry { return x.t.snapshot() }

// TruncateFrom drops every entry with RelOffset > rel, in memory and in f: an entry (T, r) with r <= rel
// still holds once the log ends at base+rel.
func (x *Times) TruncateFrom(rel uint32, f vfs.File) error {
	es := x.t.snapshot()
	return x.t.truncate(sort.Search(len(es), func(i int) bool { return es[i].RelOffset > rel }), f)
}

// Write appends the entries not yet written to f, the index file, without fsync.
// The index remembers how many entries f holds; pass the same file every time.
func (x *Times) Write(f vfs.File) error { return x.t.write(f) }

// Sync writes pending entries to f and fsyncs it.
func (x *Times) Sync(f vfs.File) error { return x.t.sync(f) }

// Pending reports whether some entries are not in the file yet.
func (x *Times) Pending() bool { return x.t.pending() }

// Reset drops every entry; the caller truncates the file to zero.
func (x *Times) Reset() { x.t.reset() }

// MemBytes is the heap held by the entries.
func (x *Times) MemBytes() int { return x.t.memBytes() }
