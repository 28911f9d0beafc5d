package durability

import (
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-broker/weir/core/vfs"
)

// powerFS is the file system of a broker whose power can be cut: a MemFS
// behind a lock that makes the cut atomic with every operation. Each
// operation runs under the read lock and fails with ErrPowerCut once the
// power is off; Cut takes the write lock, so it lands between operations,
// never inside one: an fsync that returned success happened before the
// clone was taken and is in it, and nothing the old broker does afterwards
// can succeed, let alone reach the clone (which is a separate MemFS anyway).
//
// syncLatency, when positive, is the simulated cost of an fsync, paid
// before the lock is taken: a cut during that wait is a power cut in the
// middle of an fsync, which then fails and covers nothing.
type powerFS struct {
	mem         *vfs.MemFS
	syncLatency time.Duration

	mu  sync.RWMutex
	off bool // under mu

	syncs   atomic.Int64
	maxSync atomic.Int64 // ns, the longest successful fsync (latency included)
}

func newPowerFS(syncLatency time.Duration) *powerFS {
	return &powerFS{mem: vfs.NewMem(), syncLatency: syncLatency}
}

// Cut switches the power off and returns what the disk holds: a crash clone
// of the file system (torn writes kept in part when rng is not nil), and
// the instant of the cut. Later operations fail with ErrPowerCut.
func (p *powerFS) Cut(rng *rand.Rand) (*vfs.MemFS, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := time.Now()
	p.off = true
	if rng != nil {
		return p.mem.CrashCloneTorn(rng), at
	}
	return p.mem.CrashClone(), at
}

// MaxSync is the longest fsync that succeeded.
func (p *powerFS) MaxSync() time.Duration { return time.Duration(p.maxSync.Load()) }

// Syncs counts the fsyncs (files and directories) that succeeded.
func (p *powerFS) Syncs() int64 { return p.syncs.Load() }

// do runs op under the read lock unless the power is off.
func (p *powerFS) do(op, name string, f func() error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.off {
		return &os.PathError{Op: op, Path: name, Err: ErrPowerCut}
	}
	return f()
}

// sync runs an fsync: the simulated latency first, outside the lock.
func (p *powerFS) sync(op, name string, f func() error) error {
	start := time.Now()
	if p.syncLatency > 0 {
		time.Sleep(p.syncLatency) // the device's work, not a synchronisation
	}
	err := p.do(op, name, f)
	if err == nil {
		p.syncs.Add(1)
		d := int64(time.Since(start))
		for cur := p.maxSync.Load(); d > cur && !p.maxSync.CompareAndSwap(cur, d); cur = p.maxSync.Load() {
		}
	}
	return err
}

func (p *powerFS) file(op, name string, open func() (vfs.File, error)) (vfs.File, error) {
	var f vfs.File
	err := p.do(op, name, func() (err error) {
		f, err = open()
		return err
	})
	if err != nil {
		return nil, err
	}
	return &powerFile{fs: p, f: f}, nil
}

func (p *powerFS) Create(name string) (vfs.File, error) {
	return p.file("create", name, func() (vfs.File, error) { return p.mem.Create(name) })
}

func (p *powerFS) OpenReadWrite(name string) (vfs.File, error) {
	return p.file("open", name, func() (vfs.File, error) { return p.mem.OpenReadWrite(name) })
}

func (p *powerFS) Open(name string) (vfs.File, error) {
	return p.file("open", name, func() (vfs.File, error) { return p.mem.Open(name) })
}

func (p *powerFS) Remove(name string) error {
	return p.do("remove", name, func() error { return p.mem.Remove(name) })
}

func (p *powerFS) RemoveAll(dir string) error {
	return p.do("removeall", dir, func() error { return p.mem.RemoveAll(dir) })
}

func (p *powerFS) Rename(oldname, newname string) error {
	return p.do("rename", oldname, func() error { return p.mem.Rename(oldname, newname) })
}

func (p *powerFS) MkdirAll(dir string, perm os.FileMode) error {
	return p.do("mkdir", dir, func() error { return p.mem.MkdirAll(dir, perm) })
}

func (p *powerFS) List(dir string) ([]string, error) {
	var names []string
	err := p.do("list", dir, func() (err error) {
		names, err = p.mem.List(dir)
		return err
	})
	return names, err
}

func (p *powerFS) Stat(name string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := p.do("stat", name, func() (err error) {
		fi, err = p.mem.Stat(name)
		return err
	})
	return fi, err
}

func (p *powerFS) SyncDir(dir string) error {
	return p.sync("syncdir", dir, func() error { return p.mem.SyncDir(dir) })
}

// powerFile is a file of a powerFS.
type powerFile struct {
	fs *powerFS
	f  vfs.File
}

func (f *powerFile) Name() string { return f.f.Name() }

func (f *powerFile) Write(b []byte) (int, error) {
	var n int
	err := f.fs.do("write", f.f.Name(), func() (err error) {
		n, err = f.f.Write(b)
		return err
	})
	return n, err
}

func (f *powerFile) ReadAt(b []byte, off int64) (int, error) {
	var n int
	err := f.fs.do("read", f.f.Name(), func() (err error) {
		n, err = f.f.ReadAt(b, off)
		return err
	})
	return n, err
}

func (f *powerFile) Sync() error {
	return f.fs.sync("sync", f.f.Name(), f.f.Sync)
}

func (f *powerFile) Truncate(size int64) error {
	return f.fs.do("truncate", f.f.Name(), func() error { return f.f.Truncate(size) })
}

func (f *powerFile) Size() (int64, error) {
	var n int64
	err := f.fs.do("stat", f.f.Name(), func() (err error) {
		n, err = f.f.Size()
		return err
	})
	return n, err
}

// Close releases the handle even with the power off, as close(2) does.
func (f *powerFile) Close() error { return f.f.Close() }
