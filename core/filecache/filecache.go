// Package filecache bounds the file descriptors a broker's segment files hold.
//
// A broker of 100,000 partitions cannot keep every segment's files open: an
// open-file limit of 20,000 would stop it at about 6,600 partitions. Instead
// each segment file is a *File: a handle that knows the file's name and opens
// it when it is used, through a Cache that keeps at most Limit descriptors
// open and closes the least recently used idle one to make room.
//
// A *File is a vfs.File, so the code that reads and writes segments does not
// change: each call opens the file if needed, holds it for the call (a pin),
// and leaves it open for the next use. Pin holds a file open beyond one call,
// for a reader that hands the descriptor to sendfile: the cache never closes a
// pinned file. A file whose owner called Close while it was pinned closes at
// the last Unpin.
//
// Two kinds of opening meet a full cache differently:
//
//   - A call of the vfs.File methods (the log's own writes, fsyncs, index
//     loads, recovery) must go through: when every open file is pinned it
//     opens anyway, over the limit, and Stats counts the overflow. Such pins
//     last one system call, so the overshoot is bounded by the calls in
//     flight.
//   - Pin (a reader that would hold the file while a response is sent) is
//     refused with ErrBudget instead: the reader stops there and answers with
//     what it has, as when it reaches its byte limit.
//
// Durability: a file written since its last Sync is dirty, and the cache
// prefers to close clean files. When it must close a dirty one it closes it
// without an fsync: the pages stay in the page cache and are written back as
// ever, and the file's next Sync reopens it and fsyncs. Linux (since 4.16)
// keeps a writeback error in the file's inode and reports it to the next
// fsync of any descriptor, one opened after the error included, so the log
// still meets a failed writeback where it would have; the one case it
// cannot is the kernel dropping the inode from its cache between the error
// and the reopening, the trade PostgreSQL makes for its own descriptor cache.
// (An fsync before every such close would cost a consumer that reads 100,000
// freshly written partitions through a 15,000 budget one fsync per file.)
// A file that existed before its handle (Open) counts as dirty until its
// first Sync or MarkSynced, so that recovered data is made durable by the
// owner's Sync even if the cache closed it meanwhile.
//
// Lock order: a File's mutex, then the Cache's. The cache never waits for a
// File's mutex while holding its own (it tries, and passes over a busy
// file), so a file being opened, written or closed never blocks the sweep.
package filecache

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/weir-broker/weir/core/vfs"
)

// ErrBudget is returned by Pin when opening the file would take the cache
// past its limit and every open file is pinned.
var ErrBudget = errors.New("filecache: open-file budget exhausted")

// ErrGone is returned when a file the cache closed cannot be reopened
// because its owner removed it meanwhile, or is found to be another file
// than the one first opened under its name (renamed over it): the handle
// refuses to read or write the newcomer. An open descriptor would have
// kept reaching the old file; a closed one cannot.
var ErrGone = errors.New("filecache: file removed or replaced since it was opened")

// errClosed is returned by the methods of a File after Close.
var errClosed = fmt.Errorf("filecache: %w", errors.New("file closed"))

// IsClosed reports whether err says a File was used after Close.
func IsClosed(err error) bool { return errors.Is(err, errClosed) }

// Cache bounds the open files of the File handles opened through it. New
// makes one; Unbounded is one with no limit.
type Cache struct {
	limit int64

	// mu guards the list of open files, most recently used first (the
	// prev and next fields of each File).
	mu  sync.Mutex
	lru File // sentinel: lru.next is the most recent, lru.prev the least

	open      atomic.Int64 // descriptors open or being opened
	hits      atomic.Int64
	misses    atomic.Int64
	evictions atomic.Int64
	overflows atomic.Int64
	refusals  atomic.Int64
}

