package diskfs

import (
	"container/list"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/weir-broker/weir/harness/device/model"
)

const (
	pageSize  = 4096
	groupSize = 1 << 30 // the allocator's region per directory
	// maxRequest caps one device request built from contiguous pages (Linux's max_sectors_kb is 1280 by default;
	// larger here so a RAID-5 array sees whole stripes, as md's stripe cache would give it).
	maxRequest = 8 << 20
	// journalSize is the journal's region, in the middle of the device as mke2fs places ext4's.
	journalSize = 128 << 20
	// rootIno stands for the mount's root directory (no backing file has inode 0).
	rootIno = 0
)

// extent maps file pages [logical, logical+n) to device pages [physical, physical+n).
type extent struct{ logical, physical, n int64 }

// file is the engine's view of one inode: where its pages are on the device, which are dirty.
type file struct {
	ino       uint64
	group     int64 // allocation region (its directory's)
	extents   []extent
	dirty     map[int64]bool
	dirtyAt   time.Duration // device time of the oldest dirty page; meaningful while dirty is not empty
	meta      bool          // its size or allocation changed since its last fsync (a journal commit is due)
	writeback *list.Element // in engine.dirtyFiles while dirty
}

type pageKey struct {
	ino  uint64
	page int64
}

// engine charges file operations the device's time: a modelled page cache (dirty pages written back at fsync, by
// age, or when too many are dirty; clean pages kept in an LRU of bounded size), a delayed-allocation block
// allocator, and the device model on its clock. It does no I/O of its own: the FUSE layer reads and writes the
// backing files and asks the engine how long each operation should have taken.
type engine struct {
	clock *model.Clock
	o     Options

	mu         sync.Mutex
	files      map[uint64]*file
	dirGroup   map[uint64]int64 // directory inode → its allocation group
	dirs       int64            // directories placed so far
	groupNext  []int64          // next free page in each group (pages are not reused after a file shrinks)
	journalAt  int64            // next journal page
	metaDirty  int              // namespace changes since the last journal commit
	dirtyFiles *list.List       // files with dirty pages, oldest first
	dirtyPages int64
	inflight   []inflight // writeback submitted but not complete, by completion
	clean      *list.List // pageKey, least recently used first
	cleanIndex map[pageKey]*list.Element
	counts     Counts
}

type inflight struct {
	done  time.Duration
	pages int64
}

// Counts are the engine's own counters (the device's are model.Stats).
type Counts struct {
	CacheHits, CacheMisses      int64 // pages read from the modelled page cache, and from the device
	WritebackPages, DirectPages int64 // pages written by writeback (fsync included), and by O_DIRECT
	Fsyncs, JournalCommits      int64
	Throttled                   time.Duration // writers' time waiting for writeback (over the dirty limit)
	MaxFsync                    time.Duration // the longest an fsync waited (device time)
}

func newEngine(clock *model.Clock, o Options) *engine {
	groups := clock.Device().Capacity() / groupSize
	return &engine{clock: clock, o: o, files: map[uint64]*file{}, dirGroup: map[uint64]int64{},
		groupNext: make([]int64, max(groups, 1)), journalAt: journalStart(clock.Device().Capacity()),
		dirtyFiles: list.New(), clean: list.New(), cleanIndex: map[pageKey]*list.Element{}}
}

func journalStart(capacity int64) int64 { return capacity / 2 / groupSize * groupSize / pageSize }

// groupOf places a directory: the root in group 0, every other directory at the next point of a golden-ratio
// sequence over the groups, so directories (Kafka's partitions) are spread over the whole device, as ext4's Orlov
// allocator spreads top-level directories.
func (e *engine) groupOf(dir uint64) int64 {
	if g, ok := e.dirGroup[dir]; ok {
		return g
	}
	g := int64(0)
	if dir != rootIno {
		e.dirs++
		const phi = 0.6180339887498949
		k := float64(e.dirs) * phi
		g = int64((k - float64(int64(k))) * float64(len(e.groupNext)))
	}
	e.dirGroup[dir] = g
	return g
}

func (e *engine) file(ino, dir uint64) *file {
	f := e.files[ino]
	if f == nil {
		f = &file{ino: ino, group: e.groupOf(dir), dirty: map[int64]bool{}}
		e.files[ino] = f
	}
	return f
}

// physical returns the device page of a file page, or -1 if it was never allocated.
func (f *file) physical(page int64) int64 {
	i := sort.Search(len(f.extents), func(i int) bool { return f.extents[i].logical+f.extents[i].n > page })
	if i < len(f.extents) && f.extents[i].logical <= page {
		return f.extents[i].physical + page - f.extents[i].logical
	}
	return -1
}

