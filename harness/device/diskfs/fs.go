package diskfs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weir-broker/weir/harness/device/model"
)

// ErrNoFUSE is wrapped when the machine cannot mount a FUSE file system (no /dev/fuse, not root).
var ErrNoFUSE = errors.New("diskfs: cannot mount FUSE")

// ErrCut is wrapped when the power of a mount was already cut.
var ErrCut = errors.New("diskfs: the power was cut")

// Options configure a mount. Zero values mean the defaults named.
type Options struct {
	// Profile is the device (required).
	Profile model.Profile
	// Backing is the directory that stores the files (required; created if missing).
	Backing string
	// RealTime makes every operation take the modelled time on the wall clock (sleeping); otherwise time is
	// simulated: nothing sleeps and Status.DeviceTime accounts the time.
	RealTime bool
	// CacheBytes bounds the modelled page cache's clean pages (default 1 GiB).
	CacheBytes int64
	// DirtyBackgroundBytes starts background writeback (default 64 MiB, Linux's dirty_background_bytes role).
	DirtyBackgroundBytes int64
	// DirtyBytes makes writers wait for writeback (default 256 MiB, Linux's dirty_bytes role).
	DirtyBytes int64
	// DirtyExpire writes back pages dirty for longer (default 30 s, Linux's dirty_expire_centisecs).
	DirtyExpire time.Duration
	// Logger gets the mount's few messages (default: discarded).
	Logger *slog.Logger
	// Debug logs every FUSE request (go-fuse's debug output, to stderr).
	Debug bool
}

func (o *Options) validate() error {
	if o.Backing == "" {
		return fmt.Errorf("diskfs: no backing directory")
	}
	if err := o.Profile.Validate(); err != nil {
		return err
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 1 << 30
	}
	if o.DirtyBackgroundBytes == 0 {
		o.DirtyBackgroundBytes = 64 << 20
	}
	if o.DirtyBytes == 0 {
		o.DirtyBytes = 256 << 20
	}
	if o.DirtyExpire == 0 {
		o.DirtyExpire = 30 * time.Second
	}
	if o.DirtyBytes < o.DirtyBackgroundBytes || o.CacheBytes < 0 {
		return fmt.Errorf("diskfs: dirty bytes %d below the background threshold %d", o.DirtyBytes, o.DirtyBackgroundBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Mount is a mounted emulated disk.
type Mount struct {
	dir     string
	o       Options
	server  *fuse.Server
	engine  *engine
	undo    *undo
	clock   *model.Clock
	rw      sync.RWMutex // operations hold it shared; a cut holds it alone
	cut     atomic.Bool
	stop    chan struct{}
	stopped sync.Once
	ctlMu   sync.Mutex
	ctl     *fs.Inode // the control directory, made on its first lookup
}

// CanMount says why this process cannot mount FUSE file systems, or nil if it can.
func CanMount() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("%w: /dev/fuse is missing (%v)", ErrNoFUSE, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting without fusermount needs root (running as uid %d)", ErrNoFUSE, os.Geteuid())
	}
	return nil
}

// New mounts an emulated disk at mountpoint (created if missing), storing its files in o.Backing. It mounts with
// mount(2) directly (go-fuse's DirectMount), so it needs root but no fusermount. Unmount it with Unmount (or
// `weir disk unmount`, or umount).
func New(mountpoint string, o Options) (*Mount, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := CanMount(); err != nil {
		return nil, err
	}
	backing, err := filepath.Abs(o.Backing)
	if err != nil {
		return nil, fmt.Errorf("diskfs: %w", err)
	}
	o.Backing = backing
	for _, d := range []string{backing, mountpoint} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("diskfs: %w", err)
		}
	}
	dev, err := model.New(o.Profile)
	if err != nil {
		return nil, err
	}
	u, err := newUndo(backing)
	if err != nil {
		return nil, err
	}
	m := &Mount{dir: mountpoint, o: o, undo: u, clock: model.NewClock(dev, o.RealTime), stop: make(chan struct{})}
	m.engine = newEngine(m.clock, o)
	rootOps, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("diskfs: %w", err)
	}
	ln := rootOps.(*fs.LoopbackNode)
	root := &node{LoopbackNode: ln, m: m}
	ln.RootData.RootNode = root
	timeout := time.Second
	m.server, err = fs.Mount(mountpoint, root, &fs.Options{
		EntryTimeout: &timeout, AttrTimeout: &timeout,
		MountOptions: fuse.MountOptions{
			// Strict: no fallback to fusermount (absent here), so an unmount that finds the file system busy
			// reports EBUSY, which Unmount retries, rather than fusermount's absence.
			DirectMount: true, DirectMountStrict: true, AllowOther: true, FsName: "weirdisk:" + o.Profile.Name, Name: "weirdisk",
			MaxWrite: 1 << 20, Debug: o.Debug,
			DisableSplice: true, // replies of MaxWrite plus a header do not fit a pipe: go-fuse logs each fallback
		},
	})
	if err != nil {
		u.close()
		return nil, fmt.Errorf("diskfs: mount %s: %w", mountpoint, err)
	}
	go m.flusher()
	o.Logger.Info("emulated disk mounted", "mountpoint", mountpoint, "backing", backing, "profile", o.Profile.Name,
		"real-time", o.RealTime)
	return m, nil
}