// New returns a cache keeping at most limit files open; limit <= 0 means no
// limit.
func New(limit int) *Cache {
	c := &Cache{limit: int64(limit)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Unbounded is a cache with no limit, for files whose owner was given no
// cache: it only counts.
var Unbounded = New(0)

// DefaultLimit is the budget for a process whose open-file limit is
// nofile: three quarters of it, leaving the rest for sockets, ZooKeeper,
// plugins and the short-lived opens of checkpoints and index loads, and at
// least 64.
func DefaultLimit(nofile uint64) int {
	return max(64, int(nofile/4*3))
}

// ProcessLimit returns the process's soft open-file limit (RLIMIT_NOFILE;
// Go raises it to the hard limit at start-up), or 0 if it cannot be read.
func ProcessLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// Stats are the cache's counters since New.
type Stats struct {
	Limit     int64 // 0: no limit
	Open      int64 // descriptors open now
	Hits      int64 // uses that found their file open
	Misses    int64 // uses that opened it
	Evictions int64 // idle files closed to make room
	Overflows int64 // opens past the limit because every open file was pinned
	Refusals  int64 // Pins refused with ErrBudget
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{Limit: c.limit, Open: c.open.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(),
		Evictions: c.evictions.Load(), Overflows: c.overflows.Load(), Refusals: c.refusals.Load()}
}

// File is a file opened through a Cache: a vfs.File whose descriptor the
// cache may close while it is idle and that reopens it on its next use. Its
// writes append (vfs.File's contract), so a reopened file continues at its
// end.
type File struct {
	c    *Cache
	fs   vfs.FS
	name string

	mu     sync.Mutex
	f      vfs.File // nil while closed by the cache (or not yet opened)
	pins   int
	writes int64  // Write and Truncate calls made...
	synced int64  // ...and how many of them the last successful Sync covered
	err    error  // a failed fsync of the cache's, for the next Sync
	closed bool   // Close was called
	id     fileID // the file first opened (zero: unknown)
	opened bool   // it was opened once

	// In c's list while open (bounded caches only); guarded by c.mu.
	prev, next *File
}

// Create creates (or truncates) name and returns it open, as vfs.FS.Create.
func (c *Cache) Create(fsys vfs.FS, name string) (*File, error) {
	h := &File{c: c, fs: fsys, name: name}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.openLocked(fsys.Create, true); err != nil {
		return nil, err
	}
	h.idle()
	return h, nil
}

// Open returns a handle on the existing file name, opened read-write for
// appending (vfs.FS.OpenReadWrite) at its first use. Nothing is opened
// now: a missing file shows at that use. The file counts as dirty (what an
// earlier process wrote may not be durable) until a Sync or MarkSynced.
func (c *Cache) Open(fsys vfs.FS, name string) *File {
	return &File{c: c, fs: fsys, name: name, writes: 1}
}

// MarkSynced tells the handle that the file's contents are durable as they
// are (its owner knows it: a segment a clean shutdown or the recovery point
// vouches for), so the cache may close it without an fsync.
func (h *File) MarkSynced() {
	h.mu.Lock()
	h.synced = h.writes
	h.mu.Unlock()
}

// OpenNow is Open, then opens the file at once, so that a missing or
// unreadable file is an error here.
func (c *Cache) OpenNow(fsys vfs.FS, name string) (*File, error) {
	h := c.Open(fsys, name)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.openLocked(fsys.OpenReadWrite, true); err != nil {
		return nil, err
	}
	h.idle()
	return h, nil
}

// Name returns the path the file was opened with.
func (h *File) Name() string { return h.name }

// openLocked opens the file, making room in the cache first. must: open
// over the limit rather than fail (else ErrBudget). h.mu is held.
func (h *File) openLocked(open func(string) (vfs.File, error), must bool) error {
	c := h.c
	victims, err := c.reserve(must)
	closeVictims(victims)
	if err != nil {
		return err
	}
	f, err := open(h.name)
	if err != nil {
		c.open.Add(-1)
		if h.opened && errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrGone, err)
		}
		return err
	}
	id := identify(f)
	if h.id != (fileID{}) && id != (fileID{}) && id != h.id {
		_ = f.Close()
		c.open.Add(-1)
		return fmt.Errorf("%s: %w", h.name, ErrGone)
	}
	h.id, h.opened = id, true
	h.f = f
	c.misses.Add(1)
	return nil
}

