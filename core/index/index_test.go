package index

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

func TestOffsetsLookup(t *testing.T) {
	x := NewOffsets()
	for _, e := range []OffsetEntry{{10, 4096}, {20, 8200}, {35, 12300}} {
		x.Append(e)
	}
	tests := []struct {
		rel    uint32
		want   OffsetEntry
		wantOK bool
	}{
		{0, OffsetEntry{}, false},
		{9, OffsetEntry{}, false},
		{10, OffsetEntry{10, 4096}, true},
		{19, OffsetEntry{10, 4096}, true},
		{20, OffsetEntry{20, 8200}, true},
		{34, OffsetEntry{20, 8200}, true},
		{35, OffsetEntry{35, 12300}, true},
		{1 << 31, OffsetEntry{35, 12300}, true},
	}
	for _, tc := range tests {
		got, ok := x.Lookup(tc.rel)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("Lookup(%d) = %v, %v; want %v, %v", tc.rel, got, ok, tc.want, tc.wantOK)
		}
	}
	if got, ok := x.LookupPosition(8199); !ok || got.RelOffset != 10 {
		t.Errorf("LookupPosition(8199) = %v, %v", got, ok)
	}
}

func TestTimesLookupAndMaybeAppend(t *testing.T) {
	x := NewTimes()
	if !x.MaybeAppend(TimeEntry{100, 5}) || !x.MaybeAppend(TimeEntry{200, 9}) {
		t.Fatal("growing entries refused")
	}
	if x.MaybeAppend(TimeEntry{200, 12}) || x.MaybeAppend(TimeEntry{150, 12}) || x.MaybeAppend(TimeEntry{300, 8}) {
		t.Fatal("entry without timestamp growth, or going back in offsets, accepted")
	}
	tests := []struct {
		ts     int64
		want   TimeEntry
		wantOK bool
	}{
		{50, TimeEntry{}, false},
		{100, TimeEntry{}, false}, // strictly below: a record at exactly 100 may precede offset 5
		{101, TimeEntry{100, 5}, true},
		{200, TimeEntry{100, 5}, true},
		{201, TimeEntry{200, 9}, true},
	}
	for _, tc := range tests {
		got, ok := x.Lookup(tc.ts)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("Lookup(%d) = %v, %v; want %v, %v", tc.ts, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestWriteLoadTruncate(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/d/0.index")
	if err != nil {
		t.Fatal(err)
	}
	x := NewOffsets()
	for i := uint32(1); i <= 100; i++ {
		x.Append(OffsetEntry{i * 10, i * 4096})
		if i%7 == 0 {
			if err := x.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !x.Pending() {
		t.Fatal("entries 99 and 100 should be pending")
	}
	if err := x.Sync(f); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != 100*OffsetEntrySize {
		t.Fatalf("file size %d, want %d", size, 100*OffsetEntrySize)
	}
	y, err := LoadOffsets(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Entries()) != 100 || y.Entries()[99] != (OffsetEntry{1000, 400 * 1024}) {
		t.Fatalf("loaded %d entries, last %v", len(y.Entries()), y.Entries()[len(y.Entries())-1])
	}
	if err := x.TruncateFrom(505, f); err != nil {
		t.Fatal(err)
	}
	if last, _ := x.Last(); last.RelOffset != 500 {
		t.Fatalf("after truncate last = %v", last)
	}
	if size, _ := f.Size(); size != 50*OffsetEntrySize {
		t.Fatalf("file size after truncate %d", size)
	}
	x.Append(OffsetEntry{600, 300000})
	if err := x.Write(f); err != nil {
		t.Fatal(err)
	}
	z, err := LoadOffsets(f)
	if err != nil || len(z.Entries()) != 51 {
		t.Fatalf("reload after truncate+append: %d entries, %v", len(z.Entries()), err)
	}

	tf, _ := fs.Create("/d/0.timeindex")
	ti := NewTimes()
	ti.MaybeAppend(TimeEntry{1000, 3})
	ti.MaybeAppend(TimeEntry{2000, 7})
	if err := ti.Sync(tf); err != nil {
		t.Fatal(err)
	}
	tl, err := LoadTimes(tf)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := tl.Last(); last != (TimeEntry{2000, 7}) {
		t.Fatalf("time index last = %v", last)
	}
	if err := ti.TruncateFrom(6, tf); err != nil {
		t.Fatal(err)
	}
	if last, _ := ti.Last(); last != (TimeEntry{1000, 3}) {
		t.Fatalf("time index after truncate: %v", last)
	}
}

func TestLoadCorrupt(t *testing.T) {
	entry := func(rel, pos uint32) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint32(b, rel)
		binary.BigEndian.PutUint32(b[4:], pos)
		return b
	}
	cat := func(bs ...[]byte) (out []byte) {
		for _, b := range bs {
			out = append(out, b...)
		}
		return
	}
	tests := []struct {
		name    string
		data    []byte
		corrupt bool
	}{
		{"empty", nil, false},
		{"valid", cat(entry(1, 10), entry(2, 20)), false},
		{"odd size", cat(entry(1, 10), []byte{1, 2, 3}), true},
		{"offset not increasing", cat(entry(2, 10), entry(2, 20)), true},
		{"position going back", cat(entry(1, 20), entry(2, 10)), true},
		{"zeros", make([]byte, 16), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			f, _ := fs.Create("/x.index")
			if _, err := f.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			_, err := LoadOffsets(f)
			if got := errors.Is(err, ErrCorrupt); got != tc.corrupt {
				t.Fatalf("LoadOffsets err = %v, corrupt %v, want %v", err, got, tc.corrupt)
			}
		})
	}
}

// Readers never see a torn or reordered entry while the writer appends and
// grows the slice.
func TestConcurrentReaders(t *testing.T) {
	x := NewOffsets()
	const n = 20000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				es := x.Entries()
				for i, e := range es {
					if e.RelOffset != uint32(i+1) || e.Position != uint32(i+1)*8 {
						t.Errorf("entry %d = %v", i, e)
						return
					}
				}
				if len(es) > 0 {
					if e, ok := x.Lookup(uint32(len(es))); !ok || e.RelOffset != uint32(len(es)) {
						t.Errorf("Lookup(%d) = %v, %v", len(es), e, ok)
						return
					}
				}
			}
		}()
	}
	for i := uint32(1); i <= n; i++ {
		x.Append(OffsetEntry{i, i * 8})
	}
	close(stop)
	wg.Wait()
	if len(x.Entries()) != n {
		t.Fatalf("%d entries", len(x.Entries()))
	}
}