// flusher runs age-based writeback every second, as Linux's flusher threads do every dirty_writeback interval.
func (m *Mount) flusher() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if !m.cut.Load() {
				m.engine.tick()
			}
		}
	}
}

// Dir is the mountpoint.
func (m *Mount) Dir() string { return m.dir }

// Backing is the backing directory (absolute).
func (m *Mount) Backing() string { return m.o.Backing }

// Unmount unmounts the file system (retrying while it is busy, up to a few seconds) and releases its state. What
// was not fsync'ed stays in the backing directory: unmounting is a clean shutdown, not a power cut.
//
// A mount still busy after the retries is detached lazily (umount2 MNT_DETACH): a process that entered a mount
// namespace of its own after the mount (`ip netns exec`, which other jobs on the machine may run) holds a copy that
// keeps it busy without using it. The server then ends when the kernel lets go of the file system; Unmount waits
// for that up to detachWait, and goes on (logging it) after.
func (m *Mount) Unmount() error {
	var err error
	for i := 0; i < 20; i++ {
		if err = m.server.Unmount(); err == nil || !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if errors.Is(err, syscall.EBUSY) {
		if derr := syscall.Unmount(m.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("diskfs: unmount %s: %w; detaching it: %w", m.dir, err, derr)
		}
		done := make(chan struct{})
		go func() { m.server.Wait(); close(done) }()
		t := time.NewTimer(detachWait)
		select {
		case <-done:
		case <-t.C:
			m.o.Logger.Warn("emulated disk detached but still referenced elsewhere; its server lingers", "mountpoint", m.dir)
		}
		t.Stop()
		m.stopped.Do(func() { close(m.stop) })
		m.undo.close()
		return nil
	}
	if err != nil {
		return fmt.Errorf("diskfs: unmount %s: %w", m.dir, err)
	}
	m.server.Wait()
	m.stopped.Do(func() { close(m.stop) })
	m.undo.close()
	return nil
}

// detachWait bounds the wait for a lazily detached mount's server to end.
const detachWait = 5 * time.Second

// Wait blocks until the file system is unmounted (by Unmount, umount or `weir disk unmount`).
func (m *Mount) Wait() {
	m.server.Wait()
	m.stopped.Do(func() { close(m.stop) })
}

// Unmount unmounts the FUSE file system at mountpoint, served by this or another process.
func Unmount(mountpoint string) error {
	if err := syscall.Unmount(mountpoint, 0); err != nil {
		return fmt.Errorf("diskfs: unmount %s: %w", mountpoint, err)
	}
	return nil
}

// LoseUnsynced cuts the power: every write no fsync covered is taken back in the backing directory (file data to
// its last fsync; directory entries to their directory's last fsync), the modelled dirty pages are dropped, and
// from then on every operation that would change the file system fails with EIO. Stop (SIGKILL) the processes
// using the mount first, as a power cut would; unmount and mount again to power on.
func (m *Mount) LoseUnsynced() (CutReport, error) {
	m.rw.Lock()
	defer m.rw.Unlock()
	if m.cut.Load() {
		return CutReport{}, ErrCut
	}
	m.cut.Store(true)
	pages := m.engine.lose()
	rep, err := m.undo.cut()
	rep.DirtyPages = pages
	m.o.Logger.Warn("power cut: unsynced writes lost", "files", rep.Files, "entries-removed", rep.Removed,
		"entries-restored", rep.Restored, "dirty-pages", rep.DirtyPages, "err", err)
	return rep, err
}

// PowerCycle cuts the power (LoseUnsynced), unmounts, and mounts a fresh file system of the same options over
// the same backing directory: the machine powered on again, its disk holding what the cut left, with a new clock
// and an empty page cache. Stop (SIGKILL) the processes using the mount first. The old Mount is done with; use the
// returned one. When the cut fails the disk is still unmounted and mounted again (what the backing directory then
// holds is uncertain, and the error says so).
func (m *Mount) PowerCycle() (*Mount, CutReport, error) {
	rep, cutErr := m.LoseUnsynced()
	if err := m.Unmount(); err != nil {
		return nil, rep, errors.Join(cutErr, err)
	}
	nm, err := New(m.dir, m.o)
	if err != nil {
		return nil, rep, errors.Join(cutErr, fmt.Errorf("diskfs: mount again after the cut: %w", err))
	}
	if cutErr != nil {
		return nm, rep, fmt.Errorf("diskfs: power cut of %s: %w", m.dir, cutErr)
	}
	return nm, rep, nil
}

// Sync writes back everything dirty and flushes the device (sync(2)); the undo log stays, as sync(2) on Linux
// makes no promise a power cut would keep.
func (m *Mount) Sync() time.Duration { return m.engine.syncAll() }

// Status is a mount's state and what its device did.
type Status struct {
	Profile       string
	Summary       string
	RealTime      bool
	Cut           bool
	DeviceTime    time.Duration // the device's clock: simulated, or wall time since the mount
	Waited        time.Duration // modelled time callers waited for the device, summed (model.Clock.Waited)
	Device        model.Stats
	Counts        Counts
	DirtyBytes    int64 // in the modelled page cache
	UnsyncedFiles int   // files with writes no fsync covered
	UnsyncedBytes int64 // bytes of synced data they overwrote
	UnsyncedDirs  int   // directories with entries changed since their last fsync
}

// Status reports the mount's state.
func (m *Mount) Status() Status {
	c, dirty := m.engine.countsNow()
	files, bytes, dirs := m.undo.pending()
	return Status{Profile: m.o.Profile.Name, Summary: m.o.Profile.Summary(), RealTime: m.o.RealTime, Cut: m.cut.Load(),
		DeviceTime: m.clock.Now(), Waited: m.clock.Waited(), Device: m.clock.Device().Stats(), Counts: c, DirtyBytes: dirty,
		UnsyncedFiles: files, UnsyncedBytes: bytes, UnsyncedDirs: dirs}
}

// String renders the status as "key: value" lines (the control file's content).
func (s Status) String() string {
	return fmt.Sprintf("profile: %s\ndevice: %s\nreal_time: %v\ncut: %v\ndevice_time_ns: %d\nwaited_ns: %d\nrequests: %d\n"+
		"commands: %d\nreads: %d\nwrites: %d\nflushes: %d\nbytes_read: %d\nbytes_written: %d\nbusy_ns: %d\n"+
		"cache_hits: %d\ncache_misses: %d\nwriteback_pages: %d\ndirect_pages: %d\nfsyncs: %d\njournal_commits: %d\n"+
		"throttled_ns: %d\nmax_fsync_ns: %d\ndirty_bytes: %d\nunsynced_files: %d\nunsynced_bytes: %d\nunsynced_dirs: %d\n",
		s.Profile, s.Summary, s.RealTime, s.Cut, s.DeviceTime.Nanoseconds(), s.Waited.Nanoseconds(), s.Device.Requests, s.Device.Commands,
		s.Device.Reads, s.Device.Writes, s.Device.Flushes, s.Device.BytesRead, s.Device.BytesWritten,
		s.Device.Busy.Nanoseconds(), s.Counts.CacheHits, s.Counts.CacheMisses, s.Counts.WritebackPages,
		s.Counts.DirectPages, s.Counts.Fsyncs, s.Counts.JournalCommits, s.Counts.Throttled.Nanoseconds(),
		s.Counts.MaxFsync.Nanoseconds(), s.DirtyBytes, s.UnsyncedFiles, s.UnsyncedBytes, s.UnsyncedDirs)
}

// enter starts an operation that changes the file system: it fails with EIO after a cut.
func (m *Mount) enter() (func(), syscall.Errno) {
	m.rw.RLock()
	if m.cut.Load() {
		m.rw.RUnlock()
		return nil, syscall.EIO
	}
	return m.rw.RUnlock, 0
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
