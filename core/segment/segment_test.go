package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

const dir = "/p"

// fill appends n batches of 3 records (about size bytes each) starting at the
// segment's end, with timestamps 1000, 1010, ..., and returns them as stored.
func fill(t testing.TB, s *Segment, n, size int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		b := testbatch.Make(uint64(i), 3, size/3, 1000+int64(10*i))
		h, _, err := record.Next(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		h.BaseOffset = s.NextOffset()
		record.SetBaseOffset(b, h.BaseOffset)
		if err := s.Append(b, []record.Header{h}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func newMem(t testing.TB) *vfs.MemFS {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return fs
}

func readAll(t testing.TB, sl Slice) []byte {
	t.Helper()
	b, err := sl.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNames(t *testing.T) {
	if got := Name("/d", 368769, LogSuffix); got != "/d/00000000000000368769.log" {
		t.Fatalf("Name = %q", got)
	}
	for _, tc := range []struct {
		name string
		base int64
		suf  string
		ok   bool
	}{
		{"00000000000000368769.log", 368769, LogSuffix, true},
		{"00000000000000000000.timeindex", 0, TimeIndexSuffix, true},
		{"00000000000000000000.index", 0, IndexSuffix, true},
		{"0000000000000036876.log", 0, "", false},
		{"00000000000000368769.log.tmp", 0, "", false},
		{"recovery-point", 0, "", false},
		{"-0000000000000000001.log", 0, "", false},
	} {
		base, suf, ok := ParseName(tc.name)
		if ok != tc.ok || (ok && (base != tc.base || suf != tc.suf)) {
			t.Errorf("ParseName(%q) = %d, %q, %v", tc.name, base, suf, ok)
		}
	}
}

func TestAppendRead(t *testing.T) {
	fs := newMem(t)
	s, err := Create(fs, dir, 100, Options{IndexIntervalBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batches := fill(t, s, 50, 500) // ~600-byte batches, offsets 100..249
	if s.NextOffset() != 250 {
		t.Fatalf("NextOffset = %d", s.NextOffset())
	}
	if n := len(s.offsets.Entries()); n < 20 {
		t.Fatalf("only %d index entries for %d bytes at 1 KiB interval", n, s.Size())
	}
	bsize := int64(len(batches[0]))
	tests := []struct {
		name              string
		offset, max, hw   int64
		first, next, size int64
		err               error
	}{
		{"first record", 100, 1, 1 << 40, 100, 103, bsize, nil},
		{"middle of a batch returns the whole batch", 131, 1, 1 << 40, 130, 133, bsize, nil},
		{"maxBytes takes whole batches only", 100, 3*bsize + 10, 1 << 40, 100, 109, 3 * bsize, nil},
		{"at least one batch beyond maxBytes", 200, 0, 1 << 40, 199, 202, bsize, nil},
		{"stops at the high watermark", 100, 1 << 20, 112, 100, 112, 4 * bsize, nil},
		{"batch crossing the high watermark is withheld", 110, 1 << 20, 111, 0, 0, 0, ErrNotFound},
		{"to the end", 240, 1 << 20, 1 << 40, 238, 250, 4 * bsize, nil},
		{"below base reads from the start", 0, 1, 1 << 40, 100, 103, bsize, nil},
		{"at the end", 250, 1 << 20, 1 << 40, 0, 0, 0, ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sl, err := s.Read(tc.offset, tc.max, tc.hw)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			defer sl.Release()
			if sl.FirstOffset != tc.first || sl.NextOffset != tc.next || sl.Size != tc.size {
				t.Fatalf("slice [%d,%d) %d bytes; want [%d,%d) %d bytes", sl.FirstOffset, sl.NextOffset, sl.Size, tc.first, tc.next, tc.size)
			}
			got := readAll(t, sl)
			i := (sl.FirstOffset - 100) / 3
			want := bytes.Join(batches[i:i+sl.Size/bsize], nil)
			if !bytes.Equal(got, want) {
				t.Fatal("bytes read differ from bytes appended")
			}
		})
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	fs := newMem(t)
	s, _ := Create(fs, dir, 0, Options{IndexIntervalBytes: 512})
	defer s.Close()
	fill(t, s, 40, 300) // batch i has timestamps 1000+10i .. +2
	for _, tc := range []struct {
		ts   int64
		want int64
		err  error
	}{
		{0, 0, nil},
		{1000, 0, nil},
		{1003, 3, nil},
		{1010, 3, nil},
		{1012, 3, nil},
		{1013, 6, nil},
		{1392, 117, nil},
		{1393, 0, ErrNotFound},
	} {
		got, err := s.OffsetForTimestamp(tc.ts)
		if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
			t.Errorf("OffsetForTimestamp(%d) = %d, %v; want %d, %v", tc.ts, got, err, tc.want, tc.err)
		}
	}
}

// A sealed segment reopened in Trust mode reads exactly as before, with its
// indexes loaded rather than rebuilt.
func TestSealReopenTrust(t *testing.T) {
	fs := newMem(t)
	s, _ := Create(fs, dir, 0, Options{IndexIntervalBytes: 700})
	batches := fill(t, s, 30, 400)
	wantEntries := len(s.offsets.Entries())
	size, maxTs := s.Size(), s.MaxTimestamp()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, end := range []int64{90, -1} {
		r, rec, err := Open(fs, dir, 0, Options{IndexIntervalBytes: 700}, Trust, end)
		if err != nil {
			t.Fatal(err)
		}
		if rec.IndexRebuilt || rec.Truncated != 0 {
			t.Fatalf("end %d: unexpected recovery %+v", end, rec)
		}
		if r.Size() != size || r.NextOffset() != 90 || r.MaxTimestamp() != maxTs || len(r.offsets.Entries()) != wantEntries {
			t.Fatalf("end %d: reopened size %d next %d maxTs %d entries %d", end, r.Size(), r.NextOffset(), r.MaxTimestamp(), len(r.offsets.Entries()))
		}
		if r.Active() != (end < 0) {
			t.Fatalf("end %d: Active = %v", end, r.Active())
		}
		sl, err := r.Read(45, 1<<20, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, sl); !bytes.Equal(got, bytes.Join(batches[15:], nil)) {
			t.Fatal("reopened read differs")
		}
		sl.Release()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Damaged index files are detected and rebuilt from the log in Trust mode.
func TestDamagedIndexRebuilt(t *testing.T) {
	damage := map[string]func(fs vfs.FS){
		"index missing": func(fs vfs.FS) { _ = fs.Remove(Name(dir, 0, IndexSuffix)) },
		"index odd size": func(fs vfs.FS) {
			f, _ := fs.OpenReadWrite(Name(dir, 0, IndexSuffix))
			_, _ = f.Write([]byte{1, 2, 3})
			f.Close()
		},
		"index points at the wrong batch": func(fs vfs.FS) {
			f, _ := fs.OpenReadWrite(Name(dir, 0, IndexSuffix))
			size, _ := f.Size()
			_ = f.Truncate(size - 8)
			_, _ = f.Write([]byte{0, 0, 0x7f, 0, 0, 0, 0x10, 0})
			f.Close()
		},
		"time index garbage": func(fs vfs.FS) {
			f, _ := fs.Create(Name(dir, 0, TimeIndexSuffix))
			_, _ = f.Write(bytes.Repeat([]byte{0xff}, 24))
			f.Close()
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			fs := newMem(t)
			s, _ := Create(fs, dir, 0, Options{IndexIntervalBytes: 700})
			batches := fill(t, s, 30, 400)
			entries := append([]indexEntry(nil), entriesOf(s)...)
			s.Close()
			fn(fs)
			for _, end := range []int64{90, -1} {
				r, rec, err := Open(fs, dir, 0, Options{IndexIntervalBytes: 700}, Trust, end)
				if err != nil {
					t.Fatal(err)
				}
				if !rec.IndexRebuilt && end == 90 {
					t.Fatalf("damage not detected: %+v", rec)
				}
				if got := entriesOf(r); len(got) != len(entries) {
					t.Fatalf("rebuilt %d entries, want %d", len(got), len(entries))
				}
				sl, err := r.Read(60, 1<<20, 1<<40)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(readAll(t, sl), bytes.Join(batches[20:], nil)) {
					t.Fatal("read after rebuild differs")
				}
				if r.MaxTimestamp() != 1000+10*29+2 {
					t.Fatalf("max timestamp %d", r.MaxTimestamp())
				}
				sl.Release()
				r.Close()
			}
		})
	}
}

type indexEntry struct{ rel, pos uint32 }

func entriesOf(s *Segment) []indexEntry {
	var out []indexEntry
	for _, e := range s.offsets.Entries() {
		out = append(out, indexEntry{e.RelOffset, e.Position})
	}
	return out
}

// Recover mode keeps every whole valid batch and cuts the rest, whatever the damage.
func TestRecoverTails(t *testing.T) {
	type damageFn func(b []byte, batchStarts []int) []byte
	tests := []struct {
		name    string
		damage  damageFn
		keep    int // batches that must survive
		cut     bool
		wantErr error
	}{
		{"intact", func(b []byte, _ []int) []byte { return b }, 20, false, nil},
		{"torn last batch", func(b []byte, _ []int) []byte { return b[:len(b)-5] }, 19, true, record.ErrShort},
		{"torn header", func(b []byte, s []int) []byte { return b[:s[19]+30] }, 19, true, record.ErrShort},
		{"garbage appended", func(b []byte, _ []int) []byte { return append(b, 1, 2, 3, 4, 5, 6, 7) }, 20, true, record.ErrShort},
		{"zeros appended (preallocated tail)", func(b []byte, _ []int) []byte { return append(b, make([]byte, 4096)...) }, 20, true, record.ErrCorrupt},
		{"bit flip in batch 12", func(b []byte, s []int) []byte { b[s[12]+100] ^= 0x10; return b }, 12, true, record.ErrBadCRC},
		{"batch 7 claims a huge length", func(b []byte, s []int) []byte {
			b[s[7]+8], b[s[7]+9] = 0x7f, 0xff
			return b
		}, 7, true, record.ErrShort},
		{"batch 5 has the wrong base offset", func(b []byte, s []int) []byte {
			record.SetBaseOffset(b[s[5]:], 999)
			return b
		}, 5, true, errOffsets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := newMem(t)
			s, _ := Create(fs, dir, 0, Options{IndexIntervalBytes: 1000})
			batches := fill(t, s, 20, 300)
			s.Close()
			data, _ := vfs.ReadFile(fs, Name(dir, 0, LogSuffix))
			var starts []int
			for i, p := 0, 0; i < len(batches); i++ {
				starts = append(starts, p)
				p += len(batches[i])
			}
			data = tc.damage(data, starts)
			f, _ := fs.Create(Name(dir, 0, LogSuffix))
			_, _ = f.Write(data)
			f.Close()

			r, rec, err := Open(fs, dir, 0, Options{IndexIntervalBytes: 1000}, Recover, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if (rec.Truncated > 0) != tc.cut || rec.Batches != tc.keep {
				t.Fatalf("recovery %+v; want %d batches, cut %v", rec, tc.keep, tc.cut)
			}
			if tc.wantErr != nil && !errors.Is(rec.Cause, tc.wantErr) {
				t.Fatalf("cause %v, want %v", rec.Cause, tc.wantErr)
			}
			want := bytes.Join(batches[:tc.keep], nil)
			if r.Size() != int64(len(want)) || r.NextOffset() != int64(3*tc.keep) {
				t.Fatalf("size %d next %d; want %d, %d", r.Size(), r.NextOffset(), len(want), 3*tc.keep)
			}
			if got, _ := vfs.ReadFile(fs, Name(dir, 0, LogSuffix)); !bytes.Equal(got, want) {
				t.Fatal("file not cut to the valid prefix")
			}
			// Appends continue right after the valid prefix.
			more := fill(t, r, 1, 300)
			sl, err := r.Read(int64(3*tc.keep), 1<<20, 1<<40)
			if err != nil || !bytes.Equal(readAll(t, sl), more[0]) {
				t.Fatalf("append after recovery: %v", err)
			}
			sl.Release()
		})
	}
}

func TestTruncateTo(t *testing.T) {
	fs := newMem(t)
	s, _ := Create(fs, dir, 0, Options{IndexIntervalBytes: 500})
	defer s.Close()
	batches := fill(t, s, 30, 300)
	if err := s.TruncateTo(46); err != nil { // inside batch 15 (offsets 45..47): it goes whole
		t.Fatal(err)
	}
	if s.NextOffset() != 45 || s.Size() != int64(len(bytes.Join(batches[:15], nil))) {
		t.Fatalf("after truncate: next %d size %d", s.NextOffset(), s.Size())
	}
	if s.MaxTimestamp() != 1000+140+2 {
		t.Fatalf("max timestamp %d", s.MaxTimestamp())
	}
	for _, e := range s.offsets.Entries() {
		if e.RelOffset >= 45 {
			t.Fatalf("index entry %v past the truncation", e)
		}
	}
	if _, err := s.OffsetForTimestamp(1200); !errors.Is(err, ErrNotFound) {
		t.Fatalf("timestamp of a truncated batch still found: %v", err)
	}
	more := fill(t, s, 3, 300)
	sl, err := s.Read(44, 1<<20, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	if !bytes.Equal(readAll(t, sl), bytes.Join(append([][]byte{batches[14]}, more...), nil)) {
		t.Fatal("read after truncate and append differs")
	}
	if err := s.TruncateTo(0); err != nil || s.Size() != 0 || s.NextOffset() != 0 {
		t.Fatalf("truncate to base: %v, size %d, next %d", err, s.Size(), s.NextOffset())
	}
}

// A Slice keeps a deleted segment readable until released, on the OS file
// system too, and the files close after the last release.
func TestDeleteWhileReading(t *testing.T) {
	for name, fs := range map[string]vfs.FS{"mem": newMem(t), "os": vfs.Default} {
		t.Run(name, func(t *testing.T) {
			d := dir
			if name == "os" {
				d = t.TempDir()
			}
			s, err := Create(fs, d, 0, Options{})
			if err != nil {
				t.Fatal(err)
			}
			batches := fill(t, s, 5, 1000)
			if err := s.Seal(); err != nil {
				t.Fatal(err)
			}
			sl, err := s.Read(0, 1<<20, 1<<40)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Stat(Name(d, 0, LogSuffix)); err == nil {
				t.Fatal("log file still there after Delete")
			}
			if _, err := s.Read(0, 1, 1<<40); !errors.Is(err, ErrClosed) {
				t.Fatalf("read after delete: %v, want ErrClosed", err)
			}
			if !bytes.Equal(readAll(t, sl), bytes.Join(batches, nil)) {
				t.Fatal("held slice unreadable after delete")
			}
			sl.Release()
			if _, err := sl.File.ReadAt(make([]byte, 1), 0); err == nil {
				t.Fatal("file still open after the last release")
			}
		})
	}
}

func TestFits(t *testing.T) {
	fs := newMem(t)
	s, _ := Create(fs, dir, 0, Options{})
	defer s.Close()
	if !s.Fits(5000, 10, 1000) {
		t.Fatal("an empty segment must take any batch")
	}
	fill(t, s, 1, 600)
	if s.Fits(500, 10, 1000) || !s.Fits(300, 10, 1000) {
		t.Fatal("size limit not applied")
	}
	if s.Fits(1, 1<<32, 1<<30) {
		t.Fatal("relative offset overflow not detected")
	}
}
