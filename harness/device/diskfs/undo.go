package diskfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// stateDir is weir's directory inside the backing directory: trash/ keeps, by inode number, files unlinked or
// replaced since their directory's last fsync (so a power cut can bring them back); undo/ holds the pre-images of
// overwritten synced bytes (in unlinked files); stage/ is used during a cut.
// The mount shows the control directory under this name instead.
const stateDir = ".weirdisk"

// undo is the lose-unsynced log. Every change reaches the backing directory at once (so reads, listings and other
// processes see what the page cache would), and undo remembers how to take back what no fsync covered:
//
//   - file data: per inode, the size at its last fsync and the bytes each later write or truncate overwrote below
//     that size (pre-images), with an open descriptor, so renames and unlinks do not lose the file. fsync forgets
//     them. A cut truncates back to the synced size and writes the pre-images back, newest first.
//   - directory entries: per directory, its entries (name → inode, directories excluded) as of its last fsync,
//     taken at its first change after it. Unlinked and replaced files are hard-linked into the trash first. A cut
//     removes entries the snapshot lacks and links back those it has (from the trash, or from wherever a rename
//     put them). Directories themselves (mkdir, rmdir, renaming a directory) are durable at once, like vfs.MemFS's
//     MkdirAll: kept simple on purpose.
type undo struct {
	mu      sync.Mutex
	backing string
	files   map[uint64]*fileUndo
	dirs    map[uint64]*dirUndo
}

type fileUndo struct {
	f     *os.File
	size  int64 // at the last fsync
	pre   []preimage
	bytes int64    // in pre
	spill *os.File // the pre-images' bytes, in .weirdisk/undo (unlinked at once), so they take no memory
}

type preimage struct {
	off   int64 // in the file
	at, n int64 // in spill
}

type dirUndo struct {
	f       *os.File // the directory, for *at calls wherever it is renamed to
	entries map[string]uint64
}

func newUndo(backing string) (*undo, error) {
	for _, d := range []string{"trash", "stage", "undo"} {
		p := filepath.Join(backing, stateDir, d)
		if err := os.RemoveAll(p); err != nil {
			return nil, fmt.Errorf("diskfs: clear %s: %w", p, err)
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("diskfs: %w", err)
		}
	}
	return &undo{backing: backing, files: map[uint64]*fileUndo{}, dirs: map[uint64]*dirUndo{}}, nil
}

// beforeData must be called, under u.mu, before [off, off+n) of the file open at path (or its descriptor fd, if
// fd >= 0) changes; n < 0 means "from off to the end" (a truncation to off).
func (u *undo) beforeData(ino uint64, fd int, path string, off, n int64) error {
	fu := u.files[ino]
	if fu == nil {
		var f *os.File
		var err error
		if fd >= 0 {
			f, err = os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDWR, 0)
		} else {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
		}
		if err != nil {
			return fmt.Errorf("diskfs: keep the synced state of inode %d: %w", ino, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("diskfs: keep the synced state of inode %d: %w", ino, err)
		}
		spill, err := os.CreateTemp(filepath.Join(u.backing, stateDir, "undo"), "pre-")
		if err != nil {
			f.Close()
			return fmt.Errorf("diskfs: keep the synced state of inode %d: %w", ino, err)
		}
		os.Remove(spill.Name())
		fu = &fileUndo{f: f, size: st.Size(), spill: spill}
		u.files[ino] = fu
	}
	end := off + n
	if n < 0 {
		end = fu.size
	}
	end = min(end, fu.size)
	if off >= end {
		return nil
	}
	b := make([]byte, end-off)
	k, err := fu.f.ReadAt(b, off)
	if err != nil && k < len(b) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("diskfs: keep the synced bytes of inode %d at %d: %w", ino, off, err)
	}
	if _, err := fu.spill.WriteAt(b[:k], fu.bytes); err != nil {
		return fmt.Errorf("diskfs: keep the synced bytes of inode %d at %d: %w", ino, off, err)
	}
	fu.pre = append(fu.pre, preimage{off: off, at: fu.bytes, n: int64(k)})
	fu.bytes += int64(k)
	return nil
}

// synced forgets the undo of a file whose data an fsync covered.
func (u *undo) synced(ino uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if fu := u.files[ino]; fu != nil {
		fu.close()
		delete(u.files, ino)
	}
}

// beforeDir must be called, under u.mu, before an entry of the directory at path changes.
func (u *undo) beforeDir(ino uint64, path string) error {
	if u.dirs[ino] != nil {
		return nil
	}
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("diskfs: keep the synced entries of %s: %w", path, err)
	}
	entries, err := listFiles(d)
	if err != nil {
		d.Close()
		return fmt.Errorf("diskfs: keep the synced entries of %s: %w", path, err)
	}
	u.dirs[ino] = &dirUndo{f: d, entries: entries}
	return nil
}

// listFiles returns a directory's non-directory entries and their inodes.
func listFiles(d *os.File) (map[string]uint64, error) {
	if _, err := d.Seek(0, 0); err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			out[name] = st.Ino
		}
	}
	return out, nil
}

// keep hard-links the file at path into the trash before it is unlinked or replaced, under u.mu, if some
// directory's synced entries may need it back. Directories and missing paths are left alone.
func (u *undo) keep(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil
	}
	if len(u.dirs) == 0 {
		return nil
	}
	t := filepath.Join(u.backing, stateDir, "trash", strconv.FormatUint(st.Ino, 10))
	if err := unix.Link(path, t); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("diskfs: keep %s in the trash: %w", path, err)
	}
	return nil
}