// idle puts an open, unpinned file at the front of the idle list (the most
// recently used). h.mu is held.
func (h *File) idle() {
	if c := h.c; c.limit > 0 && h.f != nil && h.pins == 0 && !h.closed {
		c.mu.Lock()
		c.pushFront(h)
		c.mu.Unlock()
	}
}

// acquire returns the open file, pinned: the caller calls release.
func (h *File) acquire(must bool) (vfs.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("%s: %w", h.name, errClosed)
	}
	if h.f == nil {
		if err := h.openLocked(h.fs.OpenReadWrite, must); err != nil {
			return nil, err
		}
	} else {
		c := h.c
		c.hits.Add(1)
		if c.limit > 0 && h.pins == 0 {
			c.mu.Lock()
			c.unlink(h) // in use: not idle until its last pin goes
			c.mu.Unlock()
		}
	}
	h.pins++
	return h.f, nil
}

// release drops a pin taken by acquire; wrote counts a write or truncate.
func (h *File) release(wrote bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pins--
	if wrote {
		h.writes++
	}
	if h.pins > 0 {
		return
	}
	if h.closed {
		_ = h.shut()
		return
	}
	h.idle()
	if c := h.c; c.limit > 0 && c.open.Load() > c.limit {
		// Opened over the limit while every file was pinned: now that
		// one is free, close idle files down to the limit.
		c.mu.Lock()
		victims := c.evict(0, true)
		c.mu.Unlock()
		closeVictims(victims)
	}
}

// shut closes the descriptor and takes it out of the cache. h.mu is held.
func (h *File) shut() error {
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	if c := h.c; c.limit > 0 {
		c.mu.Lock()
		c.unlink(h)
		c.mu.Unlock()
	}
	h.c.open.Add(-1)
	return err
}

// Pin opens the file if needed and holds it open until Unpin, for a reader
// that keeps the descriptor beyond one call (a Slice that goes to
// sendfile): the returned vfs.File stays valid until then. Without must it
// fails with ErrBudget, opening nothing, when the cache is full of pinned
// files (a fetch answers with what it has); with must it opens past the
// limit then (the log's own readers). Call Unpin once per successful Pin.
func (h *File) Pin(must bool) (vfs.File, error) { return h.acquire(must) }

// Unpin releases a Pin.
func (h *File) Unpin() { h.release(false) }

// Write appends p to the file (see vfs.File).
func (h *File) Write(p []byte) (int, error) {
	f, err := h.acquire(true)
	if err != nil {
		return 0, err
	}
	defer h.release(true)
	return f.Write(p)
}

// ReadAt reads len(p) bytes at off (see vfs.File).
func (h *File) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.acquire(true)
	if err != nil {
		return 0, err
	}
	defer h.release(false)
	return f.ReadAt(p, off)
}

// Truncate changes the size of the file.
func (h *File) Truncate(size int64) error {
	f, err := h.acquire(true)
	if err != nil {
		return err
	}
	defer h.release(true)
	return f.Truncate(size)
}

// Size returns the current size of the file.
func (h *File) Size() (int64, error) {
	f, err := h.acquire(true)
	if err != nil {
		return 0, err
	}
	defer h.release(false)
	return f.Size()
}

