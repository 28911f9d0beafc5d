package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPowerCut is what every operation of a [PowerFS] returns (inside an *os.PathError) once its power is cut.
var ErrPowerCut = errors.New("vfs: power cut")

// PowerConfig says how a [PowerFS] behaves besides its MemFS.
type PowerConfig struct {
	// SyncLatency, when positive, is the simulated cost of an fsync (File.Sync and SyncDir), paid before the
	// lock is taken: a cut during that wait is a power cut in the middle of an fsync, which then fails and covers
	// nothing. Default 0: memory speed.
	SyncLatency time.Duration
	// Mirror, when set, is the file system the machine's disk really is: every change (Create, Write, Truncate,
	// Remove, RemoveAll, Rename, MkdirAll) is made on Mirror first, under the same paths, then on the MemFS, and
	// every fsync is made on Mirror (in place of SyncLatency's wait) before the MemFS records it. Reads come from
	// the MemFS. So Mirror always holds what the machine's page cache would (a process killed without a power cut
	// leaves it there, as SIGKILL leaves a real broker's files), while the MemFS knows what of it is durable. A
	// change Mirror refuses is not made on the MemFS (a short Write is made short on both), so a full disk under
	// Mirror is seen by the PowerFS's user. After Cut, write the clone over Mirror with [CopyTree] to finish the
	// cut. Default nil: the MemFS alone.
	Mirror FS
}

// PowerFS is the file system of a machine whose power can be cut: a MemFS behind a lock that makes the cut atomic
// with every operation. Each operation runs under the read lock and fails with ErrPowerCut once the power is off;
// [PowerFS.Cut] takes the write lock, so it lands between operations, never inside one: an fsync that returned
// success happened before the crash clone was taken and is in it, and nothing the machine's software does
// afterwards can succeed, let alone reach the clone (which is a separate MemFS anyway).
//
// Close releases a handle even with the power off, as close(2) does. A PowerFS is safe for concurrent use, with
// the concurrency its MemFS allows (one writer and many readers per file).
type PowerFS struct {
	mem *MemFS
	cfg PowerConfig

	mu  sync.RWMutex
	off bool // under mu

	syncs   atomic.Int64
	maxSync atomic.Int64 // ns, the longest successful fsync (latency included)
}

// NewPower returns a PowerFS running on mem, the power on.
func NewPower(mem *MemFS, cfg PowerConfig) *PowerFS {
	return &PowerFS{mem: mem, cfg: cfg}
}

// Cut switches the power off and returns what the disk holds: a crash clone of the MemFS (torn writes kept in
// part when rng is not nil, see [MemFS.CrashCloneTorn]), and the instant of the cut. Every later operation fails
// with ErrPowerCut (a second Cut returns another clone of the same state).
func (p *PowerFS) Cut(rng *rand.Rand) (*MemFS, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := time.Now()
	p.off = true
	if rng != nil {
		return p.mem.CrashCloneTorn(rng), at
	}
	return p.mem.CrashClone(), at
}

// MaxSync is the longest fsync that succeeded, its latency included.
func (p *PowerFS) MaxSync() time.Duration { return time.Duration(p.maxSync.Load()) }

// Syncs counts the fsyncs (files and directories) that succeeded.
func (p *PowerFS) Syncs() int64 { return p.syncs.Load() }

// do runs op under the read lock unless the power is off.
func (p *PowerFS) do(op, name string, f func() error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.off {
		return &os.PathError{Op: op, Path: name, Err: ErrPowerCut}
	}
	return f()
}