// dirSynced forgets the snapshot of a directory an fsync covered, and empties the trash of files no snapshot
// needs.
func (u *undo) dirSynced(ino uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	d := u.dirs[ino]
	if d == nil {
		return
	}
	d.f.Close()
	delete(u.dirs, ino)
	need := map[uint64]bool{}
	for _, d := range u.dirs {
		for _, i := range d.entries {
			need[i] = true
		}
	}
	trash := filepath.Join(u.backing, stateDir, "trash")
	names, _ := readNames(trash)
	for _, name := range names {
		if i, err := strconv.ParseUint(name, 10, 64); err == nil && !need[i] {
			os.Remove(filepath.Join(trash, name))
		}
	}
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// CutReport says what a power cut took back.
type CutReport struct {
	Files        int   // files whose data was taken back to their last fsync
	BytesRestore int64 // pre-image bytes written back
	Removed      int   // directory entries removed (created, or renamed in, since the directory's last fsync)
	Restored     int   // directory entries brought back (unlinked, renamed away or replaced since then)
	DirtyPages   int64 // modelled page-cache pages that never reached the device
}

// cut takes back everything no fsync covered. The caller holds the file system's write lock: nothing else runs.
func (u *undo) cut() (CutReport, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var rep CutReport
	var errs []error
	stage := filepath.Join(u.backing, stateDir, "stage")
	trash := filepath.Join(u.backing, stateDir, "trash")
	ids := slices.Sorted(maps.Keys(u.dirs))
	// Stage every inode to be restored before removing any name (a name to remove may be the only link left).
	type restore struct {
		d    *dirUndo
		name string
		ino  uint64
	}
	var restores []restore
	now := map[uint64]map[string]uint64{}
	for _, id := range ids {
		d := u.dirs[id]
		cur, err := listFiles(d.f)
		if err != nil {
			errs = append(errs, fmt.Errorf("diskfs: cut: list %s: %w", d.f.Name(), err))
			continue
		}
		now[id] = cur
		for name, ino := range d.entries {
			if cur[name] != ino {
				restores = append(restores, restore{d, name, ino})
			}
		}
	}
	for _, r := range restores {
		dst := filepath.Join(stage, strconv.FormatUint(r.ino, 10))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		src := filepath.Join(trash, strconv.FormatUint(r.ino, 10))
		if _, err := os.Lstat(src); err != nil {
			src = u.find(r.ino)
		}
		if src == "" {
			errs = append(errs, fmt.Errorf("diskfs: cut: inode %d (%s) is gone", r.ino, r.name))
			continue
		}
		if err := unix.Link(src, dst); err != nil {
			errs = append(errs, fmt.Errorf("diskfs: cut: stage inode %d: %w", r.ino, err))
		}
	}
	for _, id := range ids {
		d := u.dirs[id]
		for name, ino := range now[id] {
			if was, ok := d.entries[name]; !ok || was != ino {
				if err := unix.Unlinkat(int(d.f.Fd()), name, 0); err != nil {
					errs = append(errs, fmt.Errorf("diskfs: cut: remove %s/%s: %w", d.f.Name(), name, err))
				}
				rep.Removed++
			}
		}
	}
	for _, r := range restores {
		src := filepath.Join(stage, strconv.FormatUint(r.ino, 10))
		if err := unix.Linkat(unix.AT_FDCWD, src, int(r.d.f.Fd()), r.name, 0); err != nil {
			errs = append(errs, fmt.Errorf("diskfs: cut: restore %s/%s: %w", r.d.f.Name(), r.name, err))
			continue
		}
		rep.Restored++
	}
	for _, id := range ids {
		u.dirs[id].f.Close()
	}
	u.dirs = map[uint64]*dirUndo{}
	for ino, fu := range u.files {
		if err := fu.f.Truncate(fu.size); err != nil {
			errs = append(errs, fmt.Errorf("diskfs: cut: truncate inode %d: %w", ino, err))
		}
		for i := len(fu.pre) - 1; i >= 0; i-- {
			p := fu.pre[i]
			b := make([]byte, p.n)
			_, err := fu.spill.ReadAt(b, p.at)
			if err == nil {
				_, err = fu.f.WriteAt(b, p.off)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("diskfs: cut: restore inode %d at %d: %w", ino, p.off, err))
			}
			rep.BytesRestore += p.n
		}
		if err := fu.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("diskfs: cut: sync inode %d: %w", ino, err))
		}
		fu.close()
		rep.Files++
	}
	u.files = map[uint64]*fileUndo{}
	for _, d := range []string{stage, trash} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
		os.MkdirAll(d, 0o700)
	}
	unix.Sync()
	return rep, errors.Join(errs...)
}

// find returns a path in the backing directory whose inode is ino, or "".
func (u *undo) find(ino uint64) string {
	var found string
	filepath.WalkDir(u.backing, func(p string, de fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipDir
		}
		if de.IsDir() {
			if p == filepath.Join(u.backing, stateDir) {
				return filepath.SkipDir
			}
			return nil
		}
		if info, err := de.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Ino == ino {
				found = p
				return filepath.SkipAll
			}
		}
		return nil
	})
	return found
}

// pending counts what a cut would take back now.
func (u *undo) pending() (files int, bytes int64, dirs int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, fu := range u.files {
		bytes += fu.bytes
	}
	return len(u.files), bytes, len(u.dirs)
}

func (u *undo) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, fu := range u.files {
		fu.close()
	}
	for _, d := range u.dirs {
		d.f.Close()
	}
	u.files, u.dirs = map[uint64]*fileUndo{}, map[uint64]*dirUndo{}
}

func (fu *fileUndo) close() {
	fu.f.Close()
	fu.spill.Close()
}