// FuzzLoad feeds damaged index files to both loaders: they never panic, and
// whatever they accept is well ordered and round-trips through Write.
func FuzzLoad(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Add(make([]byte, 12))
	f.Add(make([]byte, 24))
	valid := []byte{0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0, 0, 20}
	f.Add(valid)
	f.Add(append(append([]byte{}, valid...), 0xff, 0xfe, 0x01))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := vfs.NewMem()
		file, _ := fs.Create("/i")
		_, _ = file.Write(data)
		if x, err := LoadOffsets(file); err == nil {
			es := x.Entries()
			for i := 1; i < len(es); i++ {
				if es[i].RelOffset <= es[i-1].RelOffset || es[i].Position <= es[i-1].Position {
					t.Fatalf("accepted unordered entries %v, %v", es[i-1], es[i])
				}
			}
			out, _ := fs.Create("/o")
			x.Reset()
			for _, e := range es {
				x.Append(e)
			}
			if err := x.Write(out); err != nil {
				t.Fatal(err)
			}
			if got, _ := vfs.ReadFile(fs, "/o"); string(got) != string(data) {
				t.Fatalf("round trip changed the bytes")
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error class: %v", err)
		}
		if x, err := LoadTimes(file); err == nil {
			es := x.Entries()
			for i := 1; i < len(es); i++ {
				if es[i].Timestamp <= es[i-1].Timestamp || es[i].RelOffset < es[i-1].RelOffset {
					t.Fatalf("accepted unordered time entries %v, %v", es[i-1], es[i])
				}
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}

func BenchmarkLookup(b *testing.B) {
	x := NewOffsets()
	for i := uint32(1); i <= 262144; i++ { // a full 1 GiB segment at 4 KiB intervals
		x.Append(OffsetEntry{i * 4, i * 4096})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x.Lookup(uint32(i*7919) % (262144 * 4))
	}
}