// sync runs an fsync: the device's work first (the simulated latency, or the mirror's fsync), outside the lock,
// so that a cut can strike it; then the MemFS records it, unless the power went off meanwhile.
func (p *PowerFS) sync(op, name string, device func() error, f func() error) error {
	start := time.Now()
	if p.cfg.Mirror != nil {
		if err := device(); err != nil {
			return err
		}
	} else if p.cfg.SyncLatency > 0 {
		time.Sleep(p.cfg.SyncLatency) // the device's work, not a synchronisation
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

// both runs a change on the mirror, then on the MemFS; without a mirror on the MemFS alone.
func (p *PowerFS) both(op, name string, mirror func(FS) error, mem func() error) error {
	return p.do(op, name, func() error {
		if p.cfg.Mirror != nil {
			if err := mirror(p.cfg.Mirror); err != nil {
				return err
			}
		}
		return mem()
	})
}

// open opens a file on the mirror, if any, and on the MemFS. A read-only file is opened on both too, for its
// fsync.
func (p *PowerFS) open(op, name string, open func(FS, string) (File, error)) (File, error) {
	f := &powerFile{fs: p}
	err := p.do(op, name, func() (err error) {
		if p.cfg.Mirror != nil {
			if f.m, err = open(p.cfg.Mirror, name); err != nil {
				return err
			}
		}
		if f.f, err = open(p.mem, name); err != nil && f.m != nil {
			_ = f.m.Close()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Create implements FS.
func (p *PowerFS) Create(name string) (File, error) {
	return p.open("create", name, func(fs FS, name string) (File, error) { return fs.Create(name) })
}

// OpenReadWrite implements FS.
func (p *PowerFS) OpenReadWrite(name string) (File, error) {
	return p.open("open", name, func(fs FS, name string) (File, error) { return fs.OpenReadWrite(name) })
}

// Open implements FS.
func (p *PowerFS) Open(name string) (File, error) {
	return p.open("open", name, func(fs FS, name string) (File, error) { return fs.Open(name) })
}

// Remove implements FS.
func (p *PowerFS) Remove(name string) error {
	return p.both("remove", name, func(fs FS) error { return fs.Remove(name) }, func() error { return p.mem.Remove(name) })
}

// RemoveAll implements FS.
func (p *PowerFS) RemoveAll(dir string) error {
	return p.both("removeall", dir, func(fs FS) error { return fs.RemoveAll(dir) }, func() error { return p.mem.RemoveAll(dir) })
}

// Rename implements FS.
func (p *PowerFS) Rename(oldname, newname string) error {
	return p.both("rename", oldname, func(fs FS) error { return fs.Rename(oldname, newname) },
		func() error { return p.mem.Rename(oldname, newname) })
}

// MkdirAll implements FS.
func (p *PowerFS) MkdirAll(dir string, perm os.FileMode) error {
	return p.both("mkdir", dir, func(fs FS) error { return fs.MkdirAll(dir, perm) }, func() error { return p.mem.MkdirAll(dir, perm) })
}

// List implements FS.
func (p *PowerFS) List(dir string) ([]string, error) {
	var names []string
	err := p.do("list", dir, func() (err error) {
		names, err = p.mem.List(dir)
		return err
	})
	return names, err
}

// Stat implements FS.
func (p *PowerFS) Stat(name string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := p.do("stat", name, func() (err error) {
		fi, err = p.mem.Stat(name)
		return err
	})
	return fi, err
}

// SyncDir implements FS.
func (p *PowerFS) SyncDir(dir string) error {
	return p.sync("syncdir", dir, func() error { return p.cfg.Mirror.SyncDir(dir) }, func() error { return p.mem.SyncDir(dir) })
}

// powerFile is a file of a PowerFS: f on its MemFS, m on its mirror (nil without one).
type powerFile struct {
	fs *PowerFS
	f  File
	m  File
}

func (f *powerFile) Name() string { return f.f.Name() }

func (f *powerFile) Write(b []byte) (int, error) {
	var n int
	err := f.fs.do("write", f.f.Name(), func() (err error) {
		if f.m == nil {
			n, err = f.f.Write(b)
			return err
		}
		n, err = f.m.Write(b)
		if _, merr := f.f.Write(b[:n]); err == nil {
			err = merr
		}
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
	return f.fs.sync("sync", f.f.Name(), func() error { return f.m.Sync() }, f.f.Sync)
}

func (f *powerFile) Truncate(size int64) error {
	return f.fs.do("truncate", f.f.Name(), func() error {
		if f.m != nil {
			if err := f.m.Truncate(size); err != nil {
				return err
			}
		}
		return f.f.Truncate(size)
	})
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
func (f *powerFile) Close() error {
	err := f.f.Close()
	if f.m != nil {
		if merr := f.m.Close(); err == nil {
			err = merr
		}
	}
	return err
}
