package diskfs

import (
	"testing"

	"github.com/weir-broker/weir/harness/device/model"
)

func newTestEngine(t *testing.T, profile string) *engine {
	t.Helper()
	p, err := model.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.New(p)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Profile: p, Backing: t.TempDir()}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	return newEngine(model.NewClock(d, false), o)
}

// TestEngineWriteback: buffered writes cost no device time; the fsync pays for them, and for a journal commit and
// a flush; a later fdatasync with nothing dirty and no size change costs only the flush.
func TestEngineWriteback(t *testing.T) {
	e := newTestEngine(t, "hdd-7200")
	const file, dir = 10, rootIno
	for i := range int64(16) {
		if w := e.write(file, dir, i*65536, 65536, false, false); w != 0 {
			t.Fatalf("buffered write %d waited %v", i, w)
		}
	}
	if st := e.clock.Device().Stats(); st.Requests != 0 {
		t.Fatalf("buffered writes reached the device: %+v", st)
	}
	if w := e.fsync(file, dir, false); w <= 0 {
		t.Fatalf("fsync waited %v", w)
	}
	st := e.clock.Device().Stats()
	if st.BytesWritten != 1<<20+pageSize || st.Flushes != 1 {
		t.Errorf("after fsync: %d bytes written (want 1 MiB of data and a 4 KiB journal block), %d flushes", st.BytesWritten, st.Flushes)
	}
	if e.counts.JournalCommits != 1 {
		t.Errorf("%d journal commits, want 1", e.counts.JournalCommits)
	}
	e.fsync(file, dir, true)
	if after := e.clock.Device().Stats(); after.BytesWritten != st.BytesWritten || e.counts.JournalCommits != 1 {
		t.Errorf("an fdatasync with nothing to write wrote %d bytes, %d journal commits", after.BytesWritten-st.BytesWritten, e.counts.JournalCommits)
	}
}

// TestEngineLayout: a file appended to is contiguous on the device; two files of one directory written in turn
// interleave; files of different directories are far apart.
func TestEngineLayout(t *testing.T) {
	e := newTestEngine(t, "hdd-7200")
	for i := range int64(8) {
		e.write(1, rootIno, i*pageSize, pageSize, false, false)
		e.fsync(1, rootIno, true)
	}
	if f := e.files[1]; len(f.extents) != 1 || f.extents[0].n != 8 {
		t.Errorf("a file appended to, fsynced after each page: extents %+v, want one of 8 pages", f.extents)
	}
	for i := range int64(4) {
		for _, ino := range []uint64{2, 3} {
			e.write(ino, rootIno, i*pageSize, pageSize, false, false)
			e.fsync(ino, rootIno, true)
		}
	}
	if f := e.files[2]; len(f.extents) != 4 {
		t.Errorf("two files written in turn: file 2 has extents %+v, want 4 of a page", f.extents)
	}
	e.write(4, 100, 0, pageSize, false, false)
	e.write(5, 200, 0, pageSize, false, false)
	e.syncAll()
	a, b := e.files[4].physical(0), e.files[5].physical(0)
	if d := a - b; d < groupSize/pageSize && -d < groupSize/pageSize {
		t.Errorf("files of two directories at pages %d and %d: not in different regions", a, b)
	}
}

// TestEngineCacheAndLose: reads of dirty or recently written pages are free, other reads go to the device, and a
// power cut drops the dirty pages.
func TestEngineCacheAndLose(t *testing.T) {
	e := newTestEngine(t, "ssd")
	e.write(1, rootIno, 0, 8*pageSize, false, false)
	if w := e.read(1, rootIno, 0, 8*pageSize, false); w != 0 || e.counts.CacheHits != 8 {
		t.Errorf("reading dirty pages waited %v, %d hits", w, e.counts.CacheHits)
	}
	if w := e.read(1, rootIno, 0, 8*pageSize, true); w == 0 {
		t.Error("an O_DIRECT read of cached pages did not read the device")
	}
	if lost := e.lose(); lost != 8 {
		t.Errorf("the cut dropped %d dirty pages, want 8", lost)
	}
	if _, dirty := e.countsNow(); dirty != 0 {
		t.Errorf("%d dirty bytes after the cut", dirty)
	}
}

// TestEnginePreallocate: a preallocated range takes whole runs of the file's region and the regions after it,
// skipping the journal's, keeps the pages already allocated, and stops with a short count when the device is full.
func TestEnginePreallocate(t *testing.T) {
	e := newTestEngine(t, "hdd-7200")
	per := int64(groupSize / pageSize)
	groups := int64(len(e.groupNext))
	e.write(1, rootIno, 0, pageSize, false, false)
	e.fsync(1, rootIno, false)
	if got, ok := e.preallocate(1, rootIno, 0, 3*per); got != 3*per-1 || !ok {
		t.Fatalf("preallocated %d pages (%v), want %d (the first page was allocated)", got, ok, 3*per-1)
	}
	if got, ok := e.preallocate(1, rootIno, 0, 3*per); got != 0 || !ok {
		t.Errorf("preallocating an allocated range again allocated %d pages (%v), want 0 (true)", got, ok)
	}
	f := e.files[1]
	if len(f.extents) != 1 || f.extents[0].physical != 0 || f.extents[0].n != 3*per {
		t.Errorf("extents %+v: want one run of %d pages from device page 0", f.extents, 3*per)
	}
	jg := journalStart(e.clock.Device().Capacity()) / per
	want := (groups - 3 - 1) * per // every other region but the journal's
	if got, ok := e.preallocate(2, rootIno, 0, groups*per); got != want || ok {
		t.Errorf("a range larger than the device got %d pages (%v), want the %d left (false)", got, ok, want)
	}
	for _, x := range e.files[2].extents {
		if x.physical < (jg+1)*per && x.physical+x.n > jg*per {
			t.Errorf("extent %+v overlaps the journal's region %d", x, jg)
		}
	}
	if got, ok := e.preallocate(3, rootIno, 0, 1); got != 0 || ok {
		t.Errorf("a full device preallocated %d pages (%v)", got, ok)
	}
}