// allocate gives page a device page: right after the file's previous page if that is the group's next free page
// (so a file written in order is contiguous), else the group's next free page. Full groups spill into the next.
func (e *engine) allocate(f *file, page int64) int64 {
	per := int64(groupSize / pageSize)
	jg := journalStart(e.clock.Device().Capacity()) / per
	g := f.group
	for i := 0; i < len(e.groupNext) && (e.groupNext[g] >= per || g == jg); i++ {
		g = (g + 1) % int64(len(e.groupNext))
	}
	phys := g*per + e.groupNext[g]
	e.groupNext[g]++
	f.meta = true
	i := sort.Search(len(f.extents), func(i int) bool { return f.extents[i].logical > page })
	if i > 0 {
		prev := &f.extents[i-1]
		if prev.logical+prev.n == page && prev.physical+prev.n == phys {
			prev.n++
			return phys
		}
	}
	f.extents = append(f.extents, extent{})
	copy(f.extents[i+1:], f.extents[i:])
	f.extents[i] = extent{logical: page, physical: phys, n: 1}
	return phys
}

// preallocate gives the unallocated pages of [first, first+n) device pages without writing them (fallocate(2)):
// each hole takes the free pages of its file's region and, once that is full, of the regions after it, in runs as
// long as the regions allow, as ext4 allocates a large fallocate in whole block groups. So a preallocated file can
// span most of the device, and writes at random offsets in it seek as far as writes at random offsets on the device.
// It returns how many pages it allocated and whether every page of the range has a place (false: the device is
// full).
func (e *engine) preallocate(ino, dir uint64, first, n int64) (allocated int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.file(ino, dir)
	per := int64(groupSize / pageSize)
	jg := journalStart(e.clock.Device().Capacity()) / per
	var holes [][2]int64 // [start, end) in file pages
	at, end := first, first+n
	for _, x := range f.extents {
		if x.logical >= end {
			break
		}
		if x.logical > at {
			holes = append(holes, [2]int64{at, x.logical})
		}
		at = max(at, x.logical+x.n)
	}
	if at < end {
		holes = append(holes, [2]int64{at, end})
	}
	defer func() {
		if allocated > 0 {
			f.meta = true
		}
	}()
	g := f.group
	for _, h := range holes {
		for page := h[0]; page < h[1]; {
			tried := 0
			for ; tried < len(e.groupNext) && (e.groupNext[g] >= per || g == jg); tried++ {
				g = (g + 1) % int64(len(e.groupNext))
			}
			if tried == len(e.groupNext) {
				return allocated, false // the device is full
			}
			k := min(h[1]-page, per-e.groupNext[g])
			e.addExtent(f, extent{logical: page, physical: g*per + e.groupNext[g], n: k})
			e.groupNext[g] += k
			page += k
			allocated += k
		}
	}
	return allocated, true
}

// addExtent inserts x, which must not overlap f's extents, joining it to the extent before it when both are
// contiguous in the file and on the device.
func (e *engine) addExtent(f *file, x extent) {
	i := sort.Search(len(f.extents), func(i int) bool { return f.extents[i].logical > x.logical })
	if i > 0 {
		prev := &f.extents[i-1]
		if prev.logical+prev.n == x.logical && prev.physical+prev.n == x.physical {
			prev.n += x.n
			return
		}
	}
	f.extents = slices.Insert(f.extents, i, x)
}

// runs maps sorted file pages to device requests: contiguous device pages merged up to maxRequest. alloc gives
// unallocated pages a place; without it they are skipped (holes).
func (e *engine) runs(f *file, pages []int64, op model.Op, alloc bool) []model.Request {
	var out []model.Request
	for _, p := range pages {
		phys := f.physical(p)
		if phys < 0 {
			if !alloc {
				continue
			}
			phys = e.allocate(f, p)
		}
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == phys*pageSize && out[k].Len < maxRequest {
			out[k].Len += pageSize
			continue
		}
		out = append(out, model.Request{Op: op, Off: phys * pageSize, Len: pageSize})
	}
	return out
}

func pagesOf(off, n int64) (first, last int64) { return off / pageSize, (off + n - 1) / pageSize }

func (e *engine) touchClean(k pageKey) {
	if el, ok := e.cleanIndex[k]; ok {
		e.clean.MoveToBack(el)
		return
	}
	e.cleanIndex[k] = e.clean.PushBack(k)
	for int64(e.clean.Len())*pageSize > e.o.CacheBytes {
		front := e.clean.Front()
		delete(e.cleanIndex, front.Value.(pageKey))
		e.clean.Remove(front)
	}
}

func (e *engine) dropClean(k pageKey) {
	if el, ok := e.cleanIndex[k]; ok {
		delete(e.cleanIndex, k)
		e.clean.Remove(el)
	}
}

