package partlog

import (
	"bytes"
	"context"
	"fmt"
	"github.com/weir-broker/weir/core/clock/clocktest"
	"hash/crc32"
	"testing"
	"time"

	"github.com/weir-broker/weir/core/internal/testbatch"
	"github.com/weir-broker/weir/core/record"
	"github.com/weir-broker/weir/core/vfs"
)

const dir = "/data/t-0"

var ctx = context.Background()

// fakeClock is the manual clock of package clocktest.
type fakeClock = clocktest.Clock

func newClock() *fakeClock { return clocktest.New(time.UnixMilli(1_700_000_000_000)) }

// model remembers what was appended, by base offset, to check a log against.
// An append that failed after the log assigned its offsets (an I/O error) is
// remembered too: its bytes may survive, unacknowledged, but nothing else may
// appear at its offsets.
type model struct {
	batches   map[int64][]byte // base offset -> batch bytes as stored
	ends      map[int64]bool   // offsets at which an append ended
	batchEnds map[int64]bool   // offsets at which a batch ended
	acked     int64            // end offset of the last append that returned
	// torn: a crash may keep part of one write, so the log may end between
	// two batches of one append.
	torn bool
}

func newModel() *model {
	return &model{batches: map[int64][]byte{}, ends: map[int64]bool{0: true}, batchEnds: map[int64]bool{0: true}}
}

// append appends batches (one append call) and records them.
func (m *model) append(t testing.TB, l *Log, batches ...[]byte) (AppendResult, error) {
	t.Helper()
	buf := bytes.Join(batches, nil)
	res, err := l.Append(ctx, buf, 7)
	if err != nil {
		if h, perr := record.ParseHeader(buf); perr != nil || h.PartitionLeaderEpoch != 7 {
			return res, err // rejected before offsets (and the epoch) were assigned
		}
		var off int64
		for b := buf; len(b) > 0; {
			h, n, _ := record.Next(b, 0)
			if n == 0 {
				break
			}
			m.batches[h.BaseOffset] = append([]byte{}, b[:n]...)
			off = h.NextOffset()
			m.batchEnds[off] = true
			b = b[n:]
		}
		m.ends[off] = true
		return res, err
	}
	off := res.BaseOffset
	for _, b := range batches {
		stored := append([]byte{}, b...)
		record.SetBaseOffset(stored, off)
		record.SetPartitionLeaderEpoch(stored, 7)
		m.batches[off] = stored
		h, _ := record.ParseHeader(stored)
		off = h.NextOffset()
		m.batchEnds[off] = true
	}
	m.ends[off] = true
	m.acked = res.NextOffset
	return res, nil
}

// readAll reads the whole log from its start with small reads.
func readAll(t testing.TB, l *Log, maxBytes int64) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		sl, err := l.Read(off, maxBytes, NoLimit)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if sl.Size == 0 {
			t.Fatalf("read %d below end %d returned nothing", off, l.EndOffset())
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		bs, err := testbatch.Split(b)
		if err != nil {
			t.Fatalf("read %d served a bad batch: %v", off, err)
		}
		out = append(out, bs...)
		off = sl.NextOffset
	}
	return out
}

// check verifies the log against the model: it starts at from, every batch it
// serves is valid and is exactly what was appended at that offset, offsets are
// contiguous, it ends where an append ended, and it holds at least everything
// below mustHave.
func (m *model) check(t testing.TB, l *Log, from, mustHave int64) {
	t.Helper()
	if l.StartOffset() != from {
		t.Fatalf("log starts at %d, want %d", l.StartOffset(), from)
	}
	next := from
	for _, b := range readAll(t, l, 1<<20) {
		h, _ := record.ParseHeader(b)
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, expected %d", h.BaseOffset, next)
		}
		want, ok := m.batches[h.BaseOffset]
		if !ok || !bytes.Equal(want, b) {
			t.Fatalf("batch at %d is not what was appended there", h.BaseOffset)
		}
		next = h.NextOffset()
	}
	if next != l.EndOffset() {
		t.Fatalf("batches end at %d, log end %d", next, l.EndOffset())
	}
	if !m.ends[next] && !(m.torn && m.batchEnds[next]) {
		t.Fatalf("log ends at %d, inside an append", next)
	}
	if next < mustHave {
		t.Fatalf("log ends at %d, but offsets below %d were acknowledged", next, mustHave)
	}
}

func memFS(t testing.TB) *vfs.MemFS {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return fs
}

func mustOpen(t testing.TB, fs vfs.FS, cfg Config) (*Log, Report) {
	t.Helper()
	l, rep, err := Open(fs, dir, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l, rep
}

// batch returns a batch of n records of about size bytes each, stamped id.
func batch(id, n, size int) []byte {
	return testbatch.Make(uint64(id), n, size, 1_700_000_000_000+int64(id)*10)
}

func segNames(l *Log) string {
	var s string
	for _, i := range l.Segments() {
		s += fmt.Sprintf("[%d,%d) ", i.Base, i.Next)
	}
	return s
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

func segmentName(base int64) string { return fmt.Sprintf("%020d.log", base) }
