package filecache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-broker/weir/core/vfs"
)

// countingFS counts the descriptors the files it opened hold, and the
// most ever held at once.
type countingFS struct {
	vfs.FS
	open, peak atomic.Int64
	syncs      atomic.Int64
}

func (c *countingFS) track(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return &countedFile{File: f, fs: c}, nil
}

func (c *countingFS) Create(name string) (vfs.File, error) { return c.track(c.FS.Create(name)) }
func (c *countingFS) OpenReadWrite(name string) (vfs.File, error) {
	return c.track(c.FS.OpenReadWrite(name))
}

type countedFile struct {
	vfs.File
	fs     *countingFS
	closed bool
}

func (f *countedFile) Sync() error { f.fs.syncs.Add(1); return f.File.Sync() }
func (f *countedFile) Close() error {
	if !f.closed {
		f.closed = true
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

func newFS(t *testing.T) (*countingFS, string) {
	t.Helper()
	return &countingFS{FS: vfs.Default}, t.TempDir()
}

func readAll(t *testing.T, h *File) []byte {
	t.Helper()
	n, err := h.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := h.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLimitKeepsDescriptorsAndContents(t *testing.T) {
	fsys, dir := newFS(t)
	c := New(10)
	var hs []*File
	for i := range 100 {
		h, err := c.Create(fsys, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(h, "first %d;", i); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	// A second round reopens the files the first one closed: writes continue
	// at their ends.
	for i, h := range hs {
		if _, err := fmt.Fprintf(h, "second %d;", i); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range hs {
		if got, want := string(readAll(t, h)), fmt.Sprintf("first %d;second %d;", i, i); got != want {
			t.Fatalf("file %d holds %q, want %q", i, got, want)
		}
	}
	st := c.Stats()
	if peak := fsys.peak.Load(); peak > 10 {
		t.Fatalf("%d descriptors open at once, limit 10", peak)
	}
	if st.Open != fsys.open.Load() || st.Open > 10 {
		t.Fatalf("stats say %d open, the file system %d (limit 10)", st.Open, fsys.open.Load())
	}
	if st.Evictions < 180 || st.Overflows != 0 || st.Misses < 190 {
		t.Fatalf("stats %+v: want >= 180 evictions, >= 190 misses, no overflow", st)
	}
	for _, h := range hs {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fsys.open.Load(); n != 0 || c.Stats().Open != 0 {
		t.Fatalf("%d descriptors (stats %d) open after every Close", n, c.Stats().Open)
	}
}

func TestRecentlyUsedStayOpen(t *testing.T) {
	fsys, dir := newFS(t)
	c := New(4)
	hot, err := c.Create(fsys, filepath.Join(dir, "hot"))
	if err != nil {
		t.Fatal(err)
	}
	if err := hot.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		h, err := c.Create(fsys, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Sync(); err != nil {
			t.Fatal(err)
		}
		before := c.Stats().Misses
		if _, err := hot.Size(); err != nil { // used between every two opens
			t.Fatal(err)
		}
		if c.Stats().Misses != before {
			t.Fatalf("round %d: the file used every round was closed", i)
		}
	}
}

func TestPinnedFilesStayOpenAndPinRefusedWhenAllPinned(t *testing.T) {
	fsys, dir := newFS(t)
	c := New(3)
	var pinned []vfs.File
	var hs []*File
	for i := range 3 {
		h := c.Open(fsys, filepath.Join(dir, fmt.Sprint(i)))
		if err := vfs.WriteFileSynced(fsys, h.Name(), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		f, err := h.Pin(false)
		if err != nil {
			t.Fatal(err)
		}
		pinned, hs = append(pinned, f), append(hs, h)
	}
	extra := c.Open(fsys, filepath.Join(dir, "extra"))
	if err := vfs.WriteFileSynced(fsys, extra.Name(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := extra.Pin(false); !errors.Is(err, ErrBudget) {
		t.Fatalf("Pin with every file pinned: %v, want ErrBudget", err)
	}
	if c.Stats().Refusals != 1 || fsys.open.Load() != 3 {
		t.Fatalf("stats %+v, %d open: want one refusal and 3 open", c.Stats(), fsys.open.Load())
	}
	// The log's own uses go through, over the limit.
	if n, err := extra.Size(); err != nil || n != 1 {
		t.Fatalf("Size over the limit: %d, %v", n, err)
	}
	if st := c.Stats(); st.Overflows != 1 {
		t.Fatalf("stats %+v: want one overflow", st)
	}
	for i, f := range pinned {
		var b [1]byte
		if _, err := f.ReadAt(b[:], 0); err != nil || b[0] != byte(i) {
			t.Fatalf("pinned file %d: read %v, %v", i, b, err)
		}
		hs[i].Unpin()
	}
	if _, err := extra.Pin(false); err != nil {
		t.Fatalf("Pin once files are unpinned: %v", err)
	}
	extra.Unpin()
	if n := c.Stats().Open; n > 3 {
		t.Fatalf("%d open after unpinning, limit 3", n)
	}
}

func TestCloseWhilePinnedClosesAtUnpin(t *testing.T) {
	fsys, dir := newFS(t)
	c := New(0)
	h, err := c.Create(fsys, filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	f, err := h.Pin(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	var b [3]byte
	if _, err := f.ReadAt(b[:], 0); err != nil || string(b[:]) != "abc" {
		t.Fatalf("pinned file after Close: %q, %v", b, err)
	}
	if fsys.open.Load() != 1 {
		t.Fatal("closed while pinned")
	}
	h.Unpin()
	if fsys.open.Load() != 0 || c.Stats().Open != 0 {
		t.Fatal("still open after the last Unpin")
	}
	if _, err := h.Write([]byte("d")); !IsClosed(err) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := h.Pin(false); !IsClosed(err) {
		t.Fatalf("Pin after Close: %v", err)
	}
}

func TestCleanFilesGoFirstAndDirtyOnesSyncOnReopen(t *testing.T) {
	fsys, dir := newFS(t)
	c := New(2)
	dirty, err := c.Create(fsys, filepath.Join(dir, "dirty"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dirty.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	clean, err := c.Create(fsys, filepath.Join(dir, "clean"))
	if err != nil {
		t.Fatal(err)
	}
	if err := clean.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(fsys, filepath.Join(dir, "third")); err != nil {
		t.Fatal(err)
	}
	// The clean file was closed, not the dirty one: using the dirty one
	// opens nothing.
	missesBefore := c.Stats().Misses
	if _, err := dirty.Size(); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Misses != missesBefore {
		t.Fatal("the dirty file was closed while a clean one could be")
	}
	// With only dirty files left to close, one is closed without an
	// fsync; its next Sync opens it again and fsyncs.
	syncs := fsys.syncs.Load()
	if _, err := clean.Write([]byte("x")); err != nil { // reopens clean, closing a dirty file
		t.Fatal(err)
	}
	if fsys.syncs.Load() != syncs {
		t.Fatal("closing a dirty file fsynced it")
	}
	if n := fsys.open.Load(); n > 2 {
		t.Fatalf("%d open, limit 2", n)
	}
	for _, h := range []*File{dirty, clean} {
		if err := h.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fsys.syncs.Load() - syncs; got != 2 {
		t.Fatalf("%d fsyncs for two dirty files' Syncs, want 2", got)
	}
	if string(readAll(t, dirty)) != "unsynced" {
		t.Fatal("dirty file lost its contents")
	}
}

// TestConcurrentUse drives many files through a small cache from many
// goroutines, writing, reading, pinning and syncing: every file ends with
// exactly what was written to it, and the descriptors never exceed the limit
// by more than the calls in flight.
func TestConcurrentUse(t *testing.T) {
	fsys, dir := newFS(t)
	const files, workers, limit = 40, 8, 6
	c := New(limit)
	hs := make([]*File, files)
	for i := range hs {
		h, err := c.Create(fsys, filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	var mu [files]sync.Mutex // one writer per file, as a segment has
	want := make([][]byte, files)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 400 {
				i := rng.IntN(files)
				h := hs[i]
				switch rng.IntN(4) {
				case 0:
					mu[i].Lock()
					rec := fmt.Appendf(nil, "<%d.%d>", w, rng.IntN(1000))
					if _, err := h.Write(rec); err != nil {
						t.Error(err)
					}
					want[i] = append(want[i], rec...)
					mu[i].Unlock()
				case 1:
					if err := h.Sync(); err != nil {
						t.Error(err)
					}
				case 2:
					f, err := h.Pin(false)
					if errors.Is(err, ErrBudget) {
						continue
					}
					if err != nil {
						t.Error(err)
						continue
					}
					var b [1]byte
					_, _ = f.ReadAt(b[:], 0)
					h.Unpin()
				default:
					if _, err := h.Size(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if peak := fsys.peak.Load(); peak > limit+workers {
		t.Fatalf("peak %d descriptors, limit %d with %d workers", peak, limit, workers)
	}
	for i, h := range hs {
		if got := readAll(t, h); !bytes.Equal(got, want[i]) {
			t.Fatalf("file %d: %q, want %q", i, got, want[i])
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fsys.open.Load(); n != 0 {
		t.Fatalf("%d descriptors left open", n)
	}
}

func TestDefaultLimit(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{20000, 15000}, {1024, 768}, {10, 64}, {1 << 20, 786432}} {
		if got := DefaultLimit(tc.nofile); got != tc.want {
			t.Errorf("DefaultLimit(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
	if ProcessLimit() == 0 {
		t.Error("ProcessLimit read no limit")
	}
}

func TestReopenRefusesAReplacedFile(t *testing.T) {
	dir := t.TempDir()
	c := New(1)
	name := filepath.Join(dir, "a")
	a, err := c.Create(vfs.Default, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("old")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(vfs.Default, filepath.Join(dir, "b")); err != nil { // closes a
		t.Fatal(err)
	}
	if err := vfs.WriteFileSynced(vfs.Default, name+".new", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := vfs.Default.Rename(name+".new", name); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("more")); !errors.Is(err, ErrGone) {
		t.Fatalf("Write to a replaced file: %v, want ErrGone", err)
	}
	if b, _ := vfs.ReadFile(vfs.Default, name); string(b) != "new" {
		t.Fatalf("the file that replaced it holds %q", b)
	}
}

// TestOpenedFilesCountAsDirtyUntilSynced: a handle on an existing file
// does not know whether what an earlier process wrote is durable, so its
// Sync fsyncs even after the cache closed it, unless its owner vouched for
// it (MarkSynced).
func TestOpenedFilesCountAsDirtyUntilSynced(t *testing.T) {
	fsys, dir := newFS(t)
	for i := range 3 {
		if err := vfs.WriteFileSynced(vfs.Default, filepath.Join(dir, fmt.Sprint(i)), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	c := New(1)
	unknown, err := c.OpenNow(fsys, filepath.Join(dir, "0"))
	if err != nil {
		t.Fatal(err)
	}
	vouched, err := c.OpenNow(fsys, filepath.Join(dir, "1")) // closes unknown
	if err != nil {
		t.Fatal(err)
	}
	vouched.MarkSynced()
	if _, err := c.OpenNow(fsys, filepath.Join(dir, "2")); err != nil { // closes vouched
		t.Fatal(err)
	}
	syncs := fsys.syncs.Load()
	if err := vouched.Sync(); err != nil {
		t.Fatal(err)
	}
	if fsys.syncs.Load() != syncs {
		t.Fatal("Sync of a closed file its owner vouched for opened and fsynced it")
	}
	if err := unknown.Sync(); err != nil {
		t.Fatal(err)
	}
	if fsys.syncs.Load() != syncs+1 {
		t.Fatal("Sync of a closed file of unknown durability did not fsync it")
	}
	_ = unknown.Close()
}