// read charges a read of [off, off+n) of file ino: pages in the modelled page cache are free, the others are read
// from the device; direct (O_DIRECT) reads always go to the device. It returns how long the caller waited.
func (e *engine) read(ino, dir uint64, off, n int64, direct bool) time.Duration {
	if n <= 0 {
		return 0
	}
	e.mu.Lock()
	f := e.file(ino, dir)
	first, last := pagesOf(off, n)
	var miss []int64
	for p := first; p <= last; p++ {
		k := pageKey{ino, p}
		if direct {
			e.counts.CacheMisses++
			miss = append(miss, p)
			continue
		}
		if f.dirty[p] {
			e.counts.CacheHits++
			continue
		}
		if _, ok := e.cleanIndex[k]; ok {
			e.counts.CacheHits++
			e.touchClean(k)
			continue
		}
		e.counts.CacheMisses++
		miss = append(miss, p)
		e.touchClean(k)
	}
	// Pages never written through this mount (files that were in the backing directory before it) are laid
	// out on their first read, as if written before.
	reqs := e.runs(f, miss, model.Read, true)
	e.mu.Unlock()
	var waited time.Duration
	for _, r := range reqs {
		_, w := e.clock.Do(r)
		waited += w
	}
	return waited
}

// write charges a write of [off, off+n). Buffered: the pages become dirty and cost nothing unless writeback must
// catch up (over the dirty limit the writer waits, as Linux's balance_dirty_pages makes it). Direct (O_DIRECT):
// the device writes them now. Sync (O_SYNC, O_DSYNC): buffered, then fsync'ed.
func (e *engine) write(ino, dir uint64, off, n int64, direct, sync bool) time.Duration {
	if n <= 0 {
		return 0
	}
	e.mu.Lock()
	f := e.file(ino, dir)
	first, last := pagesOf(off, n)
	if direct {
		var pages []int64
		for p := first; p <= last; p++ {
			pages = append(pages, p)
			if f.dirty[p] {
				delete(f.dirty, p)
				e.dirtyPages--
			}
			e.dropClean(pageKey{ino, p}) // as the kernel invalidates the page cache over an O_DIRECT write
		}
		e.unlistIfClean(f)
		reqs := e.runs(f, pages, model.Write, true)
		e.counts.DirectPages += int64(len(pages))
		e.mu.Unlock()
		var waited time.Duration
		for _, r := range reqs {
			_, w := e.clock.Do(r)
			waited += w
		}
		if sync {
			waited += e.fsync(ino, dir, true)
		}
		return waited
	}
	now := e.clock.Now()
	for p := first; p <= last; p++ {
		if !f.dirty[p] {
			f.dirty[p] = true
			e.dirtyPages++
			e.dropClean(pageKey{ino, p})
		}
	}
	if f.writeback == nil {
		f.dirtyAt = now
		f.writeback = e.dirtyFiles.PushBack(f)
	}
	e.backgroundLocked(now)
	wait := e.throttleLocked(now)
	e.mu.Unlock()
	waited := e.clock.WaitUntil(wait)
	if waited > 0 {
		e.mu.Lock()
		e.counts.Throttled += waited
		e.mu.Unlock()
	}
	if sync {
		waited += e.fsync(ino, dir, true)
	}
	return waited
}

func (e *engine) unlistIfClean(f *file) {
	if len(f.dirty) == 0 && f.writeback != nil {
		e.dirtyFiles.Remove(f.writeback)
		f.writeback = nil
	}
}

// writebackLocked submits f's dirty pages to the device without waiting and returns when they will be written.
func (e *engine) writebackLocked(f *file) time.Duration {
	pages := make([]int64, 0, len(f.dirty))
	for p := range f.dirty {
		pages = append(pages, p)
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i] < pages[j] })
	reqs := e.runs(f, pages, model.Write, true)
	var done time.Duration
	for _, r := range reqs {
		done = max(done, e.clock.Submit(r).Done)
	}
	for _, p := range pages {
		e.touchClean(pageKey{f.ino, p})
	}
	e.counts.WritebackPages += int64(len(pages))
	e.dirtyPages -= int64(len(pages))
	f.dirty = map[int64]bool{}
	e.unlistIfClean(f)
	if len(pages) > 0 {
		e.inflight = append(e.inflight, inflight{done: done, pages: int64(len(pages))})
	}
	return done
}

// backgroundLocked is the flusher: files dirty for longer than DirtyExpire, and the oldest files while more than
// DirtyBackgroundBytes are dirty, are written back.
func (e *engine) backgroundLocked(now time.Duration) {
	for el := e.dirtyFiles.Front(); el != nil; el = e.dirtyFiles.Front() {
		f := el.Value.(*file)
		if now-f.dirtyAt < e.o.DirtyExpire && e.dirtyPages*pageSize <= e.o.DirtyBackgroundBytes {
			return
		}
		e.writebackLocked(f)
	}
}