// Sync fsyncs the file, reopening it if the cache closed it since it was
// last written.
func (h *File) Sync() error {
	h.mu.Lock()
	if !h.closed && h.f == nil && h.writes == h.synced {
		// Closed by the cache after its last write was synced (or
		// vouched for): nothing to make durable, no descriptor to open.
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	f, err := h.acquire(true)
	if err != nil {
		return err
	}
	h.mu.Lock()
	covers := h.writes
	h.mu.Unlock()
	err = f.Sync()
	h.mu.Lock()
	if err == nil && covers > h.synced {
		h.synced = covers
	}
	h.mu.Unlock()
	h.release(false)
	return err
}

// Close closes the file for good: at once if it is not pinned, else at the
// last Unpin. Every later use fails.
func (h *File) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.pins == 0 {
		return h.shut()
	}
	return nil
}

// reserve counts one more open descriptor, first closing idle files if the
// cache is full; it returns them with their mutexes held, for the caller
// to close after it has let go of the cache. Without must it fails with
// ErrBudget when nothing can be closed.
func (c *Cache) reserve(must bool) ([]*File, error) {
	if c.limit <= 0 {
		c.open.Add(1)
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	victims := c.evict(1, false)
	if c.open.Load()-int64(len(victims)) >= c.limit {
		if !must {
			c.refusals.Add(1)
			return victims, ErrBudget
		}
		c.overflows.Add(1)
	}
	c.open.Add(1)
	return victims, nil
}

// evict chooses idle files to close until room more descriptors fit
// under the limit, least recently used first, and among the least recently
// used a clean file (written to nothing since its last fsync) before a
// dirty one; a file it cannot lock at once is busy and passed over. The
// list holds only idle files (open, not pinned), so a cache full of pinned
// files refuses at once, and the walk looks at no more than a few entries
// per victim. The victims come back unlinked, their mutexes held, still
// counted open: closeVictims closes them. With quiet it counts no
// evictions (trimming an overflow). c.mu is held.
func (c *Cache) evict(room int64, quiet bool) []*File {
	const look = 16 // entries from the tail searched for a clean file
	var victims []*File
	need := func() bool { return c.open.Load()-int64(len(victims))+room > c.limit }
	for need() {
		var v, fallback *File
		n := 0
		for h := c.lru.prev; h != &c.lru && n < look; h = h.prev {
			n++
			if !h.mu.TryLock() {
				continue
			}
			if h.pins > 0 || h.f == nil {
				h.mu.Unlock()
				continue
			}
			if h.writes == h.synced {
				v = h
				break
			}
			if fallback == nil {
				fallback = h // keep it locked, in case no clean one is near
				continue
			}
			h.mu.Unlock()
		}
		if v == nil {
			v = fallback
		} else if fallback != nil {
			fallback.mu.Unlock()
		}
		if v == nil {
			break
		}
		c.unlink(v)
		victims = append(victims, v)
		if !quiet {
			c.evictions.Add(1)
		}
	}
	return victims
}

// closeVictims closes the files evict chose and unlocks them. A dirty one
// is closed without an fsync (see the package doc): its next Sync reopens
// it.
func closeVictims(vs []*File) {
	for _, v := range vs {
		_ = v.f.Close()
		v.f = nil
		v.c.open.Add(-1)
		v.mu.Unlock()
	}
}

// pushFront links h as the most recently used. c.mu is held.
func (c *Cache) pushFront(h *File) {
	h.prev, h.next = &c.lru, c.lru.next
	c.lru.next.prev = h
	c.lru.next = h
}

// unlink takes h out of the list, if it is in it. c.mu is held.
func (c *Cache) unlink(h *File) {
	if h.next == nil {
		return
	}
	h.prev.next, h.next.prev = h.next, h.prev
	h.prev, h.next = nil, nil
}

// fileID names a file of the OS file system: device and inode.
type fileID struct{ dev, ino uint64 }

// identify returns the device and inode of an OS file, zero for others
// (an in-memory file system's files cannot be replaced under a handle
// without the test that does it knowing).
func identify(f vfs.File) fileID {
	of, ok := f.(vfs.OSFiler)
	if !ok {
		return fileID{}
	}
	fi, err := of.OSFile().Stat()
	if err != nil {
		return fileID{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}
}
