package segment

import (
	"bytes"
	"testing"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/vfs"
)

// validLog returns the bytes of a log file of n batches (3 records each) from
// base 0, and where each batch starts.
func validLog(t testing.TB, n int) ([]byte, []int) {
	fs := newMem(t)
	s, err := Create(fs, dir, 0, Options{IndexIntervalBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	batches := fill(t, s, n, 120)
	s.Close()
	var starts []int
	p := 0
	for _, b := range batches {
		starts = append(starts, p)
		p += len(b)
	}
	data, _ := vfs.ReadFile(fs, Name(dir, 0, LogSuffix))
	return data, starts
}

// FuzzRecoverTail cuts a valid log anywhere and appends arbitrary bytes:
// recovery never fails or panics, keeps every whole batch before the cut, and
// leaves only whole, valid, contiguous batches.
func FuzzRecoverTail(f *testing.F) {
	valid, starts := validLog(f, 12)
	f.Add(uint16(len(valid)), []byte{})
	f.Add(uint16(0), []byte{})
	f.Add(uint16(starts[5]), make([]byte, 61))
	f.Add(uint16(starts[5]+20), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint16(len(valid)), bytes.Repeat([]byte{0}, 200))
	f.Add(uint16(starts[3]), valid[starts[3]:starts[4]]) // a replayed batch (wrong offset)
	f.Add(uint16(len(valid)), append([]byte{0, 0, 0, 0, 0, 0, 0, 36, 0x7f, 0xff, 0xff, 0xff}, make([]byte, 60)...))
	f.Fuzz(func(t *testing.T, cut uint16, garbage []byte) {
		c := int(cut) % (len(valid) + 1)
		data := append(append([]byte{}, valid[:c]...), garbage...)
		fs := newMem(t)
		w, _ := fs.Create(Name(dir, 0, LogSuffix))
		_, _ = w.Write(data)
		w.Close()
		s, rec, err := Open(fs, dir, 0, Options{IndexIntervalBytes: 256}, Recover, -1)
		if err != nil {
			t.Fatalf("recover: %v", err)
		}
		defer s.Close()
		whole := 0 // batches that end at or before the cut
		for i := range starts {
			end := len(valid)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			if end <= c {
				whole++
			}
		}
		if rec.Batches < whole {
			t.Fatalf("kept %d batches, but %d were whole before the cut", rec.Batches, whole)
		}
		got, _ := vfs.ReadFile(fs, Name(dir, 0, LogSuffix))
		if int64(len(got)) != s.Size() {
			t.Fatalf("file %d bytes, segment says %d", len(got), s.Size())
		}
		batches, err := testbatch.Split(got)
		if err != nil {
			t.Fatalf("recovered log holds a bad batch: %v", err)
		}
		next := int64(0)
		for _, b := range batches {
			sl, err := s.Read(next, 1, 1<<40)
			if err != nil {
				t.Fatalf("read %d: %v", next, err)
			}
			rb, _ := sl.Bytes()
			sl.Release()
			if !bytes.Equal(rb, b) {
				t.Fatalf("read at %d differs from file", next)
			}
			next = sl.NextOffset
		}
		if next != s.NextOffset() {
			t.Fatalf("batches end at %d, segment at %d", next, s.NextOffset())
		}
	})
}

// FuzzDamagedIndex writes arbitrary bytes as a sealed segment's offset index:
// Open either trusts a consistent index or rebuilds it, and every read still
// returns the right batches.
func FuzzDamagedIndex(f *testing.F) {
	valid, starts := validLog(f, 12)
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Add([]byte{0, 0, 0, 6, 0, 0, 1, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, idx []byte) {
		fs := newMem(t)
		w, _ := fs.Create(Name(dir, 0, LogSuffix))
		_, _ = w.Write(valid)
		w.Close()
		w, _ = fs.Create(Name(dir, 0, IndexSuffix))
		_, _ = w.Write(idx)
		w.Close()
		s, _, err := Open(fs, dir, 0, Options{IndexIntervalBytes: 256}, Trust, int64(3*len(starts)))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		for i, p := range starts {
			sl, err := s.Read(int64(3*i+1), 1, 1<<40)
			if err != nil {
				t.Fatalf("read batch %d: %v", i, err)
			}
			if sl.Pos != int64(p) || sl.FirstOffset != int64(3*i) {
				t.Fatalf("batch %d found at %d (offset %d), want %d", i, sl.Pos, sl.FirstOffset, p)
			}
			sl.Release()
		}
	})
}