// throttleLocked returns the device time until which a writer must wait so that dirty and in-flight pages fit in
// DirtyBytes.
func (e *engine) throttleLocked(now time.Duration) time.Duration {
	k := 0
	var flying int64
	for _, w := range e.inflight {
		if w.done > now {
			e.inflight[k] = w
			k++
			flying += w.pages
		}
	}
	e.inflight = e.inflight[:k]
	sort.Slice(e.inflight, func(i, j int) bool { return e.inflight[i].done < e.inflight[j].done })
	until := now
	for _, w := range e.inflight {
		if (e.dirtyPages+flying)*pageSize <= e.o.DirtyBytes {
			break
		}
		flying -= w.pages
		until = w.done
	}
	return until
}

// fsync writes back the file's dirty pages, commits the journal if its size or allocation changed (always for
// fsync, only then for fdatasync) or the namespace did, and flushes the device's caches; the caller waits for
// all of it.
func (e *engine) fsync(ino, dir uint64, datasync bool) time.Duration {
	e.mu.Lock()
	since := e.clock.Now() // in real time, building a large writeback takes a while the device is already working
	f := e.file(ino, dir)
	e.counts.Fsyncs++
	e.writebackLocked(f)
	if f.meta || !datasync || e.metaDirty > 0 {
		e.journalLocked()
		f.meta = false
	}
	e.mu.Unlock()
	_, w := e.clock.DoSince(model.Request{Op: model.Flush}, since)
	e.noteFsync(w)
	return w
}

// noteFsync keeps the longest fsync.
func (e *engine) noteFsync(w time.Duration) {
	e.mu.Lock()
	e.counts.MaxFsync = max(e.counts.MaxFsync, w)
	e.mu.Unlock()
}

// fsyncDir commits the journal (the directory's entries) and flushes.
func (e *engine) fsyncDir() time.Duration {
	e.mu.Lock()
	e.counts.Fsyncs++
	e.journalLocked()
	e.mu.Unlock()
	_, w := e.clock.Do(model.Request{Op: model.Flush})
	e.noteFsync(w)
	return w
}

// journalLocked submits one journal commit: a descriptor and commit block plus a block per 32 namespace changes.
func (e *engine) journalLocked() {
	pages := int64(1 + e.metaDirty/32)
	e.metaDirty = 0
	start := journalStart(e.clock.Device().Capacity())
	if e.journalAt+pages > start+journalSize/pageSize {
		e.journalAt = start
	}
	e.clock.Submit(model.Request{Op: model.Write, Off: e.journalAt * pageSize, Len: pages * pageSize})
	e.journalAt += pages
	e.counts.JournalCommits++
}

// namespace records a create, rename, unlink or link (metadata for the next journal commit).
func (e *engine) namespace() {
	e.mu.Lock()
	e.metaDirty++
	e.mu.Unlock()
}

// truncate drops the pages past size.
func (e *engine) truncate(ino, dir uint64, size int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.file(ino, dir)
	keep := (size + pageSize - 1) / pageSize
	for p := range f.dirty {
		if p >= keep {
			delete(f.dirty, p)
			e.dirtyPages--
		}
	}
	e.unlistIfClean(f)
	var ext []extent
	for _, x := range f.extents {
		if x.logical >= keep {
			continue
		}
		if x.logical+x.n > keep {
			x.n = keep - x.logical
		}
		ext = append(ext, x)
	}
	f.extents = ext
	f.meta = true
}

// forget drops a deleted inode: its dirty pages are never written.
func (e *engine) forget(ino uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.files[ino]
	if f == nil {
		return
	}
	e.dirtyPages -= int64(len(f.dirty))
	f.dirty = nil
	e.unlistIfClean(f)
	delete(e.files, ino)
}

// syncAll writes back everything dirty and flushes (sync(2)).
func (e *engine) syncAll() time.Duration {
	e.mu.Lock()
	for el := e.dirtyFiles.Front(); el != nil; el = e.dirtyFiles.Front() {
		e.writebackLocked(el.Value.(*file))
	}
	e.journalLocked()
	e.mu.Unlock()
	_, w := e.clock.Do(model.Request{Op: model.Flush})
	e.noteFsync(w)
	return w
}

// lose drops every dirty page (the power cut): they never reach the device.
func (e *engine) lose() (pages int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	pages = e.dirtyPages
	for el := e.dirtyFiles.Front(); el != nil; el = e.dirtyFiles.Front() {
		f := el.Value.(*file)
		f.dirty = map[int64]bool{}
		e.unlistIfClean(f)
	}
	e.dirtyPages = 0
	e.clean.Init()
	e.cleanIndex = map[pageKey]*list.Element{}
	return pages
}

// tick runs the flusher at the device's now (the real-time loop calls it every few seconds).
func (e *engine) tick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.backgroundLocked(e.clock.Now())
}

func (e *engine) countsNow() (Counts, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts, e.dirtyPages * pageSize
}
